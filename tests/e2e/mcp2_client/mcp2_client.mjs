// tests/e2e/mcp2_client/mcp2_client.mjs: the MCP TypeScript SDK v2 client (@modelcontextprotocol/client, revision
// 2026-07-28: no session, no initialize; server/discover, the per-request _meta envelope, Mcp-Method/Mcp-Name
// headers) driving kgate's /mcp door through what an agent does with it (docs/mcp.md).
//
// Usage: node mcp2_client.mjs --url http://127.0.0.1:PORT/mcp --token TOKEN --kgate http://127.0.0.1:PORT
//                             [--modules DIR] [--scenario main|bounds] [--timeout-ms N]
//   --modules: where deploy/deps.sh ran `npm ci` on this directory's lock ($KGATE_MCP2_CLIENT_DIR,
//              default /usr/local/lib/kgate/mcp2-client).
//   --scenario main: negotiation, tools, state in named contexts, bash, editor, errors, cancellation, header checks;
//              bounds: a kgate started with --mcp-max-named-contexts 2 --mcp-context-idle-ms 10000 (a kernel's start
//              under ASan takes seconds: a shorter expiry would end a context while the next one starts).
// Prints one JSON line per step (tests/e2e/steps.mjs), then {"step":"done",...}; exits 0 when every step passed.

import { globalTimer, loadFrom, opt, requireOptions } from '../client_setup.mjs';
import { check, finish, step } from '../steps.mjs';

const url = opt('url');
const token = opt('token', '');
const kgate = opt('kgate');
const modulesDir = opt('modules', process.env.KGATE_MCP2_CLIENT_DIR || '/usr/local/lib/kgate/mcp2-client');
const scenario = opt('scenario', 'main');
const timeoutMs = Number(opt('timeout-ms', '240000'));
requireOptions([url, kgate], 'node mcp2_client.mjs --url URL --token TOKEN --kgate BASE_URL [--modules DIR] [--scenario main|bounds]');
const timer = globalTimer(timeoutMs);
const { Client, StreamableHTTPClientTransport } = loadFrom(modulesDir, '@modelcontextprotocol/client', require =>
    require('@modelcontextprotocol/client'));

const REVISION = '2026-07-28';
const auth = { Authorization: `Bearer ${token}` };

// A client of the stateless revision: `pin` it (no fallback), or `auto` with `versions` offered first.
async function connect(name, options = { versionNegotiation: { mode: { pin: REVISION } } }) {
    const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } });
    const client = new Client({ name, version: '2.0.0' }, options);
    await client.connect(transport);
    return { client, transport };
}
const text = result => (result.content || []).filter(c => c.type === 'text').map(c => c.text).join('');
const run = (s, context, code, options = {}) =>
    s.client.callTool({ name: 'run_code', arguments: { code, context } }, { timeout: 120000, ...options });
const bash = (s, context, command) => s.client.callTool({ name: 'bash', arguments: { command, context } }, { timeout: 120000 });
const edit = (s, args) => s.client.callTool({ name: 'str_replace_based_edit_tool', arguments: args });
const contexts = async () => {
    const r = await fetch(`${kgate}/code/contexts`, { headers: auth });
    check(r.status === 200, `GET /code/contexts: HTTP ${r.status}`);
    return (await r.json()).map(c => c.id);
};
// One POST by hand, for what the SDK never sends: its status and parsed body.
async function post(headers, body) {
    const r = await fetch(url, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify(body),
    });
    const t = await r.text();
    let json = null;
    try {
        json = JSON.parse(t);
    } catch {}
    return { status: r.status, json, text: t, session: r.headers.get('mcp-session-id') };
}
const envelope = version => ({
    'io.modelcontextprotocol/protocolVersion': version,
    'io.modelcontextprotocol/clientInfo': { name: 'by-hand', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {},
});

async function main() {
    let a;
    await step('discover', async () => {
        a = await connect('kgate-e2e-v2');
        check(a.client.getProtocolEra() === 'modern', `era ${a.client.getProtocolEra()}`);
        check(a.client.getNegotiatedProtocolVersion() === REVISION, `negotiated ${a.client.getNegotiatedProtocolVersion()}`);
        check(a.transport.sessionId === undefined, `a session id in the stateless revision: ${a.transport.sessionId}`);
        const d = a.client.getDiscoverResult();
        check(d && d.supportedVersions.includes(REVISION) && d.capabilities.tools, `discover ${JSON.stringify(d)}`);
        check((a.client.getServerVersion() || {}).name === 'kgate', `serverInfo ${JSON.stringify(a.client.getServerVersion())}`);
        return `${d.supportedVersions.join(', ')}`;
    });
    await step('list_tools', async () => {
        const { tools } = await a.client.listTools();
        const names = tools.map(t => t.name).sort();
        check(['bash', 'list_languages', 'run_code', 'str_replace_based_edit_tool'].every(n => names.includes(n)), `tools ${names}`);
        const rc = tools.find(t => t.name === 'run_code');
        check(rc.inputSchema.properties.context && rc.inputSchema.properties.context.type === 'string', 'run_code has no context argument');
        check(tools.find(t => t.name === 'bash').inputSchema.properties.context, 'bash has no context argument');
        return names.join(',');
    });
    await step('state', async () => {
        let r = await run(a, 'ctx-a', 'x = 41\nprint("set")');
        check(!r.isError && text(r).includes('set'), `first call: ${JSON.stringify(r)}`);
        r = await run(a, 'ctx-a', 'x + 1');
        check(!r.isError && text(r).trim() === '42', `second call: ${JSON.stringify(r)}`);
        // the state is the context's, not the connection's: another client naming ctx-a sees it
        const other = await connect('kgate-e2e-v2-other');
        r = await run(other, 'ctx-a', 'x * 2');
        check(!r.isError && text(r).trim() === '82', `another client in ctx-a: ${JSON.stringify(r)}`);
        await other.client.close();
        // and another context has its own kernel
        r = await run(a, 'ctx-b', 'x');
        check(r.isError && r.structuredContent.error.ename === 'NameError', `ctx-b sees x: ${JSON.stringify(r)}`);
        r = await a.client.callTool({ name: 'run_code', arguments: { code: '1', context: 'no/slashes' } });
        check(r.isError && /context must be/.test(text(r)), `a bad context name: ${JSON.stringify(r)}`);
        return 'x kept in ctx-a across calls and clients; NameError in ctx-b';
    });
    await step('error', async () => {
        const r = await run(a, 'ctx-a', 'def f():\n    return 1 / 0\nf()');
        check(r.isError === true, 'not isError');
        check(/ZeroDivisionError/.test(text(r)) && text(r).includes('return 1 / 0'), `traceback: ${text(r)}`);
        check(r.structuredContent.error.ename === 'ZeroDivisionError', 'error object');
        return r.structuredContent.error.ename;
    });
    await step('bash', async () => {
        let r = await bash(a, 'ctx-a', 'mkdir -p mcp2_sub && cd mcp2_sub && export MCP2_VAR=kept');
        check(!r.isError, `cd: ${JSON.stringify(r)}`);
        r = await bash(a, 'ctx-a', 'pwd; echo "var=$MCP2_VAR"');
        check(!r.isError && /mcp2_sub\n/.test(text(r)) && text(r).includes('var=kept'), `second call: ${text(r)}`);
        const other = await bash(a, 'ctx-b', 'pwd');
        check(!/mcp2_sub/.test(text(other)), `ctx-b shares the cwd: ${text(other)}`);
        r = await bash(a, 'ctx-a', '(exit 3)');
        check(r.isError, 'a failing command is not isError');
        return text(await bash(a, 'ctx-a', 'pwd')).trim();
    });
    await step('editor', async () => {
        let r = await edit(a, { command: 'create', path: 'mcp2_edit.txt', file_text: 'alpha\nbeta\n' });
        check(!r.isError, `create: ${text(r)}`);
        r = await edit(a, { command: 'str_replace', path: 'mcp2_edit.txt', old_str: 'beta', new_str: 'gamma' });
        check(!r.isError, `str_replace: ${text(r)}`);
        r = await edit(a, { command: 'view', path: 'mcp2_edit.txt' });
        check(text(r) === '1: alpha\n2: gamma', `view: ${JSON.stringify(text(r))}`);
        r = await edit(a, { command: 'str_replace', path: 'mcp2_edit.txt', old_str: 'nowhere', new_str: 'x' });
        check(r.isError && text(r).includes('No match'), `no match: ${JSON.stringify(r)}`);
        r = await bash(a, 'ctx-a', 'cat ../mcp2_edit.txt');
        check(text(r).includes('gamma'), `the file as bash sees it: ${text(r)}`);
        return 'create, str_replace, view, no match';
    });
    await step('cancel', async () => {
        // the revision's cancellation over HTTP: the client aborts, closing the call's response stream
        const ac = new AbortController();
        const t0 = Date.now();
        const seen = [];
        const pending = run(a, 'ctx-a', 'import time\nprint("go", flush=True)\ntime.sleep(60)\nmarker = "not interrupted"',
            { signal: ac.signal, onprogress: p => seen.push(p) });
        setTimeout(() => ac.abort('the test cancels'), 2000);
        let rejected = false;
        try {
            await pending;
        } catch {
            rejected = true;
        }
        check(rejected, 'the cancelled call resolved');
        // the kernel was interrupted, not left sleeping: the next call in the context answers at once, with its state
        const r = await run(a, 'ctx-a', 'print(x, "marker" in globals())');
        check(!r.isError && text(r).trim() === '41 False', `after the cancellation: ${JSON.stringify(r)}`);
        check(Date.now() - t0 < 20000, `the next call waited ${Date.now() - t0} ms: the run was not interrupted`);
        return `next call answered ${Date.now() - t0} ms after the start (${seen.length} progress notifications before)`;
    });
    await step('kernel_tools', async () => {
        // interrupt and list_contexts act on the context they name, as run_code does
        const call = (name, args) => a.client.callTool({ name, arguments: args }, { timeout: 120000 });
        let r = await call('list_contexts', { context: 'ctx-a' });
        const langs = (r.structuredContent.contexts || []).map(c => c.language).sort();
        check(!r.isError && langs.includes('python') && langs.includes('bash'), `list_contexts of ctx-a: ${JSON.stringify(r)}`);
        r = await call('list_contexts', { context: 'ctx-new' });
        check(!r.isError && (r.structuredContent === undefined || (r.structuredContent.contexts || []).length === 0), `a fresh context lists kernels: ${JSON.stringify(r)}`);
        const pending = run(a, 'ctx-a', 'import time\ntime.sleep(60)\nprint("not interrupted")');
        await new Promise(res => setTimeout(res, 1500));
        r = await call('interrupt', { language: 'python', context: 'ctx-b' });
        check(!r.isError, `interrupt in ctx-b: ${JSON.stringify(r)}`);
        r = await call('interrupt', { language: 'python', context: 'ctx-a' });
        check(!r.isError, `interrupt in ctx-a: ${JSON.stringify(r)}`);
        const ran = await pending;
        check(ran.isError && ran.structuredContent.error.ename === 'KeyboardInterrupt', `the interrupted run: ${JSON.stringify(ran)}`);
        r = await run(a, 'ctx-a', 'x');
        check(text(r).trim() === '41', `state after interrupt: ${JSON.stringify(r)}`);
        return `ctx-a: ${langs.join(', ')}; interrupt ended its run, state kept`;
    });
    await step('negotiation', async () => {
        // an unsupported version by hand: 400 and UnsupportedProtocolVersionError listing what kgate speaks
        let r = await post({ 'mcp-protocol-version': '1900-01-01', 'mcp-method': 'server/discover' },
            { jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: envelope('1900-01-01') } });
        check(r.status === 400 && r.json && r.json.id === 1 && r.json.error.code === -32022, `1900-01-01: HTTP ${r.status} ${r.text}`);
        check(r.json.error.data.requested === '1900-01-01' && r.json.error.data.supported.includes(REVISION), `data ${r.text}`);
        // the SDK offering a version kgate does not speak first: it retries with the one in kgate's list
        const b = await connect('kgate-e2e-v2-auto', { supportedProtocolVersions: ['2099-01-01', REVISION], versionNegotiation: { mode: 'auto' } });
        check(b.client.getNegotiatedProtocolVersion() === REVISION, `auto negotiated ${b.client.getNegotiatedProtocolVersion()}`);
        const out = await run(b, 'ctx-a', 'x');
        check(text(out).trim() === '41', `after negotiation: ${JSON.stringify(out)}`);
        await b.client.close();
        // the same SDK in its default (legacy) mode still gets a 2025-11-25 session
        const c = await connect('kgate-e2e-v2-legacy', {});
        check(c.client.getProtocolEra() === 'legacy' && /^[0-9a-f]{32}$/.test(c.transport.sessionId || ''),
            `legacy: ${c.client.getProtocolEra()} ${c.transport.sessionId}`);
        await c.transport.terminateSession();
        await c.client.close();
        return 'unsupported -> -32022, corrective retry, legacy session beside';
    });
    await step('header_mismatch', async () => {
        const call = { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'run_code', arguments: { code: 'x', context: 'ctx-a' }, _meta: envelope(REVISION) } };
        let r = await post({ 'mcp-protocol-version': REVISION, 'mcp-method': 'tools/call', 'mcp-name': 'bash' }, call);
        check(r.status === 400 && r.json && r.json.error.code === -32020 && /Mcp-Name/.test(r.json.error.message), `Mcp-Name bash: HTTP ${r.status} ${r.text}`);
        r = await post({ 'mcp-protocol-version': REVISION, 'mcp-method': 'tools/list', 'mcp-name': 'run_code' }, call);
        check(r.status === 400 && r.json.error.code === -32020 && /Mcp-Method/.test(r.json.error.message), `Mcp-Method: HTTP ${r.status} ${r.text}`);
        r = await post({ 'mcp-protocol-version': '2025-11-25', 'mcp-method': 'tools/call', 'mcp-name': 'run_code' }, call);
        check(r.status === 400 && r.json.error.code === -32020, `version header 2025-11-25 vs _meta: HTTP ${r.status} ${r.text}`);
        r = await post({ 'mcp-method': 'tools/call', 'mcp-name': 'run_code' }, call);
        check(r.status === 400 && r.json.error.code === -32020, `no version header: HTTP ${r.status} ${r.text}`);
        // the Base64 sentinel is decoded before the comparison, and then the call runs
        r = await post({ 'mcp-protocol-version': REVISION, 'mcp-method': 'tools/call', 'mcp-name': `=?base64?${Buffer.from('run_code').toString('base64')}?=` }, call);
        check(r.status === 200 && r.json && r.json.result && r.json.result.resultType === 'complete', `sentinel: HTTP ${r.status} ${r.text}`);
        check(!r.session, 'a session id was minted');
        r = await post({ 'mcp-protocol-version': REVISION, 'mcp-method': 'ping' }, { jsonrpc: '2.0', id: 10, method: 'ping', params: { _meta: envelope(REVISION) } });
        check(r.status === 404 && r.json.error.code === -32601, `ping (removed in ${REVISION}): HTTP ${r.status} ${r.text}`);
        return 'Mcp-Name, Mcp-Method, version refused with -32020; sentinel accepted';
    });
    await a.client.close();
}

async function bounds() {
    let a;
    await step('max_named', async () => {
        a = await connect('kgate-e2e-v2');
        for (const c of ['one', 'two']) {
            const r = await run(a, c, `name = "${c}"`);
            check(!r.isError, JSON.stringify(r));
        }
        check((await contexts()).length === 2, 'two contexts, two kernels');
        let r = await run(a, 'one', 'name');
        check(text(r).includes('one'), 'touch one: two is now the least recently used');
        r = await run(a, 'three', 'name = "three"');
        check(!r.isError, `a third context beyond --mcp-max-named-contexts 2: ${JSON.stringify(r)}`);
        const ids = await contexts();
        check(ids.length === 2, `kernels after the eviction: ${ids}`);
        r = await run(a, 'one', 'name');
        check(!r.isError && text(r).includes('one'), `one kept: ${JSON.stringify(r)}`);
        r = await run(a, 'two', 'name');
        check(r.isError && r.structuredContent.error.ename === 'NameError', `two was evicted, its state with it: ${JSON.stringify(r)}`);
        return 'the least recently used idle context made room';
    });
    await step('busy_refused', async () => {
        // both contexts (one, two) running a call: a third name takes none of them, the call says so
        const busy = ['one', 'two'].map(c => run(a, c, 'import time\ntime.sleep(4)\n"slept"'));
        await new Promise(res => setTimeout(res, 1000));
        const r = await run(a, 'four', 'name = "four"');
        check(r.isError && /maximum/.test(text(r)) && /mcp-max-named-contexts/.test(text(r)), `a new context while all run: ${JSON.stringify(r)}`);
        for (const b of await Promise.all(busy)) check(!b.isError && text(b).includes('slept'), `a busy call: ${JSON.stringify(b)}`);
        check((await contexts()).length === 2, 'the refused call started a kernel');
        return text(r).slice(0, 160);
    });
    await step('idle_expiry', async () => {
        check((await contexts()).length === 2, 'contexts before');
        await new Promise(res => setTimeout(res, 13000));
        const left = await contexts();
        check(left.length === 0, `the idle contexts kept their kernels: ${left}`);
        const r = await run(a, 'one', 'name');
        check(r.isError && r.structuredContent.error.ename === 'NameError', `one after its expiry: ${JSON.stringify(r)}`);
        await new Promise(res => setTimeout(res, 13000));
        check((await contexts()).length === 0, 'the context made again did not idle out');
        await a.client.close();
        return 'ended after 10 s idle; the name starts afresh';
    });
}

await finish(() => (scenario === 'bounds' ? bounds() : main()), 'script', timer);
