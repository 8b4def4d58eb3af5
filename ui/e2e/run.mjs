// Browser end-to-end tests of the Cairn UI: Debian's chromium, driven by
// playwright-core, against the demo stack (cairn-plugin -demo: simulated
// vCenter + in-memory Cairn). Saves a screenshot of every main screen to
// ui/e2e/out/screenshots/ (docs/screenshots/ with CAIRN_SCREENSHOTS=docs,
// `make screenshots`) and runs axe-core on each (no serious or critical
// violation allowed).
//
//   node e2e/run.mjs <cairn-plugin binary> <built UI dir>
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { PROXY_PREFIX, freePort, sessionToken, shotDir as shots, startClient, startStack } from './stack.mjs';

const axePath = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const [pluginBin, uiDir] = process.argv.slice(2);
if (!pluginBin || !uiDir) {
  console.error('usage: node e2e/run.mjs <cairn-plugin binary> <built UI dir>');
  process.exit(2);
}
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

const t0 = Date.now();
const results = [];
async function step(name, fn) {
  const s = Date.now();
  try {
    await fn();
    results.push({ name, ok: true, ms: Date.now() - s });
    console.log(`ok   ${name} (${((Date.now() - s) / 1000).toFixed(1)} s)`);
  } catch (e) {
    results.push({ name, ok: false, ms: Date.now() - s });
    console.log(`FAIL ${name}: ${e instanceof Error ? e.stack : e}`);
    throw e;
  }
}

function assert(cond, msg) {
  if (!cond) {
    throw new Error(msg);
  }
}

// axe runs axe-core in frame (page or iframe) and fails on serious or
// critical violations, naming them.
async function axe(frame, screen) {
  await frame.addScriptTag({ path: axePath });
  const res = await frame.evaluate(async () => {
    const r = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(' ')) }));
  });
  const bad = res.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  const minor = res.filter((v) => !bad.includes(v));
  if (minor.length) {
    console.log(`     axe ${screen}: ${minor.length} minor/moderate: ${minor.map((v) => v.id).join(', ')}`);
  }
  assert(bad.length === 0, `axe on ${screen}: ${JSON.stringify(bad, null, 1)}`);
}

async function shot(page, name) {
  // A dialog still fading in would be shot half transparent over the page:
  // let the animations of modals end first (not spinners, which never do).
  await page.waitForFunction(() => document.getAnimations().every((a) => a.playState !== 'running' ||
    !a.effect?.target?.closest?.('.modal, .modal-backdrop')), null, { timeout: 3000 }).catch(() => {});
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: false });
}

const logLines = [];
// playwright gives the browser a fresh profile (--user-data-dir in a new
// temporary directory) and removes it on close.
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
let failed = false;
let stack = null;
let client = null;
try {
  // The stand-in vSphere Client's origin is registered with the plugin
  // server as a vCenter origin (-vcenter-origin), as an installer does.
  const clientPort = await freePort();
  stack = await startStack(pluginBin, uiDir, (l) => logLines.push(l), ['-vcenter-origin', `https://127.0.0.1:${clientPort}`]);
  client = await startClient(clientPort, stack.base, stack.certFile, stack.keyFile);
  mkdirSync(shots, { recursive: true });
  const ctx = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1360, height: 860 } });
  ctx.setDefaultTimeout(30_000);
  const page = await ctx.newPage();
  const consoleErrors = [];
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  const ui = `${stack.base}/ui/index.html`;
  // signInAsMonitor opens a browser context of its own, signed in as the
  // demo's monitor-only vSphere user, on the dashboard.
  async function signInAsMonitor() {
    const mctx = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1360, height: 860 } });
    mctx.setDefaultTimeout(30_000);
    const m = await mctx.newPage();
    m.on('pageerror', (e) => consoleErrors.push(String(e)));
    await m.goto(`${ui}#/global`);
    await m.getByLabel('vCenter user name').fill(stack.monitorUser);
    await m.getByLabel('Password', { exact: true }).fill(stack.monitorPassword);
    await m.getByRole('button', { name: 'Sign in' }).click();
    await m.getByRole('heading', { name: 'Cairn dashboard' }).waitFor();
    return { mctx, m };
  }

  await step('standalone login: a wrong password is refused with what to do, the right one signs in', async () => {
    await page.goto(`${ui}#/global`);
    await page.getByLabel('vCenter user name').waitFor();
    await shot(page, 'login');
    await axe(page, 'login');
    await page.getByLabel('vCenter user name').fill(stack.user);
    await page.getByLabel('Password', { exact: true }).fill('wrong-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#login-error').getByText('check them and try again').waitFor();
    await page.getByLabel('Password', { exact: true }).fill(stack.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Cairn dashboard' }).waitFor();
    await page.getByText('No Cairn system yet').waitFor();
  });

  const wizard = page.locator('clr-wizard');
  const next = () => wizard.getByRole('button', { name: 'Next' }).click();

  await step('deployment wizard: system and hosts pages', async () => {
    await page.getByRole('link', { name: 'Deploy', exact: true }).click();
    await page.getByRole('button', { name: 'Deploy a new system…' }).click();
    await wizard.getByLabel('System name').waitFor();
    await wizard.getByLabel('System name').fill('cairn1');
    await shot(page, 'wizard-system');
    await axe(page, 'wizard: system');
    await next();
    await wizard.getByRole('checkbox', { name: 'Use host esx-01.cairn.test' }).waitFor();
    assert(await wizard.getByRole('checkbox', { name: 'Use host esx-04.cairn.test' }).isChecked(), 'suggested plan lacks esx-04');
    await next();
  });

  await step('a refused plan shows its reason on the step that owns it (roles)', async () => {
    const mdm1 = wizard.getByRole('checkbox', { name: 'MDM voter on esx-01.cairn.test' });
    await mdm1.waitFor();
    assert(await mdm1.isChecked(), 'esx-01 is not an MDM voter in the suggested plan');
    await mdm1.uncheck();
    await next();
    const reason = wizard.locator('[data-step="roles"] .problem').filter({ hasText: 'even number' });
    await reason.waitFor();
    assert(await mdm1.isVisible(), 'the wizard left the roles page although the plan was refused');
    await shot(page, 'wizard-roles-refused');
    await axe(page, 'wizard: roles (refused)');
    await mdm1.check();
    await next();
    await wizard.getByRole('button', { name: 'One fault set per host' }).waitFor();
  });

  await step('deployment wizard: fault sets, pool, devices, network, review', async () => {
    await shot(page, 'wizard-faultsets');
    await next();
    await wizard.getByLabel('Spare capacity (%)').waitFor();
    await next();
    await wizard.getByRole('checkbox', { name: /^Use disk .* on esx-01.cairn.test$/ }).first().waitFor();
    await shot(page, 'wizard-devices');
    await axe(page, 'wizard: devices');
    await next();
    await wizard.getByRole('button', { name: 'Fill from range' }).waitFor();
    await shot(page, 'wizard-network');
    await axe(page, 'wizard: network');
    await next();
    await wizard.getByRole('button', { name: 'Download plan JSON' }).waitFor();
    const json = await wizard.getByLabel('Plan JSON').textContent();
    const plan = JSON.parse(json ?? '');
    assert(plan.system === 'cairn1' && plan.hosts.length === 4 && plan.version === 1, 'review shows a wrong plan');
    const download = page.waitForEvent('download');
    await wizard.getByRole('button', { name: 'Download plan JSON' }).click();
    assert((await download).suggestedFilename() === 'cairn-plan-cairn1.json', 'plan download name');
    await shot(page, 'wizard-review');
  });

  await step('deploy with per-host progress and a live log, to a deployed system', async () => {
    await wizard.getByRole('button', { name: 'Deploy', exact: true }).click();
    await wizard.getByText('Deployment of').waitFor();
    await wizard.getByRole('log', { name: 'Deployment log (newest first)' }).getByText('esx-02.cairn.test').first().waitFor({ timeout: 60_000 });
    await shot(page, 'wizard-deploy-running');
    await wizard.locator('.job-state .label-success').waitFor({ timeout: 240_000 });
    await wizard.getByText('system cairn1 deployed').first().waitFor();
    await shot(page, 'wizard-deploy-done');
    await wizard.getByRole('button', { name: 'Done', exact: true }).click();
  });

  await step('dashboard: health, capacity, jobs and events of the deployed system', async () => {
    await page.getByRole('link', { name: 'Dashboard' }).click();
    await page.getByRole('heading', { name: /System cairn1/ }).waitFor();
    await page.locator('.health .label-success').getByText('Healthy').waitFor({ timeout: 30_000 });
    await page.getByRole('img', { name: /^Capacity: / }).waitFor();
    await page.getByText('deploy:cairn1').first().waitFor();
    await shot(page, 'dashboard');
    await axe(page, 'dashboard');
  });

  await step('SDSs and devices datagrids', async () => {
    await page.getByRole('link', { name: 'SDSs and devices' }).click();
    await page.getByText('4 SDSs').waitFor();
    await shot(page, 'sds');
    await axe(page, 'SDSs and devices');
  });

  await step('create a volume and its datastore (a job with live progress)', async () => {
    await page.getByRole('link', { name: 'Volumes' }).click();
    await page.getByRole('button', { name: 'Create volume and datastore…' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Name').fill('bad name!');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await dialog.getByText('Give the volume a name').waitFor();
    await dialog.getByLabel('Name').fill('vol1');
    await dialog.getByLabel('Size (GiB)').fill('16');
    await shot(page, 'volume-create');
    await axe(page, 'volume create dialog');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await page.locator('.job-card .label-success').waitFor({ timeout: 120_000 });
    await page.locator('clr-dg-cell').getByText('vol1', { exact: true }).waitFor();
  });

  await step("set a volume's QoS limits (a value the gateway refuses shows its reason)", async () => {
    await page.getByRole('button', { name: 'Edit the QoS limits of vol1' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Bandwidth limit (MiB/s)').fill('0.01');
    await dialog.getByRole('button', { name: 'Apply' }).click();
    await dialog.getByRole('alert').getByText('at least 0.0625 MiB/s').waitFor();
    await dialog.getByLabel('Bandwidth limit (MiB/s)').fill('100');
    await dialog.getByLabel('IOPS limit').fill('20000000');
    await dialog.getByRole('button', { name: 'Apply' }).click();
    await dialog.getByRole('alert').getByText('1 to 10000000 I/Os per second').waitFor();
    await dialog.getByLabel('IOPS limit').fill('2000');
    await shot(page, 'volume-qos');
    await axe(page, 'volume QoS dialog');
    await dialog.getByRole('button', { name: 'Apply' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await page.locator('clr-dg-cell').getByText('2,000 IOPS · 100 MiB/s').waitFor();
  });

  await step('grow a volume and its datastore (a job: volume, rescans, VMFS expand)', async () => {
    await page.getByRole('button', { name: 'Grow vol1' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('New size (GiB)').fill('8');
    await dialog.getByRole('button', { name: 'Grow' }).click();
    await dialog.getByRole('alert').getByText('volumes only grow').waitFor();
    await dialog.getByLabel('New size (GiB)').fill('32');
    await shot(page, 'volume-grow');
    await axe(page, 'volume grow dialog');
    await dialog.getByRole('button', { name: 'Grow' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await page.locator('.job-card').getByText('Job grow:vol1').waitFor();
    await page.locator('.job-card .label-success').waitFor({ timeout: 120_000 });
    await page.locator('.job-card').getByText('datastore vol1 grown to 32.0 GiB').waitFor();
    await page.locator('clr-dg-cell').getByText('32.0 GB').waitFor();
    await shot(page, 'volumes');
    await axe(page, 'volumes');
  });

  await step('start a rolling maintenance, follow it live and confirm each patch step', async () => {
    await page.getByRole('link', { name: 'Maintenance' }).click();
    await page.getByLabel('esx-01.cairn.test').check();
    await page.getByLabel('esx-02.cairn.test').check();
    await page.getByRole('button', { name: /Start roll|Resume roll/ }).click();
    await page.locator('.roll-state .label-info').waitFor();
    await page.getByRole('log', { name: 'Maintenance log (newest first)' }).locator('div').first().waitFor();
    await shot(page, 'maintenance');
    await axe(page, 'maintenance');
    const deadline = Date.now() + 180_000;
    while (!(await page.locator('.roll-state .label-success').isVisible())) {
      assert(Date.now() < deadline, 'the roll did not finish in 180 s');
      assert(!(await page.locator('.roll-state .label-danger').isVisible()), 'the roll failed: ' + (await page.locator('.roll-state').textContent()));
      const cont = page.getByRole('button', { name: 'Host patched: continue' });
      if (await cont.isEnabled()) {
        // The roll may finish (and disable the button) between the check
        // and the click: a click that times out is retried by the loop,
        // which fails on the roll's own state.
        await cont.click({ timeout: 3000 }).catch((e) => {
          if (e?.name !== 'TimeoutError') {
            throw e;
          }
        });
      }
      await page.waitForTimeout(500);
    }
    await shot(page, 'maintenance-done');
  });

  // Volume map / unmap / delete (issue 15): jobs followed in their dialogs.
  await step('unmap a volume from a host: its datastore is unmounted and its LUN detached there first (a job)', async () => {
    await page.getByRole('link', { name: 'Volumes' }).click();
    await page.getByRole('button', { name: 'Unmap vol1 from hosts' }).click();
    const dialog = page.getByRole('dialog');
    assert(await dialog.getByRole('button', { name: 'Unmap', exact: true }).isDisabled(), 'Unmap is enabled with no host chosen');
    await dialog.getByLabel('esx-04.cairn.test').check();
    await dialog.getByRole('button', { name: 'Unmap', exact: true }).click();
    await dialog.locator('.label-success').waitFor({ timeout: 120_000 });
    await dialog.getByRole('log').getByText('detached naa.').first().waitFor();
    await dialog.locator('.modal-footer').getByRole('button', { name: 'Close' }).click();
    await dialog.waitFor({ state: 'hidden' });
    const row = page.locator('clr-dg-row', { hasText: 'vol1' });
    await row.getByText('esx-03.cairn.test').waitFor();
    assert(!((await row.textContent()) ?? '').includes('esx-04'), 'vol1 is still shown mapped to esx-04');
  });

  await step('map a volume to a host (a job: map, rescan, attach, mount)', async () => {
    await page.getByRole('button', { name: 'Map vol1 to hosts' }).click();
    const dialog = page.getByRole('dialog');
    assert(await dialog.getByLabel('esx-01.cairn.test').isDisabled(), 'a mapped host is offered for mapping');
    await dialog.getByLabel('esx-04.cairn.test').check();
    await dialog.getByRole('button', { name: 'Map', exact: true }).click();
    await dialog.locator('.label-success').waitFor({ timeout: 120_000 });
    await dialog.getByRole('log').getByText('attached naa.').waitFor();
    await dialog.getByRole('log').getByText('datastore vol1 mounted on esx-04.cairn.test').waitFor();
    await shot(page, 'volume-map');
    await axe(page, 'volume map dialog');
    await dialog.locator('.modal-footer').getByRole('button', { name: 'Close' }).click();
    await page.locator('clr-dg-row', { hasText: 'vol1' }).getByText('esx-04.cairn.test').waitFor();
  });

  // Day-2 devices and maintenance stop (h/devices).
  let drainedSDS = '';
  await step('remove a device: confirmation, live drain progress, still followed after a reload', async () => {
    await page.getByRole('link', { name: 'SDSs and devices' }).click();
    const row = page.locator('clr-datagrid[aria-label="Devices"] clr-dg-row').filter({ has: page.getByRole('button', { name: /^Remove device / }) }).first();
    await row.waitFor();
    drainedSDS = ((await row.locator('clr-dg-cell').nth(1).textContent()) ?? '').trim();
    const devices = await page.locator('clr-datagrid[aria-label="Devices"] clr-dg-row').count();
    await row.getByRole('button', { name: /^Remove device / }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText('is drained first').waitFor();
    await dialog.getByRole('button', { name: 'Drain and remove' }).click();
    await dialog.waitFor({ state: 'hidden' });
    const progress = page.locator('.drain .cairn-muted').filter({ hasText: /[1-9][0-9]*(\.[0-9])?%/ });
    await progress.first().waitFor({ timeout: 20_000 });
    await page.reload();
    await page.getByRole('heading', { name: 'SDSs and devices' }).waitFor();
    await progress.filter({ hasText: /left/ }).first().waitFor({ timeout: 20_000 });
    await page.getByRole('log', { name: /^Log of device-remove:cairn1\// }).getByText('draining:').first().waitFor();
    await shot(page, 'device-remove');
    await axe(page, 'device remove (draining)');
    await page.locator('.job-card').filter({ hasText: 'device-remove:' }).locator('.label-success').waitFor({ timeout: 60_000 });
    await page.locator('.job-card').getByText('drained and removed').first().waitFor();
    const deadline = Date.now() + 10_000;
    while ((await page.locator('clr-datagrid[aria-label="Devices"] clr-dg-row').count()) !== devices - 1) {
      assert(Date.now() < deadline, 'the removed device is still listed');
      await page.waitForTimeout(300);
    }
  });

  await step('add a device: the SDS host’s disks with why-not, the freed disk added again', async () => {
    await page.getByRole('button', { name: `Add device to ${drainedSDS}` }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText('Not available: already Cairn device').first().waitFor();
    await dialog.getByText('Not available: ESXi does not offer it for raw mapping').first().waitFor();
    const free = dialog.locator('input[type=radio]:not([disabled])');
    assert((await free.count()) === 1, `expected the one freed disk to be offered, got ${await free.count()}`);
    await dialog.getByText('RDM, attached to the SVM').first().waitFor();
    await free.check();
    await shot(page, 'device-add');
    await axe(page, 'device add dialog');
    await dialog.getByRole('button', { name: 'Add device' }).click();
    await dialog.waitFor({ state: 'hidden' });
    const card = page.locator('.job-card').filter({ hasText: 'device-add:' });
    await card.locator('.label-success').waitFor({ timeout: 60_000 });
    await card.getByText(`added to sds ${drainedSDS}`).waitFor();
  });

  await step('stop a rolling maintenance: the host comes back, the roll ends stopped, a resume finishes it', async () => {
    await page.getByRole('link', { name: 'Maintenance' }).click();
    // The log still holds the earlier roll's "waiting for the operator":
    // this roll waits for the operator when there is one more of them.
    const waiting = page.getByRole('log', { name: 'Maintenance log (newest first)' }).getByText('waiting for the operator');
    const before = await waiting.count();
    await page.getByRole('button', { name: 'Start roll' }).click();
    const cont = page.getByRole('button', { name: 'Host patched: continue' });
    for (const until = Date.now() + 60_000; (await waiting.count()) <= before; ) {
      assert(Date.now() < until, 'the roll did not reach the patch step in 60 s');
      await page.waitForTimeout(250);
    }
    await page.getByRole('button', { name: 'Stop roll…' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText('The roll stops safely').waitFor();
    await dialog.getByRole('button', { name: 'Stop roll', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    // The stop's answer names the host and step (the wait for Continue: patch).
    const said = page.getByRole('status').filter({ hasText: /Stopping at / });
    await said.waitFor();
    const text = (await said.innerText()).trim();
    assert(/^Stopping at esx-01\.cairn\.test \(step [a-z-]+\)/.test(text), `the stop answered: ${text}`);
    console.log(`     ${text}`);
    await page.locator('.roll-state .label-warning').getByText('stopped').waitFor({ timeout: 60_000 });
    await page.getByText('Stopped by the operator.').waitFor();
    await page.getByText(/Brought back without their patch by a stop: esx-01\.cairn\.test/).waitFor();
    await shot(page, 'maintenance-stopped');
    await axe(page, 'maintenance (stopped)');
    await page.getByRole('button', { name: 'Resume roll' }).click();
    const deadline = Date.now() + 240_000;
    while (!(await page.locator('.roll-state .label-success').isVisible())) {
      assert(Date.now() < deadline, 'the resumed roll did not finish in 240 s');
      assert(!(await page.locator('.roll-state .label-danger').isVisible()), 'the resumed roll failed: ' + (await page.locator('.roll-state').textContent()));
      if (await cont.isEnabled()) {
        await cont.click({ timeout: 3000 }).catch((e) => {
          if (e?.name !== 'TimeoutError') {
            throw e;
          }
        });
      }
      await page.waitForTimeout(500);
    }
  });

  // The rolling upgrade (Upgrade page): the demo's gateway stores bundles
  // 0.2.0 and 0.3.0 (cmd/cairn-plugin, -demo); its SVMs' updaters start on 0.1.0.
  const svmFooter = page.locator('clr-datagrid[aria-label="SVM updaters"] clr-dg-footer');
  async function untilFooter(re, ms, what) {
    for (const until = Date.now() + ms; !re.test(((await svmFooter.textContent()) ?? '').trim()); ) {
      assert(Date.now() < until, `${what}: the SVMs table says ${(await svmFooter.textContent())?.trim()}`);
      await page.waitForTimeout(500);
    }
  }
  async function confirmUpgrade(p, version) {
    await p.getByRole('button', { name: `Upgrade to ${version}…` }).click();
    const dialog = p.getByRole('dialog');
    await dialog.getByText('instant maintenance').waitFor();
    return dialog;
  }

  await step('upgrade the SVMs to a stored bundle: one chosen host first, then every SVM left; confirmed, followed unit by unit, every SVM on the new version', async () => {
    await page.getByRole('link', { name: 'Upgrade' }).click();
    await page.getByRole('heading', { name: 'Upgrade', exact: true }).waitFor();
    await untilFooter(/^\d+ SVMs: \d+ on 0\.1\.0$/, 20_000, 'before the upgrade');
    await page.locator('clr-datagrid[aria-label="Stored bundles"]').getByText('0.3.0', { exact: true }).waitFor();
    await shot(page, 'upgrade');
    await axe(page, 'upgrade');
    // One host chosen: only its SVM is rolled; the others stay on 0.1.0.
    const only = page.getByRole('checkbox', { name: 'esx-04.cairn.test', exact: true });
    await only.check();
    let dialog = await confirmUpgrade(page, '0.2.0');
    await dialog.getByText(/^The chosen SVM will be upgraded \(host esx-04\.cairn\.test; the other \d+ SVMs stay on their version\), one unit at a time:$/).waitFor();
    await shot(page, 'upgrade-confirm-chosen');
    await dialog.getByRole('button', { name: 'Upgrade to 0.2.0', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    // While it runs: one unit, and the choice cannot change.
    let sawUnit = false;
    for (const deadline = Date.now() + 120_000; !(await page.locator('.roll-state .label-success').isVisible()); ) {
      assert(Date.now() < deadline, 'the upgrade of the chosen host did not finish in 120 s');
      assert(!(await page.locator('.roll-state .label-danger').isVisible()), 'the upgrade of the chosen host failed: ' + (await page.locator('.roll').textContent()));
      if (!sawUnit && (await page.locator('.roll-unit').getByText('SVM unit 1 of 1').isVisible())) {
        sawUnit = true;
        assert(await only.isDisabled(), 'the host choice can change while a roll runs');
      }
      await page.waitForTimeout(300);
    }
    assert(sawUnit, 'the page never showed the roll of the chosen host as "SVM unit 1 of 1"');
    await untilFooter(/^\d+ SVMs: \d+ on 0\.1\.0, 1 on 0\.2\.0$/, 20_000, 'after the upgrade of the chosen host');
    const chosenRow = page.locator('clr-datagrid[aria-label="SVM updaters"] clr-dg-row', { has: only });
    assert(((await chosenRow.textContent()) ?? '').includes('0.2.0'), 'the chosen host\'s SVM does not run 0.2.0: ' + (await chosenRow.textContent()));
    await page.locator('clr-datagrid[aria-label="Stored bundles"]').getByText('every chosen SVM runs it').waitFor();
    await shot(page, 'upgrade-chosen-done');
    await only.uncheck();
    // None chosen: every SVM left.
    dialog = await confirmUpgrade(page, '0.2.0');
    const left = /^(\d+) of (\d+) SVMs will be upgraded/.exec(((await dialog.getByText(/SVMs will be upgraded/).textContent()) ?? '').trim());
    assert(left && Number(left[1]) === Number(left[2]) - 1, 'with none chosen the upgrade should roll every SVM but the one done: ' + left);
    await dialog.getByText('MDM members').waitFor();
    await dialog.getByText('rolls back').waitFor();
    await shot(page, 'upgrade-confirm');
    await axe(page, 'upgrade confirmation');
    await dialog.getByRole('button', { name: 'Upgrade to 0.2.0', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    await page.locator('.roll-unit').waitFor({ timeout: 60_000 });
    await page.locator('.roll-unit').getByText(/SVM unit \d+ of \d+/).waitFor();
    // The SVMs table shows the order too (it reads the updaters every second).
    await page.locator('clr-datagrid[aria-label="SVM updaters"] clr-dg-row').filter({ hasText: '0.2.0' }).first().waitFor();
    await shot(page, 'upgrade-running');
    await axe(page, 'upgrade (running)');
    const deadline = Date.now() + 240_000;
    while (!(await page.locator('.roll-state .label-success').isVisible())) {
      assert(Date.now() < deadline, 'the upgrade did not finish in 240 s');
      assert(!(await page.locator('.roll-state .label-danger').isVisible()), 'the upgrade failed: ' + (await page.locator('.roll').textContent()));
      await page.waitForTimeout(500);
    }
    await page.getByText('Upgrade to 0.2.0 done: every SVM it rolled runs it').waitFor();
    await untilFooter(/^(\d+) SVMs: \1 on 0\.2\.0$/, 20_000, 'after the upgrade');
    await page.locator('clr-datagrid[aria-label="Stored bundles"]').getByText('every SVM runs it').waitFor();
    await shot(page, 'upgrade-done');
  });

  await step('stop an upgrade after the SVM it is on: the job ends stopped, the SVMs left stay on their version', async () => {
    const dialog = await confirmUpgrade(page, '0.3.0');
    await dialog.getByRole('button', { name: 'Upgrade to 0.3.0', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    // Unit 1 of several: the stop lands before the last unit.
    await page.locator('.roll-unit').getByText(/SVM unit 1 of \d+/).waitFor({ timeout: 60_000 });
    const units = Number(/of (\d+)/.exec((await page.locator('.roll-unit').textContent()) ?? '')?.[1]);
    assert(units >= 2, `the roll has ${units} unit(s): a stop needs two`);
    await page.getByRole('button', { name: 'Stop after this SVM' }).click();
    await page.getByRole('status').getByText(/Stop asked: the roll stops once the SVM unit it is on/).waitFor();
    await page.locator('clr-datagrid[aria-label="SVM updaters"] clr-dg-row').filter({ hasText: '0.3.0' }).first().waitFor();
    await shot(page, 'upgrade-stopping');
    await page.locator('.roll-state .label-warning').getByText('stopped').waitFor({ timeout: 120_000 });
    await page.getByText('Stopped as asked').waitFor();
    await untilFooter(/on 0\.3\.0.*on 0\.2\.0|on 0\.2\.0.*on 0\.3\.0/, 20_000, 'after the stop');
    await shot(page, 'upgrade-stopped');
    await axe(page, 'upgrade (stopped)');
  });

  await step('a monitor-only user sees the updaters, and starting an upgrade tells it needs Cairn.Administer', async () => {
    const { mctx, m } = await signInAsMonitor();
    await m.getByRole('link', { name: 'Upgrade' }).click();
    await m.getByRole('heading', { name: 'Upgrade', exact: true }).waitFor();
    await m.locator('clr-datagrid[aria-label="SVM updaters"] clr-dg-footer').getByText(/on 0\.3\.0/).waitFor();
    const dialog = await confirmUpgrade(m, '0.3.0');
    await dialog.getByRole('button', { name: 'Upgrade to 0.3.0', exact: true }).click();
    await dialog.getByRole('alert').getByText('needs the privilege Cairn.Administer').waitFor();
    await shot(m, 'upgrade-no-privilege');
    await axe(m, 'upgrade (no privilege)');
    await mctx.close();
  });

  await step('the stopped upgrade started again goes on with the SVMs left and succeeds', async () => {
    const dialog = await confirmUpgrade(page, '0.3.0');
    await dialog.getByRole('button', { name: 'Upgrade to 0.3.0', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });
    await page.locator('.roll-state .label-success').waitFor({ timeout: 240_000 });
    await untilFooter(/^(\d+) SVMs: \1 on 0\.3\.0$/, 20_000, 'after the resumed upgrade');
  });

  // A bundle laid out as `cairn bundle` writes it (gzip, tar, manifest.json
  // and the two binaries), made with tar here.
  function makeBundle(dir, version) {
    const files = { cairn: `#!/bin/sh\necho ${version}\n`, cairnctl: '#!/bin/sh\n' };
    const sums = {};
    for (const [name, text] of Object.entries(files)) {
      writeFileSync(join(dir, name), text, { mode: 0o755 });
      sums[name] = createHash('sha256').update(text).digest('hex');
    }
    writeFileSync(join(dir, 'manifest.json'), JSON.stringify({ format: 1, version, files: sums }));
    const out = join(dir, `cairn-${version}.tgz`);
    execFileSync('tar', ['-czf', out, '-C', dir, 'manifest.json', 'cairn', 'cairnctl']);
    return out;
  }

  await step('upload a bundle from the page: a file that is no bundle is refused with the reason, a bundle is stored, listed and offered', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cairn-ui-bundle-'));
    try {
      const notBundle = join(dir, 'notes.tgz');
      writeFileSync(notBundle, 'not a bundle\n');
      const input = page.locator('input#bundle-file');
      await input.setInputFiles(notBundle);
      await page.getByRole('alert').getByText(/^notes\.tgz was not stored: invalid update bundle: not gzip/).waitFor();
      await shot(page, 'upgrade-upload-refused');
      const good = makeBundle(dir, '0.4.0');
      await input.setInputFiles(good);
      await page.getByRole('status').getByText(/^Bundle 0\.4\.0 stored on the gateway of \S+ \([\d.]+ (B|KB), SHA-256 [0-9a-f]{16}…\): an upgrade can roll to it\.$/).waitFor();
      const grid = page.locator('clr-datagrid[aria-label="Stored bundles"]');
      await grid.getByText('0.4.0', { exact: true }).waitFor();
      await grid.getByRole('button', { name: 'Upgrade to 0.4.0…' }).waitFor();
      await shot(page, 'upgrade-uploaded');
      await axe(page, 'upgrade (uploaded)');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const token = await sessionToken(stack.vcenter, stack.user, stack.password);
  const inv = await (await ctx.request.get(`${stack.base}/api/v1/inventory`)).json();
  const cluster = inv.datacenters[0].clusters[0];
  const host = inv.datacenters[0].hosts.find((h) => h.name === 'esx-01.cairn.test');

  // inClient opens view the way the vSphere Client does: in an iframe of
  // the client's page, through its reverse proxy (another origin), with
  // the client's SDK (a stub: session token, context object, theme).
  async function inClient(view, objectType, moref, tokenValue) {
    client.sdk.token = tokenValue;
    client.sdk.objectId = `urn:vmomi:${objectType}:${moref}:00000000-0000-0000-0000-000000000000`;
    const c = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1360, height: 860 } });
    c.setDefaultTimeout(30_000);
    const p = await c.newPage();
    p.on('console', (m) => m.type() === 'error' && logLines.push(`[in-client console] ${m.text()}\n`));
    p.on('pageerror', (e) => logLines.push(`[in-client page error] ${e}\n`));
    await p.goto(`${client.base}/ui/?view=${encodeURIComponent(view)}`);
    const frame = p.frameLocator('iframe[title="Cairn"]');
    return { c, p, frame };
  }

  await step('remote-plugin path: cluster Monitor view in an iframe, signed in with the client session token, dark theme', async () => {
    const { c, p, frame } = await inClient('cluster/monitor', 'ClusterComputeResource', cluster.moref, token);
    try {
      await frame.getByRole('heading', { name: /System cairn1/ }).waitFor();
    } catch (e) {
      const f = p.frames().find((x) => x.url().includes(PROXY_PREFIX));
      logLines.push(`[in-client] frame ${f?.url()}: ${(await f?.locator('body').innerText().catch(() => ''))?.slice(0, 600)}\n`);
      throw e;
    }
    assert((await frame.locator('body').getAttribute('cds-theme')) === 'dark', 'the UI did not follow the client theme');
    assert((await frame.getByLabel('vCenter user name').count()) === 0, 'the login page showed inside the client');
    await shot(p, 'vsphere-cluster-monitor');
    const f = p.frames().find((x) => x.url().includes(PROXY_PREFIX));
    await axe(f, 'cluster monitor (in client)');
    await c.close();
  });

  await step('remote-plugin path: host Summary view with the host as context object', async () => {
    const { c, p, frame } = await inClient('host/summary', 'HostSystem', host.moref, token);
    await frame.getByText('is part of Cairn system').waitFor();
    await frame.getByText('esx-01.cairn.test').first().waitFor();
    await shot(p, 'vsphere-host-summary');
    await c.close();
  });

  await step('remote-plugin path: cluster Configure view posts through the proxy (Origin of the client) and validates a plan', async () => {
    const { c, p, frame } = await inClient('cluster/configure', 'ClusterComputeResource', cluster.moref, token);
    await frame.getByRole('button', { name: 'Deploy a new system…' }).click();
    const w = frame.locator('clr-wizard');
    await w.getByLabel('System name').fill('cairn2');
    await w.getByRole('button', { name: 'Next' }).click();
    await w.getByRole('checkbox', { name: 'Use host esx-01.cairn.test' }).waitFor();
    await shot(p, 'vsphere-cluster-configure');
    await c.close();
  });

  await step('remote-plugin path: a forged session token is refused with what to do', async () => {
    const { c, frame } = await inClient('cluster/monitor', 'ClusterComputeResource', cluster.moref, 'forged-token');
    await frame.getByText('did not accept the vSphere Client').first().waitFor();
    await c.close();
  });

  await step('dashboard performance: live IOPS, bandwidth and latency of a volume that move, and the rebuild panel', async () => {
    // vol1 runs the demo array's synthetic load (docs/ui.md); its QoS
    // limits (set above) would hold it flat at 2,000 IOPS: lift them.
    const lift = await ctx.request.patch(`${stack.base}/api/v1/systems/cairn1/volumes/vol1`, {
      data: { iops_limit: 0, bandwidth_limit: 0 },
      headers: { 'X-Cairn-Request': '1' },
    });
    assert(lift.ok(), `lifting vol1's limits: ${lift.status()} ${await lift.text()}`);
    await page.getByRole('link', { name: 'Dashboard' }).click();
    const perf = page.locator('.card.performance');
    await perf.getByRole('img', { name: /^IOPS, last 5 minutes: now Read / }).waitFor({ timeout: 30_000 });
    await perf.getByLabel('Show').selectOption('volume');
    await perf.getByLabel('Volume', { exact: true }).selectOption('vol1');
    await perf.getByRole('group', { name: 'Performance of Volume vol1' }).waitFor({ timeout: 30_000 });
    const readIops = async () => {
      const t = (await perf.locator('table.perf-now tbody tr').first().locator('td').first().textContent()) ?? '';
      return Number(t.replace(/[^0-9]/g, ''));
    };
    const first = await readIops();
    assert(first > 0, `vol1 shows ${first} read IOPS under the demo load`);
    let later = first;
    const deadline = Date.now() + 30_000;
    while (later === first) {
      assert(Date.now() < deadline, `vol1's read IOPS stayed at ${first} for 30 s`);
      await page.waitForTimeout(1000);
      later = await readIops();
    }
    assert(later > 0, 'read IOPS fell to 0 with the load running');
    for (const chart of ['IOPS', 'Bandwidth', 'Latency (mean)']) {
      const label = await perf.getByRole('img', { name: new RegExp(`^${chart.replace(/[()]/g, '\\$&')}, last 5 minutes`) }).getAttribute('aria-label');
      assert(/Read [0-9.,]+ .*Write [0-9.,]+ /.test(label ?? ''), `${chart} chart's text alternative: ${label}`);
    }
    assert((await perf.locator('polyline').count()) === 6, 'three charts of two lines each');
    await page.locator('.card').filter({ hasText: 'Rebuild, rebalance and resync' }).getByText('No rebuild, rebalance or resync in progress.').waitFor();
    await page.locator('section.system').first().screenshot({ path: join(shots, 'dashboard-performance.png') });
    await axe(page, 'dashboard performance');
  });

  await step('a monitor-only vSphere user reads the system; a change tells which privilege it needs, on which cluster', async () => {
    assert(stack.monitorUser, 'the demo printed no monitor-only user');
    const { mctx, m } = await signInAsMonitor();
    await m.getByRole('link', { name: 'Volumes' }).click();
    await m.getByRole('button', { name: 'Edit the QoS limits of vol1' }).click();
    const dialog = m.getByRole('dialog');
    await dialog.getByLabel('IOPS limit').fill('1000');
    await dialog.getByRole('button', { name: 'Apply' }).click();
    await dialog.getByRole('alert').getByText('needs the privilege Cairn.Operate').waitFor();
    await dialog.getByRole('alert').getByText('cluster cairn-cluster').waitFor();
    await shot(m, 'no-privilege');
    await axe(m, 'no-privilege');
    await mctx.close();
  });

  await step('delete a volume: refused until its name is typed, then its datastore leaves every host', async () => {
    // Last: the steps before use vol1 (the dashboard's charts, a monitor's QoS edit).
    await page.getByRole('link', { name: 'Volumes' }).click();
    await page.getByRole('button', { name: 'Delete vol1' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText('unmount the datastore on 4 hosts').waitFor();
    const del = dialog.getByRole('button', { name: 'Delete volume and data' });
    assert(await del.isDisabled(), 'delete is enabled before the name is typed');
    await dialog.getByLabel('Type vol1 to confirm').fill('vol');
    assert(await del.isDisabled(), 'delete is enabled with a wrong name');
    await dialog.getByLabel('Type vol1 to confirm').fill('vol1');
    await shot(page, 'volume-delete');
    await axe(page, 'volume delete dialog');
    await del.click();
    await dialog.locator('.label-success').waitFor({ timeout: 120_000 });
    await dialog.getByRole('log').getByText('deleted volume vol1').waitFor();
    await dialog.locator('.modal-footer').getByRole('button', { name: 'Close' }).click();
    await page.locator('clr-dg-cell').getByText('vol1', { exact: true }).waitFor({ state: 'detached' });
    const inventory = await (await ctx.request.get(`${stack.base}/api/v1/inventory`)).json();
    for (const h of inventory.datacenters[0].hosts) {
      assert(!(h.datastores ?? []).some((d) => d.name === 'vol1'), `host ${h.name} still has datastore vol1`);
    }
  });

  assert(consoleErrors.length === 0, `uncaught errors in the page: ${consoleErrors.join('\n')}`);
} catch (e) {
  failed = true;
  console.log(`e2e stopped: ${e instanceof Error ? e.message : e}`);
  if (logLines.length) {
    console.log('--- cairn-plugin log (last 40 lines)\n' + logLines.join('').split('\n').slice(-40).join('\n'));
  }
} finally {
  await browser.close();
  await client?.stop();
  await stack?.stop();
}
const passed = results.filter((r) => r.ok).length;
console.log(`e2e: ${passed}/${results.length} passed in ${((Date.now() - t0) / 1000).toFixed(1)} s; screenshots in ${shots}`);
process.exit(failed ? 1 : 0);
