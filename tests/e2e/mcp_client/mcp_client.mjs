// tests/e2e/mcp_client/mcp_client.mjs: the official MCP TypeScript SDK's client (@modelcontextprotocol/sdk, Streamable
// HTTP) driving kgate's /mcp door through what an agent does with it (docs/API.md 5.3).
//
// Usage: node mcp_client.mjs --url http://127.0.0.1:PORT/mcp --token TOKEN --kgate http://127.0.0.1:PORT
//                            [--modules DIR] [--scenario main|bounds] [--timeout-ms N]
//   --modules: where deploy/deps.sh ran `npm ci` on this directory's lock ($KGATE_MCP_CLIENT_DIR,
//              default /usr/local/lib/kgate/mcp-client).
//   --scenario main: every tool, state, isolation, images, errors, timeouts, progress, cancellation, session end;
//              bounds: a kgate started with --mcp-max-sessions 1 --mcp-session-idle-ms 1500.
// Prints one JSON line per step on stdout, {"step": ..., "ok": true|false, "detail": ...}, then {"step":"done",...}.
// Exits 0 when every step passed, 1 when one failed, 2 on a usage error or the global timeout.

import fs from 'node:fs';
import { globalTimer, loadFrom, opt, requireOptions } from '../client_setup.mjs';
import { check, finish, step } from '../steps.mjs';

const url = opt('url');
const token = opt('token', '');
const kgate = opt('kgate');
const modulesDir = opt('modules', process.env.KGATE_MCP_CLIENT_DIR || '/usr/local/lib/kgate/mcp-client');
const scenario = opt('scenario', 'main');
const timeoutMs = Number(opt('timeout-ms', '240000'));
const kgatePid = Number(opt('kgate-pid', '0'));
const maxSessions = Number(opt('max-sessions', '0'));
requireOptions([url, kgate], 'node mcp_client.mjs --url URL --token TOKEN --kgate BASE_URL [--modules DIR] [--scenario main|bounds]');
const timer = globalTimer(timeoutMs);
const { Client, StreamableHTTPClientTransport } = loadFrom(modulesDir, '@modelcontextprotocol/sdk', require => ({
    ...require('@modelcontextprotocol/sdk/client/index.js'),
    ...require('@modelcontextprotocol/sdk/client/streamableHttp.js'),
}));

const auth = { Authorization: `Bearer ${token}` };

async function connect(name) {
    const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } });
    const client = new Client({ name, version: '1.0.0' });
    await client.connect(transport);
    return { client, transport };
}
const text = result => (result.content || []).filter(c => c.type === 'text').map(c => c.text).join('');
const run = (s, code, extra = {}, options = {}) =>
    s.client.callTool({ name: 'run_code', arguments: { code, ...extra } }, undefined, { timeout: 120000, ...options });
const bash = (s, command) => s.client.callTool({ name: 'bash', arguments: { command } }, undefined, { timeout: 120000 });
const edit = (s, args) => s.client.callTool({ name: 'str_replace_based_edit_tool', arguments: args });
const contexts = async () => {
    const r = await fetch(`${kgate}/code/contexts`, { headers: auth });
    check(r.status === 200, `GET /code/contexts: HTTP ${r.status}`);
    return (await r.json()).map(c => c.id);
};

// A 2x2 PNG, written by the kernel itself (zlib and struct only: matplotlib need not be installed).
const PNG_CODE = `
import struct, zlib
from IPython.display import Image, display
def _chunk(kind, data):
    c = kind + data
    return struct.pack('>I', len(data)) + c + struct.pack('>I', zlib.crc32(c) & 0xffffffff)
_raw = b''.join(b'\\x00' + b'\\xff\\x00\\x00' * 2 for _ in range(2))
png = b'\\x89PNG\\r\\n\\x1a\\n' + _chunk(b'IHDR', struct.pack('>IIBBBBB', 2, 2, 8, 2, 0, 0, 0)) + _chunk(b'IDAT', zlib.compress(_raw)) + _chunk(b'IEND', b'')
display(Image(data=png, format='png'))
print('drawn')
`;

// kgate's kernels alive now: its live descendants (zombies are dead; its watchdog is no kernel), counted by session id,
// since kernelmgr starts each kernel in its own session (setsid) and a kernel's own children share it.
function kernelsAlive() {
    const procs = [];
    for (const name of fs.readdirSync('/proc')) {
        if (!/^[0-9]+$/.test(name)) continue;
        let stat;
        try {
            stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
        } catch {
            continue; // gone meanwhile
        }
        const close = stat.lastIndexOf(')');
        const comm = stat.slice(stat.indexOf('(') + 1, close);
        const [state, ppid, , sid] = stat.slice(close + 2).split(' ');
        procs.push({ pid: Number(name), comm, state, ppid: Number(ppid), sid: Number(sid) });
    }
    const sessions = new Set();
    const seen = new Set([kgatePid]);
    for (let grew = true; grew;) {
        grew = false;
        for (const p of procs) {
            if (seen.has(p.pid) || !seen.has(p.ppid)) continue;
            seen.add(p.pid);
            grew = true;
            // neither the watchdog nor a kernel template (the kernels forked from it are counted) is a kernel
            if (p.state !== 'Z' && !(p.ppid === kgatePid && p.comm === 'kgate-watchdog') && p.comm !== 'kgate-template') sessions.add(p.sid);
        }
    }
    return sessions.size;
}

async function main() {
    let a, b;
    await step('initialize', async () => {
        a = await connect('kgate-e2e-a');
        const info = a.client.getServerVersion();
        check(info && info.name === 'kgate', `serverInfo ${JSON.stringify(info)}`);
        check(/^[0-9a-f]{32}$/.test(a.transport.sessionId || ''), `Mcp-Session-Id ${a.transport.sessionId}`);
        check(a.transport.protocolVersion === '2025-11-25', `negotiated ${a.transport.protocolVersion}`);
        check(a.client.getServerCapabilities().tools, 'no tools capability');
        await a.client.ping();
        return `session ${a.transport.sessionId.slice(0, 8)}..., ${a.transport.protocolVersion}`;
    });
    await step('list_tools', async () => {
        const { tools } = await a.client.listTools();
        const names = tools.map(t => t.name).sort();
        check(JSON.stringify(names) === JSON.stringify(['bash', 'interrupt', 'list_contexts', 'list_languages', 'restart', 'run_code',
            'str_replace_based_edit_tool']), `tools ${names}`);
        for (const t of tools) check(t.inputSchema && t.inputSchema.type === 'object', `${t.name} has no object inputSchema`);
        check(tools.find(t => t.name === 'run_code').inputSchema.required.includes('code'), 'run_code requires code');
        return names.join(',');
    });
    await step('list_languages', async () => {
        const r = await a.client.callTool({ name: 'list_languages', arguments: {} });
        const langs = r.structuredContent.languages.map(l => l.language);
        check(langs.includes('python'), `languages ${langs}`);
        return langs.join(',');
    });
    await step('state', async () => {
        let r = await run(a, 'x = 41\nprint("set")');
        check(!r.isError && text(r).includes('set'), `first call: ${JSON.stringify(r)}`);
        r = await run(a, 'x + 1');
        check(!r.isError && text(r).trim() === '42', `second call: ${JSON.stringify(r)}`);
        check(r.structuredContent.results[0]['text/plain'] === '42' && r.structuredContent.execution_count === 2,
            `structuredContent ${JSON.stringify(r.structuredContent)}`);
        return text(r).trim();
    });
    await step('isolation', async () => {
        b = await connect('kgate-e2e-b');
        check(b.transport.sessionId !== a.transport.sessionId, 'the same session id twice');
        const r = await run(b, 'x');
        check(r.isError && r.structuredContent.error.ename === 'NameError', `session B sees x: ${JSON.stringify(r)}`);
        return 'NameError in session B';
    });
    await step('image', async () => {
        const r = await run(a, PNG_CODE);
        const img = r.content.find(c => c.type === 'image');
        check(!r.isError && img, `no image block: ${JSON.stringify(r).slice(0, 500)}`);
        check(img.mimeType === 'image/png' && Buffer.from(img.data, 'base64').subarray(1, 4).toString() === 'PNG', `image ${img.mimeType}`);
        check(text(r).includes('drawn'), 'stdout missing');
        return `${img.mimeType}, ${Buffer.from(img.data, 'base64').length} bytes`;
    });
    await step('error', async () => {
        const r = await run(a, 'def f():\n    return 1 / 0\nf()');
        check(r.isError === true, 'not isError');
        check(/Traceback|ZeroDivisionError/.test(text(r)) && text(r).includes('return 1 / 0'), `traceback: ${text(r)}`);
        check(r.structuredContent.error.ename === 'ZeroDivisionError' && r.structuredContent.error.traceback.length > 0, 'error object');
        return r.structuredContent.error.ename;
    });
    await step('timeout', async () => {
        const t0 = Date.now();
        const r = await run(a, 'import time\ntime.sleep(30)', { timeout_ms: 1000 });
        check(r.isError && r.structuredContent.error.ename === 'TimeoutError', `timeout result ${JSON.stringify(r)}`);
        check(Date.now() - t0 < 15000, `took ${Date.now() - t0} ms`);
        const after = await run(a, 'x');
        check(!after.isError && text(after).trim() === '41', `state after the timeout: ${JSON.stringify(after)}`);
        return `TimeoutError after ${Date.now() - t0} ms, state kept`;
    });
    await step('progress', async () => {
        const seen = [];
        const r = await run(a, 'import time\nfor i in range(4):\n    print("tick", i, flush=True)\n    time.sleep(0.5)', {}, {
            onprogress: p => seen.push(p),
        });
        check(!r.isError && text(r).includes('tick 3'), `result ${JSON.stringify(r)}`);
        check(seen.length >= 2, `${seen.length} progress notifications`);
        for (let i = 1; i < seen.length; i++) check(seen[i].progress > seen[i - 1].progress, 'progress does not grow');
        return `${seen.length} notifications, last: ${seen[seen.length - 1].message}`;
    });
    await step('cancel', async () => {
        const ac = new AbortController();
        const t0 = Date.now();
        const pending = run(a, 'import time\ntime.sleep(60)\nprint("not interrupted")', {}, { signal: ac.signal });
        setTimeout(() => ac.abort('the test cancels'), 1500);
        let rejected = false;
        try {
            await pending;
        } catch {
            rejected = true;
        }
        check(rejected, 'the cancelled call resolved');
        // the kernel was interrupted, not left sleeping: the next call answers at once, with its state
        const r = await run(a, 'x');
        check(!r.isError && text(r).trim() === '41', `after the cancellation: ${JSON.stringify(r)}`);
        check(Date.now() - t0 < 20000, `the next call waited ${Date.now() - t0} ms: the run was not interrupted`);
        return `next call answered ${Date.now() - t0} ms after the start`;
    });
    await step('cancel_storm', async () => {
        // Three calls, each cancelled 20 times at once (notifications/cancelled, as a client retrying its cancellation
        // sends them): before its code starts, and while it sleeps. A burst of interrupts killed the kernel or lost the
        // run's reply: the cancelled call never ended and the calls behind it waited for minutes.
        const waited = [];
        for (let storm = 0; storm < 3; storm++) {
            run(a, 'import time\nprint("go", flush=True)\ntime.sleep(60)\nprint("not interrupted")').catch(() => {});
            const requestId = a.client._requestMessageId - 1; // the SDK's id of the call just sent
            await new Promise(r => setTimeout(r, storm * 400));
            await Promise.all(Array.from({ length: 20 }, () =>
                a.client.notification({ method: 'notifications/cancelled', params: { requestId, reason: 'the test cancels' } })));
            const t0 = Date.now();
            const r = await run(a, 'x');
            check(!r.isError && text(r).trim() === '41', `after storm ${storm}: ${JSON.stringify(r)}`);
            waited.push(Date.now() - t0);
            check(waited[storm] < 15000, `the call after storm ${storm} waited ${waited[storm]} ms`);
        }
        return `calls after the storms answered in ${waited.join(', ')} ms`;
    });
    await step('bash', async () => {
        let r = await bash(a, 'mkdir -p mcp_sub && cd mcp_sub && export MCP_VAR=kept');
        check(!r.isError, `cd: ${JSON.stringify(r)}`);
        r = await bash(a, 'pwd; echo "var=$MCP_VAR"');
        check(!r.isError && /mcp_sub\n/.test(text(r)) && text(r).includes('var=kept'), `second call: ${text(r)}`);
        const other = await bash(b, 'pwd');
        check(!/mcp_sub/.test(text(other)), `session B shares the cwd: ${text(other)}`);
        r = await bash(a, '(exit 3)');
        check(r.isError, 'a failing command is not isError');
        return text(await bash(a, 'pwd')).trim();
    });
    await step('editor', async () => {
        let r = await edit(a, { command: 'create', path: 'mcp_edit.txt', file_text: 'alpha\nbeta\n' });
        check(!r.isError, `create: ${text(r)}`);
        r = await edit(a, { command: 'view', path: 'mcp_edit.txt' });
        check(text(r) === '1: alpha\n2: beta', `view: ${JSON.stringify(text(r))}`);
        r = await edit(a, { command: 'str_replace', path: 'mcp_edit.txt', old_str: 'beta', new_str: 'gamma' });
        check(!r.isError, `str_replace: ${text(r)}`);
        r = await edit(a, { command: 'view', path: 'mcp_edit.txt' });
        check(text(r) === '1: alpha\n2: gamma', `view after str_replace: ${JSON.stringify(text(r))}`);
        r = await edit(a, { command: 'str_replace', path: 'mcp_edit.txt', old_str: 'nowhere', new_str: 'x' });
        check(r.isError && text(r).includes('No match'), `no match: ${JSON.stringify(r)}`);
        r = await edit(a, { command: 'undo_edit', path: 'mcp_edit.txt' });
        check(!r.isError, `undo_edit: ${text(r)}`);
        r = await edit(a, { command: 'view', path: 'mcp_edit.txt' });
        check(text(r) === '1: alpha\n2: beta', `view after undo: ${JSON.stringify(text(r))}`);
        r = await edit(a, { command: 'view', path: '../../etc/passwd' });
        check(r.isError, 'a path outside the workspace was served');
        return 'view, str_replace, undo_edit';
    });
    await step('session_end', async () => {
        const before = await contexts();
        check(before.length >= 3, `contexts of both sessions: ${before}`);
        const sid = a.transport.sessionId;
        await a.transport.terminateSession();
        await a.client.close();
        await b.transport.terminateSession();
        await b.client.close();
        const after = await contexts();
        check(after.length === 0, `contexts left after both sessions ended: ${after}`);
        const r = await fetch(url, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid },
            body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
        });
        check(r.status === 404, `a request in the ended session: HTTP ${r.status}`);
        return `${before.length} contexts released`;
    });
}

// A raw initialize, as a client without the SDK sends it: the Response, to read its status, headers and body.
const rawInitialize = () =>
    fetch(url, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
            jsonrpc: '2.0', id: 1, method: 'initialize',
            params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
        }),
    });
const rawPing = sid =>
    fetch(url, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }),
    });

// kgate started with --mcp-max-sessions 1 --mcp-session-idle-ms 6000 --mcp-session-fresh-idle-ms 1000.
async function bounds() {
    let a, b;
    await step('refused_busy', async () => {
        a = await connect('kgate-e2e-a');
        const pending = run(a, 'import time\ntime.sleep(3)\nprint("slept")', { timeout_ms: 20000 });
        await new Promise(res => setTimeout(res, 700));
        const r = await rawInitialize();
        const retry = r.headers.get('retry-after');
        const body = await r.json();
        check(r.status === 429, `initialize while the only session runs a call: HTTP ${r.status}`);
        // the call's timeout (20 s) is when its session is idle at the latest
        check(/^[0-9]+$/.test(retry || '') && Number(retry) >= 1 && Number(retry) <= 20, `Retry-After ${retry}`);
        check(body.jsonrpc === '2.0' && body.id === 1 && body.error && /maximum/.test(body.error.message), `body ${JSON.stringify(body)}`);
        const done = await pending;
        check(!done.isError && text(done).includes('slept'), `the busy session's call: ${JSON.stringify(done)}`);
        return `429, Retry-After ${retry}: ${body.error.message.slice(0, 120)}`;
    });
    await step('evicted_idle', async () => {
        // a is idle now: a new client takes its place, and a hears 404 (the spec's "start a new session")
        b = await connect('kgate-e2e-b');
        check((await contexts()).length === 0, 'the evicted session kept its kernel');
        const r = await rawPing(a.transport.sessionId);
        const body = await r.json();
        check(r.status === 404 && /evicted/.test(body.error.message), `a request in the evicted session: HTTP ${r.status} ${JSON.stringify(body)}`);
        // the counts reach the Prometheus exposition
        const m = await (await fetch(`${kgate}/kgate/metrics`, { headers: auth })).text();
        for (const line of ['kgate_mcp_sessions 1', 'kgate_mcp_sessions_ended_total{reason="evicted"} 1', 'kgate_mcp_sessions_refused_total 1'])
            check(m.split('\n').includes(line), `/kgate/metrics lacks "${line}": ${m.split('\n').filter(l => l.includes('mcp')).join('; ')}`);
        return body.error.message.slice(0, 120);
    });
    await step('fresh_idle', async () => {
        // b said only hello: gone after the short expiry; a session with a request outlives it
        await new Promise(res => setTimeout(res, 2500));
        const r = await rawPing(b.transport.sessionId);
        check(r.status === 404, `a session with no request after initialize, 2.5 s later: HTTP ${r.status}`);
        const c = await connect('kgate-e2e-c');
        await c.client.listTools();
        await new Promise(res => setTimeout(res, 2500));
        await c.client.ping();
        await c.client.close();
        return 'initialize-only session ended after 1 s; a used one did not';
    });
    await step('idle_expiry', async () => {
        const d = await connect('kgate-e2e-d');
        const r = await run(d, 'y = 1');
        check(!r.isError, JSON.stringify(r));
        check((await contexts()).length === 1, 'no context');
        await new Promise(res => setTimeout(res, 8000));
        check((await contexts()).length === 0, 'the idle session kept its context');
        let gone = null;
        try {
            await run(d, 'y');
        } catch (e) {
            gone = e;
        }
        // the transport's StreamableHTTPError carries the HTTP status: 404 ends a session (the client starts a new one)
        check(gone && gone.code === 404 && /idled out/.test(gone.message), `a call in the expired session: ${gone}`);
        const e = await connect('kgate-e2e-e');
        await e.client.close();
        return 'ended after 6 s idle; its slot is free again';
    });
}

// kgate started with --mcp-max-sessions N --pool none: 100 clients, each opening a session, running a command in its
// bash (every tenth a Python cell too) and leaving without DELETE, as the MCP Inspector CLI does. Every one is served, and
// at each step kgate's kernels are no more than those of the N newest sessions (bash kernels start in milliseconds,
// Python ones in seconds on a loaded machine: the tenth keeps the test within its time).
async function abandon() {
    check(kgatePid > 0 && maxSessions > 0, '--kgate-pid and --max-sessions are required');
    let most = 0, sampledMost = 0, waits = 0;
    const kernelsOf = [], sessions = [];
    const sampler = setInterval(() => {
        sampledMost = Math.max(sampledMost, kernelsAlive());
    }, 100);
    await step('hundred_abandoned', async () => {
        for (let i = 0; i < 100; i++) {
            const s = await connect(`kgate-e2e-abandon-${i}`);
            sessions.push(s);
            let r = await bash(s, `echo "session ${i}"`);
            check(!r.isError && text(r).trim() === `session ${i}`, `session ${i}, bash: ${JSON.stringify(r).slice(0, 400)}`);
            kernelsOf.push(1);
            if (i % 10 === 0) {
                r = await run(s, `v = ${i}\nv * 2`);
                check(!r.isError && text(r).trim() === String(i * 2), `session ${i}, python: ${JSON.stringify(r).slice(0, 400)}`);
                kernelsOf[i] = 2;
            }
            const allowed = kernelsOf.slice(-maxSessions).reduce((x, y) => x + y, 0);
            // an evicted session's kernels get SIGKILL before the new session exists; a process still tearing down its
            // memory on a loaded machine gets up to a second to become a zombie (counted in the detail)
            let n = kernelsAlive();
            for (let t = 0; n > allowed && t < 10; t++) {
                await new Promise(res => setTimeout(res, 100));
                n = kernelsAlive();
                waits++;
            }
            most = Math.max(most, n);
            check(n <= allowed, `after session ${i}: ${n} kernels alive, more than the ${allowed} of the ${maxSessions} newest sessions`);
            // no close, no DELETE: the client just goes
        }
        clearInterval(sampler);
        // between steps too: a session has at most two kernels (Python and bash)
        check(sampledMost <= 2 * maxSessions, `${sampledMost} kernels alive at once, more than ${maxSessions} sessions' worth`);
        return `100 sessions served; at most ${most} kernels alive after a step (${waits} waits of 100 ms for a killed one), ${sampledMost} sampled every 100 ms`;
    });
    clearInterval(sampler);
    await step('evicted_and_kept', async () => {
        // the N newest sessions are still open; the one before them was evicted last, and its 404 says so
        for (const s of sessions.slice(-maxSessions)) {
            const r = await rawPing(s.transport.sessionId);
            check(r.status === 200, `a session among the ${maxSessions} newest: HTTP ${r.status}`);
        }
        const r = await rawPing(sessions[sessions.length - maxSessions - 1].transport.sessionId);
        const body = await r.json();
        check(r.status === 404 && /evicted/.test(body.error.message), `the last evicted session: HTTP ${r.status} ${JSON.stringify(body)}`);
        const old = await rawPing(sessions[0].transport.sessionId);
        check(old.status === 404, `the first session: HTTP ${old.status}`);
        return body.error.message.slice(0, 100);
    });
}

// A matplotlib figure, as an agent draws one: the inline backend hands it over as an image/png display.
const PLOT_CODE = `
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(3, 2))
ax.plot([0, 1, 2, 3], [1, 4, 9, 16])
ax.set_title('squares')
plt.show()
print('plotted')
`;

const tool = (s, name, args = {}, options = {}) => s.client.callTool({ name, arguments: args }, undefined, { timeout: 120000, ...options });
const listContexts = async s => {
    const r = await tool(s, 'list_contexts');
    check(!r.isError && Array.isArray(r.structuredContent.contexts), `list_contexts: ${JSON.stringify(r)}`);
    return { r, byKernel: Object.fromEntries(r.structuredContent.contexts.map(c => [c.language, c])) };
};

// kgate started with --max-timeout-ms 8000 --default-timeout-ms 8000: interrupt, restart, list_contexts, timeout_ms over
// the cap, cancellation seen through list_contexts, errors as isError, a matplotlib figure as an image block.
async function tools() {
    const a = await connect('kgate-e2e-tools');
    await step('new_tools_listed', async () => {
        const { tools: list } = await a.client.listTools();
        for (const name of ['interrupt', 'restart', 'list_contexts']) {
            const t = list.find(x => x.name === name);
            check(t && t.description.length > 40 && t.inputSchema.type === 'object', `${name}: ${JSON.stringify(t)}`);
        }
        const timeout = list.find(x => x.name === 'run_code').inputSchema.properties.timeout_ms;
        check(/cap is 8000 ms/.test(timeout.description), `run_code's timeout_ms: ${timeout.description}`);
        check(list.find(x => x.name === 'list_contexts').outputSchema, 'list_contexts has no outputSchema');
        return 'interrupt, restart, list_contexts';
    });
    await step('list_contexts', async () => {
        let { r, byKernel } = await listContexts(a);
        check(r.structuredContent.contexts.length === 0 && /no kernel yet/.test(text(r)), `before any call: ${JSON.stringify(r)}`);
        check(!(await run(a, 'x = 41')).isError, 'x = 41');
        check(!(await run(a, 'x')).isError, 'x');
        check(!(await bash(a, 'cd /tmp')).isError, 'cd /tmp');
        await new Promise(res => setTimeout(res, 300));
        ({ r, byKernel } = await listContexts(a));
        const py = byKernel.python, sh = byKernel.bash;
        check(py && py.state === 'idle' && py.execution_count === 2 && py.idle_ms >= 200, `python: ${JSON.stringify(py)}`);
        check(sh && sh.kernel === 'bash' && sh.state === 'idle', `bash: ${JSON.stringify(sh)}`);
        check(/python \(kernel [^)]+\): idle, execution_count 2/.test(text(r)), `text: ${text(r)}`);
        return text(r).trim().replace(/\n/g, '; ');
    });
    await step('interrupt', async () => {
        let r = await tool(a, 'interrupt');
        check(!r.isError && /not running anything/.test(text(r)), `an idle kernel: ${JSON.stringify(r)}`);
        const t0 = Date.now();
        const pending = run(a, 'import time\ntime.sleep(60)\nprint("not interrupted")');
        await new Promise(res => setTimeout(res, 1500));
        const { byKernel } = await listContexts(a);
        check(byKernel.python.state === 'busy' && byKernel.python.idle_ms === 0, `while running: ${JSON.stringify(byKernel.python)}`);
        r = await tool(a, 'interrupt', { language: 'python' });
        check(!r.isError && /Interrupted/.test(text(r)), `interrupt: ${JSON.stringify(r)}`);
        const ran = await pending;
        check(ran.isError && ran.structuredContent.error.ename === 'KeyboardInterrupt' && !ran.structuredContent.stdout.includes('not interrupted'),
            `the interrupted call: ${JSON.stringify(ran).slice(0, 500)}`);
        check(Date.now() - t0 < 7000, `the interrupted call ended after ${Date.now() - t0} ms (its timeout is 8000)`);
        const after = await run(a, 'x');
        check(!after.isError && text(after).trim() === '41', `state after the interrupt: ${JSON.stringify(after)}`);
        return `KeyboardInterrupt after ${Date.now() - t0} ms, state kept`;
    });
    await step('cancel_keeps_state', async () => {
        const before = (await listContexts(a)).byKernel.python.execution_count;
        const ac = new AbortController();
        const pending = run(a, 'import time\ntime.sleep(60)', {}, { signal: ac.signal });
        setTimeout(() => ac.abort('the test cancels'), 1500);
        let rejected = false;
        try {
            await pending;
        } catch {
            rejected = true;
        }
        check(rejected, 'the cancelled call resolved');
        let py;
        for (let i = 0; i < 50; i++) {
            py = (await listContexts(a)).byKernel.python;
            if (py.state === 'idle') break;
            await new Promise(res => setTimeout(res, 100));
        }
        check(py.state === 'idle' && py.execution_count === before + 1, `after the cancellation: ${JSON.stringify(py)} (before: ${before})`);
        const r = await run(a, 'x');
        check(!r.isError && text(r).trim() === '41', `state after the cancellation: ${JSON.stringify(r)}`);
        return `python idle again, execution_count ${py.execution_count}, x kept`;
    });
    await step('restart', async () => {
        let r = await tool(a, 'restart', { language: 'python' });
        check(!r.isError && /state .* is lost/.test(text(r)), `restart: ${JSON.stringify(r)}`);
        r = await run(a, 'x');
        check(r.isError && r.structuredContent.error.ename === 'NameError', `x after the restart: ${JSON.stringify(r)}`);
        check(r.structuredContent.execution_count === 1, `execution_count after the restart: ${r.structuredContent.execution_count}`);
        r = await tool(a, 'restart', { language: 'bash' });
        check(!r.isError, `restart bash: ${JSON.stringify(r)}`);
        r = await bash(a, 'pwd');
        check(!r.isError && !/^\/tmp$/m.test(text(r)), `the shell kept its cwd: ${text(r)}`);
        return 'python and bash state gone';
    });
    await step('errors', async () => {
        let r = await tool(a, 'interrupt', { language: 'cobol' });
        check(r.isError && /unknown language/.test(text(r)), `interrupt cobol: ${JSON.stringify(r)}`);
        r = await tool(a, 'restart', { language: 5 });
        check(r.isError && /language must be/.test(text(r)), `restart 5: ${JSON.stringify(r)}`);
        r = await run(a, 'x', { timeout_ms: 0 });
        check(r.isError && /timeout_ms/.test(text(r)), `timeout_ms 0: ${JSON.stringify(r)}`);
        r = await run(a, 'raise ValueError("bad value")');
        check(r.isError && r.structuredContent.error.ename === 'ValueError', `raise: ${JSON.stringify(r).slice(0, 300)}`);
        return 'isError results';
    });
    await step('timeout_capped', async () => {
        check(!(await run(a, 'y = 7')).isError, 'y = 7');
        const t0 = Date.now();
        const r = await run(a, 'import time\ntime.sleep(30)', { timeout_ms: 600000 });
        check(r.isError && r.structuredContent.error.ename === 'TimeoutError', `result ${JSON.stringify(r).slice(0, 500)}`);
        check(/timeout_ms 600000 is over the server's cap .* 8000 ms/.test(text(r)), `text: ${text(r)}`);
        const capped = r.structuredContent.timeout_capped;
        check(capped && capped.asked_ms === 600000 && capped.applied_ms === 8000, `timeout_capped ${JSON.stringify(capped)}`);
        check(Date.now() - t0 < 25000, `took ${Date.now() - t0} ms`);
        const after = await run(a, 'y');
        check(!after.isError && text(after).trim() === '7', `state after the timeout: ${JSON.stringify(after)}`);
        return `TimeoutError after ${Date.now() - t0} ms`;
    });
    await step('matplotlib', async () => {
        const r = await run(a, PLOT_CODE);
        const img = r.content.find(c => c.type === 'image');
        check(!r.isError && img, `no image block: ${JSON.stringify(r).slice(0, 500)}`);
        const png = Buffer.from(img.data, 'base64');
        check(img.mimeType === 'image/png' && png.subarray(1, 4).toString() === 'PNG' && png.length > 1000, `image ${img.mimeType}, ${png.length} bytes`);
        check(text(r).includes('plotted'), `text: ${text(r)}`);
        check(r.structuredContent.results.some(b => b['image/png'] === img.data), 'the image is not among the results');
        return `image/png, ${png.length} bytes`;
    });
}

await finish(() => (scenario === 'bounds' ? bounds() : scenario === 'abandon' ? abandon() : scenario === 'tools' ? tools() : main()),
    'script', timer);
