// tests/e2e/steps.mjs: how an e2e client script reports to its C test (js_expect_steps, tests/e2e/jserver.h): one JSON
// line a step, {"step", "ok", "ms", "detail"}, then a last "done" line; the script exits 0 when no step failed, else 1.

let failed = 0;
const why = e => String(e && e.stack ? e.stack : e).slice(0, 2000);

export const emit = obj => process.stdout.write(JSON.stringify(obj) + '\n');

// Runs `fn` as the step `name`: what it returns is the detail, what it throws fails the step (and the script).
export const step = async (name, fn) => {
    const t0 = Date.now();
    try {
        const detail = await fn();
        emit({ step: name, ok: true, ms: Date.now() - t0, detail: detail ?? '' });
    } catch (e) {
        failed++;
        emit({ step: name, ok: false, ms: Date.now() - t0, detail: why(e) });
    }
};

export const check = (cond, what) => {
    if (!cond) throw new Error(what);
};

// Runs the script's body `main`: what it throws outside a step is the failed step `what`; then the "done" line, `timer`
// cleared, and the exit.
export async function finish(main, what, timer) {
    try {
        await main();
    } catch (e) {
        failed++;
        emit({ step: what, ok: false, detail: why(e) });
    }
    emit({ step: 'done', ok: failed === 0, detail: `${failed} failed` });
    clearTimeout(timer);
    process.exit(failed === 0 ? 0 : 1);
}
