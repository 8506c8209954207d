// tests/e2e/opensandbox_client/checks.mjs: the OpenSandbox SDK's execd stack (commands, files, health) and execd's code
// API against an execd, one JSON line per step: {"step", "ok", "detail"}. Driven by tests/e2e/test_dropin.c.
//
// node checks.mjs --url http://127.0.0.1:PORT --token T --modules DIR [--envs-file PATH]
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const args = {};
for (let i = 2; i + 1 < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
const require = createRequire(pathToFileURL(args.modules + "/"));
const sdk = await import(pathToFileURL(require.resolve("@alibaba-group/opensandbox")));

const headers = { "X-EXECD-ACCESS-TOKEN": args.token };
const stack = sdk.createDefaultAdapterFactory().createExecdStack({
  connectionConfig: new sdk.ConnectionConfig({ domain: args.url, requestTimeoutSeconds: 120 }),
  execdBaseUrl: args.url,
  endpointHeaders: headers,
});

let failed = 0;
async function step(name, fn) {
  try {
    const detail = await fn();
    console.log(JSON.stringify({ step: name, ok: true, detail: String(detail ?? "") }));
  } catch (e) {
    failed++;
    console.log(JSON.stringify({ step: name, ok: false, detail: String(e && e.stack ? e.stack : e) }));
  }
}
function expect(cond, what) {
  if (!cond) throw new Error(what);
}
const text = (msgs) => msgs.map((m) => m.text).join("");

// execd's /code (what the code-interpreter SDK calls): an SSE stream of JSON events.
async function runCode(language, code) {
  const ctx = await fetch(args.url + "/code/context", {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ language }),
  });
  expect(ctx.ok, `POST /code/context ${language}: ${ctx.status} ${await ctx.clone().text()}`);
  const { id } = await ctx.json();
  const res = await fetch(args.url + "/code", {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ context: { id, language }, code }),
  });
  expect(res.ok, `POST /code: ${res.status}`);
  const out = [];
  for (const block of (await res.text()).split(/\n\n+/)) {
    // SSE fields (id:, event:, comments) around the JSON, which comes as data: or bare (execd's own framing).
    const line = block
      .split("\n")
      .filter((l) => !/^(id|event|retry):|^:/.test(l))
      .map((l) => l.replace(/^data: ?/, ""))
      .join("")
      .trim();
    if (line) out.push(JSON.parse(line));
  }
  await fetch(args.url + "/code/contexts/" + id, { method: "DELETE", headers });
  return out;
}

await step("ping", async () => expect(await stack.health.ping(), "ping"));
await step("commands_run", async () => {
  const ex = await stack.commands.run("echo hello from $(. /etc/os-release; echo $VERSION_CODENAME)");
  expect(text(ex.logs.stdout).startsWith("hello from "), `stdout: ${JSON.stringify(ex.logs.stdout)}`);
  return text(ex.logs.stdout).trim();
});
await step("commands_exit_code", async () => {
  const ex = await stack.commands.run("echo oops >&2; exit 3");
  expect(text(ex.logs.stderr).includes("oops"), `stderr: ${JSON.stringify(ex.logs.stderr)}`);
  expect(ex.error || ex.exitCode === 3, `no failure reported: ${JSON.stringify(ex)}`);
});
await step("files_roundtrip", async () => {
  await stack.files.createDirectories([{ path: "/tmp/dropin/dir", mode: 755 }]);
  await stack.files.writeFiles([{ path: "/tmp/dropin/dir/a.txt", data: "kgate in another image\n" }]);
  const back = await stack.files.readFile("/tmp/dropin/dir/a.txt");
  expect(back === "kgate in another image\n", `read back: ${JSON.stringify(back)}`);
  const list = await stack.files.listDirectory({ path: "/tmp/dropin/dir" });
  expect(list.some((f) => String(f.path).endsWith("a.txt")), `listing: ${JSON.stringify(list)}`);
  await stack.files.deleteFiles(["/tmp/dropin/dir/a.txt"]);
  const info = await stack.files.getFileInfo(["/tmp/dropin/dir/a.txt"]).catch((e) => "gone");
  expect(info === "gone", `still there: ${JSON.stringify(info)}`);
});
await step("code_python", async () => {
  const ev = await runCode("python", "import sys; print(sys.version_info[:2]); 6 * 7");
  const stdout = ev.filter((e) => e.type === "stdout").map((e) => e.text).join("");
  const result = ev.find((e) => e.type === "result");
  expect(result && JSON.stringify(result.results).includes("42"), `events: ${JSON.stringify(ev)}`);
  return stdout.trim();
});
await step("code_bash", async () => {
  const ev = await runCode("bash", "x=21; echo $((x * 2)) $BASH_VERSION");
  const stdout = ev.filter((e) => e.type === "stdout").map((e) => e.text).join("");
  expect(stdout.startsWith("42 "), `events: ${JSON.stringify(ev)}`);
  return stdout.trim();
});
if (args["envs-file"]) {
  await step("execd_envs", async () => {
    await stack.files.writeFiles([{ path: args["envs-file"], data: "DROPIN_FROM_ENVS=first\n" }]);
    const a = await stack.commands.run("echo $DROPIN_FROM_ENVS");
    await stack.files.writeFiles([{ path: args["envs-file"], data: "DROPIN_FROM_ENVS=second\n" }]);
    const b = await stack.commands.run("echo $DROPIN_FROM_ENVS");
    expect(text(a.logs.stdout).trim() === "first" && text(b.logs.stdout).trim() === "second",
      `saw ${JSON.stringify(text(a.logs.stdout))} then ${JSON.stringify(text(b.logs.stdout))}`);
  });
}
process.exit(failed ? 1 : 0);
