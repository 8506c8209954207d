// tests/e2e/jupyter_clients/lab_client.mjs: JupyterLab's own client library (@jupyterlab/services, with `ws`)
// driving a Jupyter Server kernels API (kgate's, or Jupyter Server itself) through every step a notebook front end takes.
//
// Usage: node lab_client.mjs --base-url http://127.0.0.1:PORT/ --token TOKEN [--modules DIR] [--timeout-ms N]
//                            [--steps a,b,...] [--kernel python3]
//   --modules: where deploy/deps.sh ran `npm ci` on this directory's lock ($KGATE_JCLIENTS_DIR,
//              default /usr/local/lib/kgate/jupyter-clients); the packages are loaded from there.
//   KGATE_JCLIENTS_TRACE=1 writes every HTTP request and WebSocket frame the library sends to stderr.
// Prints one JSON line per step on stdout, {"step": ..., "ok": true|false, "detail": ...}, then {"step":"done",...}.
// Exits 0 when every step passed, 1 when one failed, 2 on a usage error or the global timeout.

import { createRequire } from 'node:module';
import path from 'node:path';

const argv = process.argv.slice(2);
const opt = (name, dflt) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
};
const baseUrl = opt('base-url');
const token = opt('token', '');
const modulesDir = opt('modules', process.env.KGATE_JCLIENTS_DIR || '/usr/local/lib/kgate/jupyter-clients');
const timeoutMs = Number(opt('timeout-ms', '240000'));
const kernelName = opt('kernel', 'python3');
const onlySteps = opt('steps', '');
const trace = !!process.env.KGATE_JCLIENTS_TRACE && process.env.KGATE_JCLIENTS_TRACE !== '0';
if (!baseUrl) {
    process.stderr.write('usage: node lab_client.mjs --base-url URL --token TOKEN [--modules DIR] [--timeout-ms N]\n');
    process.exit(2);
}

// stdout carries the step lines only: the library logs through console.debug/log/warn, which go to stderr.
for (const level of ['log', 'debug', 'info', 'warn']) console[level] = (...a) => console.error(`[lab:${level}]`, ...a);

const emit = obj => process.stdout.write(JSON.stringify(obj) + '\n');
const timer = setTimeout(() => {
    emit({ step: 'timeout', ok: false, detail: `global timeout of ${timeoutMs} ms` });
    process.exit(2);
}, timeoutMs);

let require;
let services, WS;
try {
    require = createRequire(path.join(path.resolve(modulesDir), 'package.json'));
    services = require('@jupyterlab/services');
    WS = require('ws');
} catch (e) {
    emit({ step: 'load', ok: false, detail: `cannot load @jupyterlab/services and ws from ${modulesDir} (deploy/deps.sh installs them): ${e.message}` });
    process.exit(2);
}
const { ServerConnection, KernelManager, KernelAPI, KernelSpecAPI, SessionManager, SessionAPI } = services;
const serializer = require('@jupyterlab/services/lib/kernel/serialize');

// ---- the transports, traced on request --------------------------------------------------------------------------------
const short = s => (typeof s === 'string' && s.length > 300 ? s.slice(0, 300) + '...' : s);
const tracedFetch = async (input, init) => {
    if (trace) {
        const req = input instanceof Request ? input : new Request(input, init);
        const headers = {};
        req.headers.forEach((v, k) => (headers[k] = k === 'authorization' ? v.replace(token, '<token>') : v));
        console.error(`[trace] HTTP ${req.method} ${req.url.replace(token, '<token>')} ${JSON.stringify(headers)}`);
        const resp = await fetch(req);
        console.error(`[trace] HTTP ${resp.status} <- ${req.method} ${req.url.replace(token, '<token>')}`);
        return resp;
    }
    return fetch(input, init);
};
const toArrayBuffer = b => (b instanceof ArrayBuffer ? b : b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
/** One line for a WebSocket message in either framing: channel, type, ids, and the start of the content. */
const describe = data => {
    try {
        const binary = typeof data !== 'string';
        const m = binary ? serializer.deserialize(toArrayBuffer(data), 'v1.kernel.websocket.jupyter.org') : JSON.parse(data);
        const parent = m.parent_header && m.parent_header.msg_type ? ` parent=${m.parent_header.msg_type}/${m.parent_header.msg_id}` : '';
        return `${binary ? 'binary' : 'text'} ${m.channel} ${m.header.msg_type} id=${m.header.msg_id} session=${m.header.session}${parent} content=${short(JSON.stringify(m.content))}`;
    } catch (e) {
        return `<undecodable ${typeof data === 'string' ? data.length : data.byteLength} bytes: ${e.message}>`;
    }
};
class TracedWebSocket extends WS {
    constructor(url, protocols, options) {
        super(url, protocols, options);
        if (!trace) return;
        console.error(`[trace] WS open ${String(url).replace(token, '<token>')} protocols=${JSON.stringify(protocols)}`);
        this.on('open', () => console.error(`[trace] WS opened, selected protocol '${this.protocol}'`));
        this.on('close', (code, reason) => console.error(`[trace] WS closed ${code} ${reason}`));
        this.on('message', (data, isBinary) => console.error(`[trace] WS recv ${describe(isBinary ? toArrayBuffer(data) : String(data))}`));
    }
    send(data, ...rest) {
        if (trace) console.error(`[trace] WS send ${describe(data)}`);
        return super.send(data, ...rest);
    }
}

const settings = ServerConnection.makeSettings({
    baseUrl,
    wsUrl: baseUrl.replace(/^http/, 'ws'),
    token,
    appendToken: true,
    fetch: tracedFetch,
    WebSocket: TracedWebSocket,
    Request,
    Headers,
});

// ---- helpers ----------------------------------------------------------------------------------------------------------
class StepError extends Error {}
const check = (cond, what) => {
    if (!cond) throw new StepError(what);
};
const sleep = ms => new Promise(r => setTimeout(r, ms));
const withTimeout = (p, ms, what) =>
    Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new StepError(`${what}: no answer within ${ms} ms`)), ms))]);

/** Runs `code`: the reply, every iopub message of it (status included), and what stdin asked. */
async function execute(kernel, code, { allowStdin = false, onStdin = null, ms = 60000, onIOPub = null } = {}) {
    const iopub = [];
    const future = kernel.requestExecute({ code, allow_stdin: allowStdin, stop_on_error: false });
    future.onIOPub = msg => {
        iopub.push(msg);
        if (onIOPub) onIOPub(msg);
    };
    if (onStdin) future.onStdin = msg => onStdin(msg, future);
    const reply = await withTimeout(future.done, ms, `execute ${JSON.stringify(code)}`);
    return { reply, iopub, future };
}
const ofType = (iopub, type) => iopub.filter(m => m.header.msg_type === type);
const plain = (iopub, type = 'execute_result') => ofType(iopub, type).map(m => m.content.data['text/plain']);
const streamText = (iopub, name = 'stdout') =>
    ofType(iopub, 'stream')
        .filter(m => m.content.name === name)
        .map(m => m.content.text)
        .join('');

/** Resolves when the kernel's status (as the library tracks it) becomes `want`. */
function waitStatus(kernel, want, ms) {
    if (kernel.status === want) return Promise.resolve();
    return withTimeout(
        new Promise(resolve => {
            const on = (_, s) => {
                if (s === want) {
                    kernel.statusChanged.disconnect(on);
                    resolve();
                }
            };
            kernel.statusChanged.connect(on);
        }),
        ms,
        `kernel status ${want}`
    );
}

async function expectValue(kernel, code, want) {
    const { reply, iopub } = await execute(kernel, code);
    check(reply.content.status === 'ok', `\`${code}\`: reply status ${reply.content.status} (${reply.content.ename}: ${reply.content.evalue})`);
    const values = plain(iopub);
    check(values.length === 1 && values[0] === want, `\`${code}\`: execute_result ${JSON.stringify(values)}, want ${JSON.stringify(want)}`);
}

// ---- the steps --------------------------------------------------------------------------------------------------------
const state = { kernelManager: null, kernel: null, model: null, sessionManager: null };

const steps = [
    ['api', async () => {
        const resp = await ServerConnection.makeRequest(`${settings.baseUrl}api`, {}, settings);
        check(resp.status === 200, `GET /api: ${resp.status}`);
        const body = await resp.json();
        check(typeof body.version === 'string', `GET /api has no version: ${JSON.stringify(body)}`);
        return `version ${body.version}`;
    }],
    ['kernelspecs', async () => {
        const specs = await KernelSpecAPI.getSpecs(settings);
        check(specs.kernelspecs[kernelName], `no ${kernelName} in ${Object.keys(specs.kernelspecs)}`);
        // The library flattens the server's {name, spec: {...}, resources} into one object.
        const spec = specs.kernelspecs[kernelName];
        check(spec.language === 'python', `language ${spec.language}`);
        const logo = spec.resources['logo-64x64'];
        check(logo, `no logo-64x64 resource: ${JSON.stringify(spec.resources)}`);
        // The resource URL is server-relative (/kernelspecs/python3/logo-64x64.png); Lab fetches it as an <img>, with the token.
        const url = new URL(logo, settings.baseUrl);
        url.searchParams.set('token', token);
        const resp = await fetch(url);
        const bytes = new Uint8Array(await resp.arrayBuffer());
        check(resp.status === 200, `GET ${logo}: ${resp.status}`);
        check(bytes[0] === 0x89 && bytes[1] === 0x50, `GET ${logo} is not a PNG (${resp.headers.get('content-type')})`);
        return `default ${specs.default}; ${logo} ${bytes.length} bytes ${resp.headers.get('content-type')}`;
    }],
    ['start', async () => {
        state.kernelManager = new KernelManager({ serverSettings: settings, standby: 'never' });
        await state.kernelManager.ready;
        state.kernel = await state.kernelManager.startNew({ name: kernelName });
        const info = await withTimeout(state.kernel.info, 60000, 'kernel_info_reply');
        check(info.language_info.name === 'python', `language_info ${JSON.stringify(info.language_info)}`);
        state.model = await KernelAPI.getKernelModel(state.kernel.id, settings);
        check(state.model && state.model.id === state.kernel.id, `GET /api/kernels/{id}: ${JSON.stringify(state.model)}`);
        check(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(state.model.last_activity), `last_activity ${state.model.last_activity}`);
        check(typeof state.model.connections === 'number', `connections ${state.model.connections}`);
        const running = await KernelAPI.listRunning(settings);
        check(running.some(m => m.id === state.kernel.id), 'not in GET /api/kernels');
        return `kernel ${state.kernel.id} (${info.implementation} ${info.language_info.version}), protocol '${state.kernel._selectedProtocol ?? ''}'`;
    }],
    ['stream', async () => {
        const { reply, iopub } = await execute(state.kernel, "print('hello')");
        check(reply.content.status === 'ok', `reply ${reply.content.status}`);
        check(streamText(iopub) === 'hello\n', `stdout ${JSON.stringify(streamText(iopub))}`);
        const states = ofType(iopub, 'status').map(m => m.content.execution_state);
        check(states.includes('busy') && states[states.length - 1] === 'idle', `status messages ${states}`);
        check(ofType(iopub, 'execute_input').length === 1, 'no execute_input');
        return 'stdout hello';
    }],
    ['execute_result', async () => {
        const { reply, iopub } = await execute(state.kernel, '1+1');
        check(reply.content.status === 'ok', `reply ${reply.content.status}`);
        check(JSON.stringify(plain(iopub)) === '["2"]', `execute_result ${JSON.stringify(plain(iopub))}`);
        const r = ofType(iopub, 'execute_result')[0];
        check(r.content.execution_count === reply.content.execution_count, 'execution_count differs between result and reply');
        return `execution_count ${reply.content.execution_count}`;
    }],
    ['display_data', async () => {
        const code = "from IPython.display import display, HTML\ndisplay(HTML('<b>hi</b>'))";
        const { reply, iopub } = await execute(state.kernel, code);
        check(reply.content.status === 'ok', `reply ${reply.content.status}`);
        const d = ofType(iopub, 'display_data');
        check(d.length === 1, `${d.length} display_data messages`);
        check(d[0].content.data['text/html'] === '<b>hi</b>', `text/html ${JSON.stringify(d[0].content.data['text/html'])}`);
        check(typeof d[0].content.data['text/plain'] === 'string', 'no text/plain');
        return Object.keys(d[0].content.data).join(',');
    }],
    ['error', async () => {
        const { reply, iopub } = await execute(state.kernel, "raise ValueError('boom')");
        check(reply.content.status === 'error', `reply ${reply.content.status}`);
        check(reply.content.ename === 'ValueError' && reply.content.evalue === 'boom', `reply ${reply.content.ename}: ${reply.content.evalue}`);
        const e = ofType(iopub, 'error');
        check(e.length === 1 && e[0].content.ename === 'ValueError', `iopub error ${JSON.stringify(e.map(m => m.content.ename))}`);
        check(Array.isArray(e[0].content.traceback) && e[0].content.traceback.length > 0, 'no traceback');
        return 'ValueError: boom';
    }],
    ['interrupt', async () => {
        let busy;
        const sawBusy = new Promise(r => (busy = r));
        const t0 = Date.now();
        const run = execute(state.kernel, 'import time\ntime.sleep(30)', {
            onIOPub: m => m.header.msg_type === 'execute_input' && busy(),
        });
        await withTimeout(sawBusy, 30000, 'execute_input of the sleep');
        await sleep(300);
        await state.kernel.interrupt();
        const { reply } = await run;
        const ms = Date.now() - t0;
        check(reply.content.status === 'error' && reply.content.ename === 'KeyboardInterrupt', `reply ${reply.content.status} ${reply.content.ename}`);
        check(ms < 20000, `the sleep ended after ${ms} ms`);
        await expectValue(state.kernel, '2+3', '5');
        return `KeyboardInterrupt after ${ms} ms, kernel usable`;
    }],
    ['stdin', async () => {
        let prompt = null;
        const { reply } = await execute(state.kernel, "name = input('name? ')", {
            allowStdin: true,
            onStdin: (msg, future) => {
                if (msg.header.msg_type !== 'input_request') return;
                prompt = msg.content.prompt;
                state.kernel.sendInputReply({ status: 'ok', value: 'Ada' }, msg.header);
            },
        });
        check(prompt === 'name? ', `input_request prompt ${JSON.stringify(prompt)}`);
        check(reply.content.status === 'ok', `reply ${reply.content.status} ${reply.content.ename}`);
        await expectValue(state.kernel, 'name', "'Ada'");
        return 'input() answered Ada';
    }],
    ['reconnect', async () => {
        await expectValue(state.kernel, 'x = 41\nx', '41');
        // 1. The library's own reconnect: it severs the WebSocket and opens a new one.
        await withTimeout(state.kernel.reconnect(), 30000, 'kernel.reconnect()');
        await expectValue(state.kernel, 'x+1', '42');
        // 2. A page reload: this connection goes away, a new one connects to the same kernel by id.
        const id = state.kernel.id;
        state.kernel.dispose();
        state.kernel = state.kernelManager.connectTo({ model: { id, name: kernelName } });
        await withTimeout(state.kernel.info, 30000, 'kernel_info_reply on the new connection');
        await expectValue(state.kernel, 'x+1', '42');
        return 'x survives kernel.reconnect() and a new connection';
    }],
    ['restart', async () => {
        await expectValue(state.kernel, 'y = 7\ny', '7');
        const seen = [];
        const on = (_, s) => seen.push(s);
        state.kernel.statusChanged.connect(on);
        await withTimeout(state.kernel.restart(), 60000, 'kernel.restart()');
        await waitStatus(state.kernel, 'idle', 60000);
        state.kernel.statusChanged.disconnect(on);
        const { reply } = await execute(state.kernel, 'y');
        check(reply.content.status === 'error' && reply.content.ename === 'NameError', `after restart \`y\`: ${reply.content.status} ${reply.content.ename}`);
        await expectValue(state.kernel, '1+1', '2');
        const model = await KernelAPI.getKernelModel(state.kernel.id, settings);
        check(model && model.id === state.model.id, 'the kernel id changed on restart');
        return `state gone (NameError), same id; statuses ${seen.join('>')}`;
    }],
    ['sessions', async () => {
        state.sessionManager = new SessionManager({ kernelManager: state.kernelManager, serverSettings: settings, standby: 'never' });
        await state.sessionManager.ready;
        const s = await state.sessionManager.startNew({ path: 'jclients/a.ipynb', name: 'a.ipynb', type: 'notebook', kernel: { name: kernelName } });
        check(s.kernel, 'the session has no kernel');
        const kid = s.kernel.id;
        check(kid !== state.kernel.id, 'the session reused the other kernel');
        await withTimeout(s.kernel.info, 60000, "the session kernel's kernel_info_reply");
        await expectValue(s.kernel, '6*7', '42');
        await s.setPath('jclients/b.ipynb');
        await s.setName('b.ipynb');
        const model = await SessionAPI.getSessionModel(s.id, settings);
        check(model.path === 'jclients/b.ipynb' && model.name === 'b.ipynb', `after rename: path ${model.path} name ${model.name}`);
        check(model.kernel.id === kid, 'the kernel changed with the rename');
        const list = await SessionAPI.listRunning(settings);
        check(list.some(m => m.id === s.id && m.path === 'jclients/b.ipynb'), `GET /api/sessions: ${JSON.stringify(list.map(m => m.path))}`);
        // A PATCH through the REST function too, the way other front ends rename.
        const patched = await SessionAPI.updateSession({ id: s.id, path: 'jclients/c.ipynb' }, settings);
        check(patched.path === 'jclients/c.ipynb', `PATCH path: ${patched.path}`);
        await s.shutdown();
        const after = await SessionAPI.listRunning(settings);
        check(!after.some(m => m.id === s.id), 'the session is still listed after DELETE');
        const k = await KernelAPI.getKernelModel(kid, settings);
        check(k === undefined, `its kernel is still there: ${JSON.stringify(k)}`);
        return `session ${s.id} renamed and deleted with its kernel ${kid}`;
    }],
    ['shutdown', async () => {
        const id = state.kernel.id;
        await state.kernel.shutdown();
        const k = await KernelAPI.getKernelModel(id, settings);
        check(k === undefined, `the kernel is still there: ${JSON.stringify(k)}`);
        const running = await KernelAPI.listRunning(settings);
        check(!running.some(m => m.id === id), 'still in GET /api/kernels');
        state.kernel = null;
        return `kernel ${id} gone`;
    }],
];

let failed = 0;
const selected = onlySteps ? onlySteps.split(',') : null;
for (const [name, fn] of steps) {
    if (selected && !selected.includes(name)) continue;
    const t0 = Date.now();
    try {
        const detail = await fn();
        emit({ step: name, ok: true, ms: Date.now() - t0, detail });
    } catch (e) {
        failed++;
        emit({ step: name, ok: false, ms: Date.now() - t0, detail: e instanceof StepError ? e.message : String(e && e.stack ? e.stack : e) });
        // Later steps need a kernel: without one they would only repeat this failure.
        if (name === 'start') break;
    }
}

// Leave nothing running on the server, whatever failed.
if (state.kernel && !state.kernel.isDisposed) await state.kernel.shutdown().catch(() => {});
state.sessionManager?.dispose();
state.kernelManager?.dispose();
emit({ step: 'done', ok: failed === 0, detail: `${failed} failed` });
clearTimeout(timer);
process.exit(failed === 0 ? 0 : 1);
