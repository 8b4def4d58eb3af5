// The demo stack the browser tests run against: `cairn-plugin -demo`
// (govmomi simulator kit + the in-memory Cairn array, exactly what
// `make demo-vsphere` serves) with the built UI. Started on a free
// loopback port, stopped (by its pid) when the tests end.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { fileURLToPath } from 'node:url';

// shotDir is where the browser tests save their screenshots: ui/e2e/out/screenshots
// (ignored by git) on every run, so `make test` leaves the work tree as it found it
// (an OVA built afterwards was versioned "-dirty" by rewritten PNGs); with
// CAIRN_SCREENSHOTS=docs, the committed docs/screenshots the docs show
// (`make screenshots`).
export const shotDir = fileURLToPath(
  new URL(process.env.CAIRN_SCREENSHOTS === 'docs' ? '../../docs/screenshots' : './out/screenshots', import.meta.url),
);

// freePort is tests/lib/common.sh's free_port, the harnesses' one picker: a
// loopback port that was free, below the kernel's ephemeral range (as
// appliance/internal/porttest does), since the caller binds it seconds later
// and a port from that range may meanwhile become the local port of any
// outgoing connection (the real-cluster browser run beside this one opens
// many).
const commonSh = fileURLToPath(new URL('../../tests/lib/common.sh', import.meta.url));
export async function freePort() {
  const out = execFileSync('bash', ['-c', '. "$1" && free_port', 'free-port', commonSh], { encoding: 'utf8' });
  return Number(out.trim());
}

export async function startStack(pluginBin, uiDir, log, extraArgs = []) {
  const port = await freePort();
  const child = spawn(pluginBin, ['-demo', '-listen', `127.0.0.1:${port}`, '-ui', uiDir, ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (b) => (out += b));
  child.stderr.on('data', (b) => log(String(b)));
  const deadline = Date.now() + 120_000;
  while (!/password in (\S+)/.test(out)) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGTERM');
      throw new Error(`cairn-plugin -demo did not start (exit ${child.exitCode}): ${out}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const vcenter = /simulated vCenter: (\S+)/.exec(out)[1];
  const user = /sign in to the UI as (\S+)/.exec(out)[1];
  const password = readFileSync(/password in (\S+)/.exec(out)[1], 'utf8').trim();
  const cert = /certificate: (\S+)/.exec(out)[1];
  // The demo's second vSphere user, with Cairn.Monitor only.
  const monitor = /monitor-only user \(Cairn\.Monitor\): (\S+), its password file (\S+)/.exec(out);
  return {
    base: `https://127.0.0.1:${port}`,
    certFile: cert,
    keyFile: cert.replace(/plugin-cert\.pem$/, 'plugin-key.pem'),
    vcenter,
    user,
    password,
    monitorUser: monitor ? monitor[1] : '',
    monitorPassword: monitor ? readFileSync(monitor[2], 'utf8').trim() : '',
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) {
          return resolve();
        }
        child.once('exit', resolve);
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 15_000).unref();
      }),
  };
}

// sessionToken logs in to the simulated vCenter over SOAP and returns the
// session's token, as the vSphere Client hands it to a plugin's UI.
export function sessionToken(vcenter, user, password) {
  const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const body = `<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:urn="urn:vim25"><soapenv:Body><urn:Login><urn:_this type="SessionManager">SessionManager</urn:_this><urn:userName>${esc(user)}</urn:userName><urn:password>${esc(password)}</urn:password></urn:Login></soapenv:Body></soapenv:Envelope>`;
  const u = new URL(vcenter);
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        rejectUnauthorized: false, // the simulator's own certificate, on loopback
        headers: { 'Content-Type': 'text/xml', SOAPAction: 'urn:vim25/8.0.3.0' },
      },
      (res) => {
        res.resume();
        const ck = (res.headers['set-cookie'] ?? []).map((c) => /vmware_soap_session="?([^";]+)/.exec(c)).find(Boolean);
        if (res.statusCode !== 200 || !ck) {
          reject(new Error(`SOAP login to ${vcenter}: HTTP ${res.statusCode}`));
        } else {
          resolve(ck[1]);
        }
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

// PROXY_PREFIX is where the stand-in vSphere Client proxies the plugin
// server, in the shape of vCenter's remote plugin reverse proxy.
export const PROXY_PREFIX = '/ui/remote-plugins/com.cairn.vcenter/0.1.0';

// startClient is a stand-in for the vSphere Client on its own loopback
// origin: /ui/?view=V is a page that shows the plugin view V in an iframe
// through the client's reverse proxy (PROXY_PREFIX/* -> the plugin
// server), and /api/ui/htmlClientSdk.js is the SDK script, here a stub
// whose session token, context object and theme the test sets (sdk).
export async function startClient(port, pluginBase, certFile, keyFile) {
  const sdk = { token: '', objectId: '', theme: 'dark' };
  const target = new URL(pluginBase);
  const server = https.createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (req, res) => {
    const url = new URL(req.url, `https://127.0.0.1:${port}`);
    if (url.pathname === '/ui/') {
      const view = url.searchParams.get('view') ?? 'global';
      res.writeHead(200, { 'Content-Type': 'text/html' });
      res.end(`<!doctype html><html lang="en"><head><title>vSphere Client</title></head>
        <body style="margin:0;background:#1b2a32"><iframe title="Cairn" src="${PROXY_PREFIX}/ui/index.html#/${view}" style="border:0;width:100%;height:850px"></iframe></body></html>`);
      return;
    }
    if (url.pathname === '/api/ui/htmlClientSdk.js') {
      res.writeHead(200, { 'Content-Type': 'application/javascript' });
      res.end(`window.htmlClientSdk = {
        initialize(cb) { setTimeout(cb, 10); },
        app: {
          getSessionInfo(cb) { setTimeout(() => cb({ sessionToken: ${JSON.stringify(sdk.token)} }), 10); },
          getContextObjects() { return [{ id: ${JSON.stringify(sdk.objectId)} }]; },
          getTheme() { return { name: ${JSON.stringify(sdk.theme)} }; },
          navigateTo() {},
        },
        event: { onThemeChanged() {} },
        modal: { open() {}, close() {} },
      };`);
      return;
    }
    if (!url.pathname.startsWith(PROXY_PREFIX + '/')) {
      res.writeHead(404).end();
      return;
    }
    const headers = { ...req.headers, host: target.host };
    const up = https.request(
      { host: target.hostname, port: target.port, path: url.pathname.slice(PROXY_PREFIX.length) + url.search, method: req.method, headers, rejectUnauthorized: false },
      (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        ur.pipe(res);
      },
    );
    up.on('error', () => res.writeHead(502).end());
    req.pipe(up);
  });
  // A listen error rejects (the caller's finally stops the plugin server)
  // instead of an unhandled 'error' event ending the process with it running.
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    base: `https://127.0.0.1:${port}`,
    sdk,
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
