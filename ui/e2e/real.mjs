// Browser tests against real Cairn daemons: a local 3-SDS cluster
// (tests/lib/cluster.sh, what `make demo` starts) that `cairn-plugin -demo
// -demo-gateway` shows as a deployed system next to the simulated vCenter
// (what `make demo-vsphere DEMO_REAL=1` serves).
//
//   1. Data is written to a volume over NBD; the dashboard shows the system
//      healthy; one SDS process is killed (kill -9, by its pid from the
//      cluster's state directory): the dashboard must show it down and the
//      rebuild with its progress, then the rebuild's end; the SDS is started
//      again and the dashboard must show the system healthy. Screenshots
//      rebuild-degraded.png and rebuild-healthy.png, axe on both.
//   2. A deployment (simulated vCenter, in-memory array behind the SVMs:
//      the real first boot needs root, see tests/e2e) whose SVM on
//      esx-03 fails its first boot (-demo-fail-boot): the wizard shows the
//      failure and what to do; the operator power-cycles the SVM in vCenter
//      (SOAP, as the vSphere Client would) and Resume in the wizard finishes
//      the deployment without repeating the steps done.
//
// Everything it starts (cluster daemons by their pids, the plugin server,
// temporary directories) is stopped and removed at the end, also on failure.
//
//   node e2e/real.mjs <cairn-plugin binary> <built UI dir> <appliance bin dir>
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { clearTimeout, setTimeout } from 'node:timers';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { sessionToken, shotDir as shots, startStack } from './stack.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const axePath = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const [pluginBin, uiDir, binDir] = process.argv.slice(2);
if (!pluginBin || !uiDir || !binDir) {
  console.error('usage: node e2e/real.mjs <cairn-plugin binary> <built UI dir> <appliance bin dir>');
  process.exit(2);
}
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
// Data written before the kill, so the rebuild has something to copy
// (about a third of it had a copy on the killed SDS).
const DATA_MIB = Number(process.env.REAL_DATA_MIB ?? 1024);
// The whole run is bounded: past this the test fails and cleans up.
const BUDGET_MS = Number(process.env.REAL_BUDGET_S ?? 420) * 1000;

const t0 = Date.now();
const results = [];
let cleaning = null; // the cleanup's promise, once started
async function step(name, fn) {
  if (cleaning) {
    throw new Error(`not starting "${name}": the run is over its budget and cleaning up`);
  }
  const s = Date.now();
  try {
    await fn();
    results.push({ name, ok: true });
    console.log(`ok   ${name} (${((Date.now() - s) / 1000).toFixed(1)} s)`);
  } catch (e) {
    results.push({ name, ok: false });
    console.log(`FAIL ${name}: ${e instanceof Error ? e.stack : e}`);
    throw e;
  }
}

function assert(cond, msg) {
  if (!cond) {
    throw new Error(msg);
  }
}

async function axe(frame, screen) {
  await frame.addScriptTag({ path: axePath });
  const res = await frame.evaluate(async () => {
    const r = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
  });
  const bad = res.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  assert(bad.length === 0, `axe on ${screen}: ${JSON.stringify(bad, null, 1)}`);
}

const shot = (page, name) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: false });

// run starts a command, bounded in time, and returns its stdout; it fails
// with the command's stderr.
function run(cmd, args, { env = {}, timeoutMs = 120_000, shell = false } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], shell });
    let out = '';
    let err = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b) => (err += b));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code, sig) => {
      clearTimeout(timer);
      if (code === 0) {
        resolve(out);
      } else {
        reject(new Error(`${cmd} ${args.join(' ')}: exit ${code ?? sig}\n${err.slice(-2000)}`));
      }
    });
  });
}

// soap calls one vim25 method on the simulated vCenter with a session.
function soap(vcenter, token, body) {
  const u = new URL(vcenter);
  const env = `<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:urn="urn:vim25"><soapenv:Body>${body}</soapenv:Body></soapenv:Envelope>`;
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        rejectUnauthorized: false, // the simulator's own certificate, on loopback
        headers: { 'Content-Type': 'text/xml', SOAPAction: 'urn:vim25/8.0.3.0', Cookie: `vmware_soap_session="${token}"` },
      },
      (res) => {
        let data = '';
        res.on('data', (b) => (data += b));
        res.on('end', () => (res.statusCode === 200 ? resolve(data) : reject(new Error(`SOAP ${res.statusCode}: ${data.slice(0, 500)}`))));
      },
    );
    req.on('error', reject);
    req.end(env);
  });
}

// powerCycle turns the VM off and on again, waiting for each task.
async function powerCycle(vcenter, token, inventoryPath) {
  const found = await soap(vcenter, token, `<urn:FindByInventoryPath><urn:_this type="SearchIndex">SearchIndex</urn:_this><urn:inventoryPath>${inventoryPath}</urn:inventoryPath></urn:FindByInventoryPath>`);
  const vm = /<returnval type="VirtualMachine">([^<]+)</.exec(found)?.[1];
  assert(vm, `vCenter has no VM ${inventoryPath}`);
  for (const op of ['PowerOffVM_Task', 'PowerOnVM_Task']) {
    const r = await soap(vcenter, token, `<urn:${op}><urn:_this type="VirtualMachine">${vm}</urn:_this></urn:${op}>`);
    const task = /<returnval type="Task">([^<]+)</.exec(r)?.[1];
    assert(task, `${op} on ${inventoryPath}: ${r.slice(0, 300)}`);
    const until = Date.now() + 30_000;
    for (;;) {
      const st = await soap(vcenter, token, `<urn:RetrievePropertiesEx><urn:_this type="PropertyCollector">propertyCollector</urn:_this><urn:specSet><urn:propSet><urn:type>Task</urn:type><urn:pathSet>info.state</urn:pathSet></urn:propSet><urn:objectSet><urn:obj type="Task">${task}</urn:obj></urn:objectSet></urn:specSet><urn:options/></urn:RetrievePropertiesEx>`);
      const state = /<val[^>]*>(success|error|running|queued)<\/val>/.exec(st)?.[1];
      if (state === 'success') {
        break;
      }
      assert(state !== 'error', `${op} on ${inventoryPath} failed: ${st.slice(0, 500)}`);
      assert(Date.now() < until, `${op} on ${inventoryPath} did not finish in 30 s`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

const work = mkdtempSync(join(tmpdir(), 'cairn-ui-real-'));
const clusterDir = join(work, 'cluster');
const clusterSh = join(root, 'tests', 'lib', 'cluster.sh');
const clusterEnv = { CAIRN_BIN: binDir };
const ctl = (...args) => run(join(binDir, 'cairnctl'), args, { env: { CAIRNCTL_CONFIG: join(clusterDir, 'cairnctl.json') } });
const logLines = [];
let browser = null;
let stack = null;
let failed = false;
const budget = setTimeout(() => {
  console.log(`e2e (real daemons) stopped: over its budget of ${BUDGET_MS / 1000} s`);
  failed = true;
  void cleanup().then(() => process.exit(1));
}, BUDGET_MS);

// cleanup runs once; every caller (the budget timer, a signal, the end of
// the run) waits for that one run to finish before the process exits.
function cleanup() {
  cleaning ??= doCleanup();
  return cleaning;
}
async function doCleanup() {
  await browser?.close().catch(() => {});
  await stack?.stop().catch(() => {});
  // cluster.sh stop: every daemon it started, by the pids in its state dir.
  await run(clusterSh, ['stop', clusterDir], { env: clusterEnv, timeoutMs: 60_000 }).catch((e) => console.log(`cleanup: ${e.message}`));
  rmSync(work, { recursive: true, force: true });
}
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => void cleanup().then(() => process.exit(1)));
}

try {
  let gwURL = '';
  await step(`real cluster: 3 MDMs, 3 SDSs, gateway, NBD; ${DATA_MIB} MiB written over NBD`, async () => {
    const out = await run(clusterSh, ['start', clusterDir, '--device-size', '4G', '--volume-size', '2GiB'], { env: clusterEnv, timeoutMs: 120_000 });
    const uri = out.split('\n').find((l) => l.startsWith('nbd://'));
    assert(uri, `cluster.sh printed no NBD URI:\n${out}`);
    const port = /^GW_PORT=(\d+)$/m.exec(readFileSync(join(clusterDir, 'ports.env'), 'utf8'))?.[1];
    gwURL = `https://127.0.0.1:${port}`;
    await run('sh', ['-c', `head -c ${DATA_MIB}M /dev/urandom | nbdcopy - "$URI"`], { env: { URI: uri }, timeoutMs: 180_000 });
    // Fill I/Os one at a time per SDS, as an admin paces a rebuild under
    // application load: the rebuild lasts long enough to be watched.
    await ctl('pool', 'set', 'pool1', '--rebuild-policy', 'limit-concurrent-io', '--rebuild-max-io', '1');
  });

  await step('plugin server: -demo with -demo-gateway (the real cluster) and -demo-fail-boot esx-03', async () => {
    stack = await startStack(pluginBin, uiDir, (l) => logLines.push(l), [
      '-demo-gateway',
      gwURL,
      '-demo-gateway-cert',
      join(clusterDir, 'gateway', 'cert.pem'),
      '-demo-gateway-password-file',
      join(clusterDir, 'gateway', 'admin-password'),
      '-demo-fail-boot',
      'esx-03.cairn.test',
      '-ready-timeout',
      '20s',
    ]);
  });

  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const ctx = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1360, height: 860 } });
  ctx.setDefaultTimeout(30_000);
  const page = await ctx.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const sys = page.locator('section.system').filter({ has: page.getByRole('heading', { name: /System cairn-local/ }) });
  const health = sys.locator('.health');
  const rebuilding = sys.locator('.rebuild-state');

  await step('dashboard: the real cluster is healthy (3 of 3 SDSs)', async () => {
    await page.goto(`${stack.base}/ui/index.html#/global`);
    await page.getByLabel('vCenter user name').fill(stack.user);
    await page.getByLabel('Password', { exact: true }).fill(stack.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: /System cairn-local/ }).waitFor();
    await health.locator('.label-success').getByText('Healthy').waitFor({ timeout: 30_000 });
    await health.getByText('All 3 SDSs up').waitFor();
    await sys.getByText('No rebuild, rebalance or resync in progress.').waitFor();
  });

  let killedAt = 0;
  await step('kill -9 of SDS sds3: the dashboard shows it down and the rebuild with its progress', async () => {
    const pid = Number(readFileSync(join(clusterDir, 'pids', 'sds3.pid'), 'utf8').trim());
    assert(pid > 1, 'no pid for sds3');
    process.kill(pid, 'SIGKILL');
    killedAt = Date.now();
    await rebuilding.waitFor({ timeout: 60_000 });
    // Then a refresh with the SDSs' figures (percent, bytes to copy, rate,
    // ETA); the rebuild must not end before the dashboard showed them.
    const figures = sys.locator('.rebuild-figures');
    for (const until = Date.now() + 60_000; !(await figures.isVisible()); ) {
      assert(await rebuilding.isVisible(), 'the rebuild ended before the dashboard showed its progress (percent, bytes to copy)');
      assert(Date.now() < until, 'the dashboard showed no rebuild progress in 60 s');
      await page.waitForTimeout(200);
    }
    await shot(page, 'rebuild-degraded');
    const text = await sys.innerText();
    assert(/Needs attention/.test(text) && /2 of 3 SDSs up/.test(text), `the dashboard does not show sds3 down:\n${text}`);
    assert(/\d+ placement groups degraded/.test(text), `no degraded placement groups shown:\n${text}`);
    const bar = sys.getByRole('progressbar');
    assert((await bar.count()) > 0, 'no rebuild progress bar');
    console.log(`     rebuild progress shown ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill: ${text.match(/\d+ placement groups degraded[^\n]*/)?.[0]}; ${(await figures.innerText()).trim()}`);
    await axe(page, 'dashboard: rebuilding');
  });

  await step('the rebuild ends (every group has 2 ready copies again), sds3 still down', async () => {
    await rebuilding.waitFor({ state: 'hidden', timeout: 180_000 });
    await sys.getByText('No rebuild, rebalance or resync in progress.').waitFor({ timeout: 10_000 });
    await health.getByText('SDS sds3 is down').first().waitFor();
    console.log(`     rebuild done ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill`);
  });

  await step('sds3 started again: the dashboard shows the system healthy', async () => {
    const s = Date.now();
    await run(clusterSh, ['start', clusterDir], { env: clusterEnv, timeoutMs: 60_000 }); // resumes: starts only what is not running
    await health.locator('.label-success').getByText('Healthy').waitFor({ timeout: 90_000 });
    await health.getByText('All 3 SDSs up').waitFor();
    await sys.getByText('No rebuild, rebalance or resync in progress.').waitFor({ timeout: 60_000 });
    console.log(`     healthy ${((Date.now() - s) / 1000).toFixed(1)} s after sds3's restart`);
    await shot(page, 'rebuild-healthy');
    await axe(page, 'dashboard: healthy again');
  });

  const wizard = page.locator('clr-wizard');
  await step('deploy: the SVM on esx-03 fails its first boot; the wizard shows the failure and what to do', async () => {
    await page.getByRole('link', { name: 'Deploy', exact: true }).click();
    await page.getByRole('button', { name: 'Deploy a new system…' }).click();
    await wizard.getByLabel('System name').fill('cairn1');
    for (let i = 0; i < 7; i++) {
      await wizard.getByRole('button', { name: 'Next' }).click();
    }
    await wizard.getByRole('button', { name: 'Download plan JSON' }).waitFor();
    await wizard.getByRole('button', { name: 'Deploy', exact: true }).click();
    await wizard.locator('.job-state .label-danger').waitFor({ timeout: 120_000 });
    const alert = wizard.getByRole('alert').filter({ hasText: 'the steps already done are not repeated' });
    const text = await alert.innerText();
    assert(/esx-03/.test(text), `the failure does not name esx-03: ${text}`);
    assert(/journalctl/.test(text) && /restart the SVM/.test(text) && /resume/.test(text), `the failure does not say what to do: ${text}`);
    console.log(`     failure shown: ${text.slice(0, 220)}`);
    await shot(page, 'wizard-deploy-failed');
    await axe(page, 'wizard: deploy failed');
  });

  await step('the operator power-cycles the SVM in vCenter; Resume deployment finishes it', async () => {
    const token = await sessionToken(stack.vcenter, stack.user, stack.password);
    await powerCycle(stack.vcenter, token, 'DC0/vm/cairn-cairn1-esx-03');
    await wizard.getByRole('button', { name: 'Resume deployment' }).click();
    await wizard.locator('.job-state .label-success').waitFor({ timeout: 180_000 });
    await wizard.getByText('system cairn1 deployed').first().waitFor();
    await shot(page, 'wizard-deploy-resumed');
    await wizard.getByRole('button', { name: 'Done', exact: true }).click();
    await page.getByRole('link', { name: 'Dashboard' }).click();
    await page.getByRole('heading', { name: /System cairn1/ }).waitFor();
    await page.getByRole('heading', { name: /System cairn-local/ }).waitFor();
  });

  assert(pageErrors.length === 0, `uncaught errors in the page: ${pageErrors.join('\n')}`);
} catch (e) {
  failed = true;
  console.log(`e2e (real daemons) stopped: ${e instanceof Error ? e.message : e}`);
  if (logLines.length) {
    console.log('--- cairn-plugin log (last 30 lines)\n' + logLines.join('').split('\n').slice(-30).join('\n'));
  }
} finally {
  clearTimeout(budget);
  await cleanup();
}
const passed = results.filter((r) => r.ok).length;
console.log(`e2e (real daemons): ${passed}/${results.length} passed in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
process.exit(failed ? 1 : 0);
