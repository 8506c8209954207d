// tests/e2e/e2b_client/e2b_client.mjs: E2B's code-interpreter SDK (@e2b/code-interpreter, unmodified) driving kgate's
// E2B door (docs/e2b.md) through what a user of the SDK does.
//
// Usage: node e2b_client.mjs --scenario main|debug|token [--url http://127.0.0.1:PORT] [--token T] [--modules DIR]
//   --modules: where deploy/deps.sh ran `npm ci` on this directory's lock ($KGATE_E2B_CLIENT_DIR,
//              default /usr/local/lib/kgate/e2b-client).
//   main:  Sandbox.create({debug: true, sandboxUrl: URL}): every runCode and context method.
//   debug: Sandbox.create({debug: true}) with no URL: the SDK's own localhost:49999.
//   token: the SDK's sandbox built with the tokens a connect would give it (E2B-Traffic-Access-Token,
//          X-Access-Token) = T, against a kgate that requires T; and one with a wrong token.
// Prints one JSON line per step on stdout, {"step", "ok", "detail"}; exits 0 when every step passed, 1 otherwise.

import { globalTimer, loadFrom, opt } from '../client_setup.mjs';
import { check, finish, step } from '../steps.mjs';

const url = opt('url');
const token = opt('token', '');
const scenario = opt('scenario', 'main');
const modulesDir = opt('modules', process.env.KGATE_E2B_CLIENT_DIR || '/usr/local/lib/kgate/e2b-client');
const timeoutMs = Number(opt('timeout-ms', '240000'));
const timer = globalTimer(timeoutMs);
const { Sandbox } = loadFrom(modulesDir, '@e2b/code-interpreter', require => require('@e2b/code-interpreter'));

const expectThrow = async (fn, name) => {
    try {
        await fn();
    } catch (e) {
        check(e.name === name || e.constructor.name === name, `threw ${e.name}/${e.constructor.name}: ${e.message}, not ${name}`);
        return e;
    }
    throw new Error(`did not throw ${name}`);
};

async function main(sbx) {
    await step('stdout_stderr_callbacks', async () => {
        const out = [], err = [];
        const ex = await sbx.runCode('import sys\nprint("to out")\nprint("to err", file=sys.stderr)', {
            onStdout: m => out.push(m.line),
            onStderr: m => err.push(m.line),
        });
        check(out.join('') === 'to out\n', `onStdout got ${JSON.stringify(out)}`);
        check(err.join('') === 'to err\n', `onStderr got ${JSON.stringify(err)}`);
        check(ex.logs.stdout.join('') === 'to out\n' && ex.logs.stderr.join('') === 'to err\n', JSON.stringify(ex.logs));
        check(ex.executionCount > 0, `executionCount ${ex.executionCount}`);
        check(!ex.error, `error ${JSON.stringify(ex.error)}`);
    });
    await step('main_result_text', async () => {
        const ex = await sbx.runCode('"abc"');
        check(ex.text === 'abc', `text ${JSON.stringify(ex.text)} (quotes stripped)`);
        check(ex.results.length === 1 && ex.results[0].isMainResult === true, JSON.stringify(ex.results));
    });
    await step('matplotlib_png', async () => {
        const ex = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()');
        check(!ex.error, `error ${ex.error && ex.error.name}: ${ex.error && ex.error.value}`);
        const png = ex.results.find(r => r.png);
        check(png, `no png among ${JSON.stringify(ex.results.map(r => r.formats()))}`);
        const bytes = Buffer.from(png.png, 'base64');
        check(bytes.subarray(1, 4).toString() === 'PNG' && bytes.length > 1000, `not a PNG (${bytes.length} bytes)`);
        check(png.isMainResult === false, 'a displayed figure is not the main result');
    });
    await step('html_and_json_results', async () => {
        const ex = await sbx.runCode('from IPython.display import HTML, JSON, display\ndisplay(HTML("<b>bold</b>"))\ndisplay(JSON({"k": [1, 2]}))');
        const html = ex.results.find(r => r.html), json = ex.results.find(r => r.json);
        check(html && html.html === '<b>bold</b>', JSON.stringify(ex.results));
        check(json && JSON.stringify(json.json) === '{"k":[1,2]}', `json ${json && JSON.stringify(json.json)}`);
        check(html.formats().includes('html') && json.formats().includes('json'), 'formats()');
    });
    await step('error_with_traceback', async () => {
        const errors = [];
        const ex = await sbx.runCode('def f():\n    return 1/0\nf()', { onError: e => errors.push(e) });
        check(ex.error && ex.error.name === 'ZeroDivisionError', `error ${JSON.stringify(ex.error)}`);
        check(ex.error.value === 'division by zero', ex.error.value);
        check(ex.error.traceback.includes('ZeroDivisionError') && ex.error.traceback.includes('1/0'), ex.error.traceback);
        check(errors.length === 1, `onError called ${errors.length} times`);
    });
    await step('state_across_calls', async () => {
        await sbx.runCode('counter = 41');
        const ex = await sbx.runCode('counter + 1');
        check(ex.text === '42', `text ${ex.text}`);
    });
    let py;
    await step('create_context_python', async () => {
        py = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' });
        check(py.id && py.language === 'python' && py.cwd === '/tmp', JSON.stringify(py));
        const ex = await sbx.runCode('import os\nos.getcwd()', { context: py });
        check(ex.text === '/tmp', `cwd ${ex.text}`);
        await sbx.runCode('mine = 7', { context: py });
        const other = await sbx.runCode('"mine" in globals()');
        check(other.text === 'False', 'the default context sees the new context\'s variable');
    });
    let js, ts;
    await step('create_context_js_ts', async () => {
        js = await sbx.createCodeContext({ language: 'js' });
        check(js.language === 'javascript', JSON.stringify(js));
        const a = await sbx.runCode('let k = 20; k + 1', { context: js });
        check(a.text === '21', `js ${a.text} ${JSON.stringify(a.error)}`);
        ts = await sbx.createCodeContext({ language: 'ts' });
        check(ts.language === 'typescript', JSON.stringify(ts));
        const b = await sbx.runCode('const n: number = 5;\nn * 2', { context: ts });
        check(b.text === '10', `ts ${b.text} ${JSON.stringify(b.error)}`);
        const c = await sbx.runCode('[1, 2].length', { language: 'js' });
        check(c.text === '2', `language js ${c.text}`);
    });
    await step('list_contexts', async () => {
        const list = await sbx.listCodeContexts();
        for (const c of [py, js, ts])
            check(list.some(x => x.id === c.id && x.language === c.language), `${c.id} (${c.language}) not in ${JSON.stringify(list)}`);
        check(list.some(x => x.language === 'python' && x.id !== py.id), 'the default python context is listed');
    });
    await step('restart_context', async () => {
        await sbx.restartCodeContext(py);
        const ex = await sbx.runCode('mine', { context: py });
        check(ex.error && ex.error.name === 'NameError', `after a restart: ${JSON.stringify(ex.error)} ${ex.text}`);
        const again = await sbx.runCode('1 + 1', { context: py.id });
        check(again.text === '2', 'the restarted context runs');
    });
    await step('remove_context', async () => {
        await sbx.removeCodeContext(ts);
        const list = await sbx.listCodeContexts();
        check(!list.some(x => x.id === ts.id), 'removed context still listed');
        const e = await expectThrow(() => sbx.runCode('1', { context: ts }), 'NotFoundError');
        check(e.message.includes(ts.id), e.message);
        await expectThrow(() => sbx.removeCodeContext(ts.id), 'NotFoundError');
    });
    await step('envs_for_one_run', async () => {
        const a = await sbx.runCode('import os\nprint(os.environ.get("E2B_KGATE_T"))', { envs: { E2B_KGATE_T: "v'1\"" } });
        check(a.logs.stdout.join('') === "v'1\"\n", `with envs: ${JSON.stringify(a.logs)}`);
        const b = await sbx.runCode('print(os.environ.get("E2B_KGATE_T"))');
        check(b.logs.stdout.join('') === 'None\n', `after: ${JSON.stringify(b.logs)}`);
        const c = await sbx.runCode('process.env.E2B_KGATE_J ?? Deno.env.get("E2B_KGATE_J")', { context: js, envs: { E2B_KGATE_J: 'j' } });
        check(c.text === 'j', `js envs: ${c.text} ${JSON.stringify(c.error)}`);
    });
    await step('print_20mb_in_order', async () => {
        // 200,000 lines of 100 bytes: "000000 " + 92 x's + "\n"
        let received = 0;
        const ex = await sbx.runCode('import sys\nfor i in range(200000):\n    sys.stdout.write("%06d %s\\n" % (i, "x" * 92))', {
            onStdout: m => { received += m.line.length; },
            timeoutMs: 180000,
        });
        const text = ex.logs.stdout.join('');
        check(!ex.error, `error ${JSON.stringify(ex.error)}`);
        check(text.length === 20000000 && received === 20000000, `${text.length} bytes (callbacks ${received}), not 20,000,000`);
        for (let i = 0; i < 200000; i += 1) {
            const at = i * 100;
            if (text.slice(at, at + 7) !== String(i).padStart(6, '0') + ' ')
                throw new Error(`line ${i} out of place: ${JSON.stringify(text.slice(at, at + 20))}`);
        }
        return `${ex.logs.stdout.length} chunks`;
    });
    await step('sdk_timeout_leaves_context_usable', async () => {
        const t0 = Date.now();
        await expectThrow(() => sbx.runCode('import time\ntime.sleep(120)', { context: py, timeoutMs: 2000 }), 'TimeoutError');
        check(Date.now() - t0 < 20000, `the timeout took ${Date.now() - t0} ms`);
        // the request going away interrupted the run: the context answers long before the sleep would end
        const ex = await sbx.runCode('21 * 2', { context: py, timeoutMs: 30000 });
        check(ex.text === '42', `after the timeout: ${ex.text} ${JSON.stringify(ex.error)}`);
        const still = await sbx.runCode('1 + 1', { context: py });
        check(still.text === '2', 'state after');
    });
    await step('keepalive_is_ignored_by_the_sdk', async () => {
        const ex = await sbx.runCode('import time\ntime.sleep(6)\nprint("after")', { timeoutMs: 30000 });
        check(ex.logs.stdout.join('') === 'after\n' && !ex.error, JSON.stringify(ex.logs));
    });
}

async function run() {
    if (scenario === 'main') {
        const sbx = await Sandbox.create({ debug: true, sandboxUrl: url });
        await main(sbx);
    } else if (scenario === 'debug') {
        // no URL: the SDK's own debug address, http://localhost:49999
        const sbx = await Sandbox.create({ debug: true });
        await step('debug_mode_runs_code', async () => {
            check(sbx.sandboxId === 'debug_sandbox_id', sbx.sandboxId);
            const ex = await sbx.runCode('x = 6\nx * 7');
            check(ex.text === '42', `text ${ex.text}`);
            const ctx = await sbx.createCodeContext();
            check((await sbx.listCodeContexts()).some(c => c.id === ctx.id), 'listed');
            await sbx.removeCodeContext(ctx);
        });
    } else if (scenario === 'token') {
        // what Sandbox.connect builds from the API's answer outside debug mode: both tokens set
        const opts = { sandboxId: 'kgate', debug: true, sandboxUrl: url, envdVersion: '99.99.99' };
        const sbx = new Sandbox({ ...opts, trafficAccessToken: token, envdAccessToken: token });
        await step('tokens_accepted', async () => {
            const ex = await sbx.runCode('1 + 2');
            check(ex.text === '3', `text ${ex.text}`);
            const ctx = await sbx.createCodeContext({ language: 'python' });
            check((await sbx.listCodeContexts()).some(c => c.id === ctx.id), 'listed');
            await sbx.restartCodeContext(ctx);
            await sbx.removeCodeContext(ctx);
        });
        await step('wrong_token_refused', async () => {
            const bad = new Sandbox({ ...opts, trafficAccessToken: 'wrong', envdAccessToken: 'wrong' });
            const e = await expectThrow(() => bad.runCode('1'), 'SandboxError');
            check(e.message.includes('401'), e.message);
            await expectThrow(() => bad.listCodeContexts(), 'SandboxError');
            const none = await Sandbox.create({ debug: true, sandboxUrl: url });
            await expectThrow(() => none.runCode('1'), 'SandboxError');
        });
    }
}

await finish(run, 'run', timer);
