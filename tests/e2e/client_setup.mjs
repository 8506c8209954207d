// tests/e2e/client_setup.mjs: what every e2e client script sets up before its first step (mcp_client, mcp2_client,
// e2b_client): its `--name value` options, its global timeout and the npm package deploy/deps.sh installed for it.
// Failures are reported the tests/e2e/steps.mjs way (a failed step line, exit 2), so that the C test names them.

import { createRequire } from 'node:module';
import path from 'node:path';
import { emit } from './steps.mjs';

const argv = process.argv.slice(2);

// The value after `--name` on the command line, or `dflt`.
export const opt = (name, dflt) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && i + 1 < argv.length ? argv[i + 1] : dflt;
};

// Exits 2 with `usage` on stderr unless every one of `values` is set.
export const requireOptions = (values, usage) => {
    if (values.some(v => !v)) {
        process.stderr.write(`usage: ${usage}\n`);
        process.exit(2);
    }
};

// The script's global timeout: the step "timeout" and exit 2 after `timeoutMs`; `finish` (steps.mjs) clears it.
export const globalTimer = timeoutMs =>
    setTimeout(() => {
        emit({ step: 'timeout', ok: false, detail: `global timeout of ${timeoutMs} ms` });
        process.exit(2);
    }, timeoutMs);

// `pick(require)` with a require() rooted in `modulesDir`, where deploy/deps.sh ran `npm ci` on the script's lock; a
// failed load is the step "load" naming `pkg`, and exit 2.
export const loadFrom = (modulesDir, pkg, pick) => {
    try {
        return pick(createRequire(path.join(path.resolve(modulesDir), 'package.json')));
    } catch (e) {
        emit({ step: 'load', ok: false, detail: `cannot load ${pkg} from ${modulesDir} (deploy/deps.sh installs it): ${e.message}` });
        process.exit(2);
    }
};
