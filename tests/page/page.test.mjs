// The daemon's browser page in Debian's headless Chromium, driven by Playwright. `tests/page.rs`
// starts the daemon and runs this with ATC_URL, ATC_TOKEN and ATC_SHOTS (the screenshot
// folder) in the environment; any failed check exits non-zero with the reason.
//
// Cases: a wrong token shows a clear error; spawn from the button; type a command and see its
// output; resizing the window changes `stty size` in the session; a dropped socket shows the
// banner, then resumes with no line repeated; a session that starts waiting comes first with
// the needs-you badge, a desktop notification and its permission prompt; kill and forget from
// the buttons. Throughout, no
// Content-Security-Policy violation, no page error, and the token in no URL.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const { ATC_URL, ATC_TOKEN, ATC_SHOTS, ATC_BIN } = process.env;
if (!ATC_URL || !ATC_TOKEN || !ATC_SHOTS || !ATC_BIN) {
  console.error('ATC_URL, ATC_TOKEN, ATC_SHOTS and ATC_BIN must be set (tests/page.rs sets them)');
  process.exit(2);
}
mkdirSync(ATC_SHOTS, { recursive: true });

const WITHIN = 15000;
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
  console.log(`ok - ${what}`);
}

/** The daemon's API from the test's side (with the token, as a script would). */
async function api(method, path, body) {
  const resp = await fetch(`${ATC_URL}${path}`, {
    method,
    headers: { Authorization: `Bearer ${ATC_TOKEN}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await resp.json().catch(() => null);
  if (!resp.ok) throw new Error(`${method} ${path}: ${resp.status} ${JSON.stringify(json)}`);
  return json;
}

async function until(what, fn, within = WITHIN) {
  const deadline = Date.now() + within;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const shot = async (page, name) => {
  const path = join(ATC_SHOTS, `${name}.png`);
  await page.screenshot({ path });
  console.log(`screenshot: ${path}`);
};

/** Whole terminal lines equal to `line`. */
const countLines = (text, line) => text.split('\n').filter((l) => l.trimEnd() === line).length;

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: FLAGS });
let failed = false;
try {
  const context = await browser.newContext({ viewport: { width: 1400, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(WITHIN);
  const problems = [];
  const urls = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // Expected errors: the wrong token's 401, and the sockets and tickets the test cuts off.
  const expected = [/status of 401/, /ERR_CONNECTION_REFUSED/, /WebSocket connection/];
  page.on('console', (m) => {
    if (m.type() === 'error' && !expected.some((re) => re.test(m.text()))) problems.push(`console: ${m.text()}`);
  });
  page.on('request', (r) => urls.push(r.url()));
  page.on('websocket', (ws) => urls.push(ws.url()));
  // Counted by the browser itself: every report of the page's Content-Security-Policy. And
  // every desktop notification the page shows, by title.
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) =>
      window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} (${e.sourceFile}:${e.lineNumber})`),
    );
    window.__notes = [];
    const Real = window.Notification;
    function Recorded(title, options) {
      window.__notes.push(title);
      return new Real(title, options);
    }
    Recorded.requestPermission = (...args) => Real.requestPermission(...args);
    Object.defineProperty(Recorded, 'permission', { get: () => Real.permission });
    window.Notification = Recorded;
  });
  await context.grantPermissions(['notifications'], { origin: ATC_URL });

  const first = await page.goto(ATC_URL);
  const headers = first.headers();
  check(headers['content-security-policy']?.includes("script-src 'self'"), 'the page has a strict CSP');
  check(headers['x-frame-options'] === 'DENY', 'X-Frame-Options: DENY');
  check(headers['x-content-type-options'] === 'nosniff', 'X-Content-Type-Options: nosniff');
  check(headers['referrer-policy'] === 'no-referrer', 'Referrer-Policy: no-referrer');

  // A wrong token: a clear error, and the gate stays.
  await page.fill('#token', 'this-is-not-the-token-of-this-daemon');
  await page.click('#gate-form button[type=submit]');
  await page.waitForSelector('#gate-error:not([hidden])');
  const refusal = await page.textContent('#gate-error');
  check(/refused the token/.test(refusal) && /token is wrong/.test(refusal), `a wrong token shows: ${refusal}`);
  check(await page.isHidden('#app'), 'nothing past the gate with a wrong token');
  await shot(page, 'wrong-token');

  // The right one.
  await page.fill('#token', ATC_TOKEN);
  await page.click('#gate-form button[type=submit]');
  await page.waitForSelector('#app:not([hidden])');
  check(
    (await page.evaluate(() => sessionStorage.getItem('atc.token'))) === ATC_TOKEN,
    'the token is kept in sessionStorage',
  );

  // Spawn from the button.
  await page.click('#spawn');
  await page.waitForSelector('#spawn-dialog[open]');
  await page.selectOption('#spawn-dialog select[name=agent]', 'sh');
  await page.fill('#spawn-dialog input[name=cwd]', '/tmp');
  await page.fill('#spawn-dialog input[name=name]', 'page-one');
  await page.click('#spawn-dialog button[type=submit]');
  const row = 'tr.session[data-name="page-one"]';
  await page.waitForSelector(row);
  await page.waitForFunction(() => window.atc?.attachedId());
  const id = await page.evaluate(() => window.atc.attachedId());
  check(!!id, `spawned page-one (${id}) from the button and attached to it`);
  const listed = await page.textContent(row);
  check(listed.includes('sh') && listed.includes('running') && listed.includes('local'), `its row: ${listed}`);

  // Type a command and see its output (and a 24-bit colour, which xterm draws with a style
  // attribute the CSP has to allow).
  await page.click('#screen');
  await page.keyboard.type("echo hello-$((6*7)); printf '\\033[38;2;255;120;0mtrue-colour\\033[0m\\n'\n");
  await page.waitForFunction(() => window.atc.terminalText().includes('hello-42'));
  const typed = await page.evaluate(() => window.atc.terminalText());
  check(countLines(typed, 'hello-42') === 1, 'typed a command in the terminal and saw its output');
  await page.waitForFunction(() => window.atc.terminalText().includes('\ntrue-colour'));
  await shot(page, 'fleet-and-terminal');

  // Resize the window: the session's size follows, and `stty size` inside says so.
  const sttyLast = async () => {
    const lines = (await page.evaluate(() => window.atc.terminalText())).split('\n');
    const sizes = lines.map((l) => l.trim()).filter((l) => /^\d+ \d+$/.test(l));
    return sizes[sizes.length - 1];
  };
  const before = await page.evaluate(() => window.atc.size());
  await page.keyboard.type('stty size\n');
  await until('the first stty size', async () => (await sttyLast()) === `${before.rows} ${before.cols}`);
  await page.setViewportSize({ width: 1000, height: 520 });
  const after = await until('the terminal to refit', async () => {
    const now = await page.evaluate(() => window.atc.size());
    return now.cols !== before.cols && now.rows !== before.rows ? now : null;
  });
  await until('the session to take the new size', async () => {
    const { session } = await api('GET', `/v1/sessions/${id}`);
    return session.cols === after.cols && session.rows === after.rows;
  });
  await page.keyboard.type('stty size\n');
  await until('stty size to change', async () => (await sttyLast()) === `${after.rows} ${after.cols}`);
  check(true, `stty size went from ${before.rows}x${before.cols} to ${after.rows}x${after.cols} with the window`);

  // Drop the socket, and keep the page from reconnecting (no ticket) while output arrives.
  await page.route('**/v1/tickets', (route) => route.abort('connectionrefused'));
  await page.evaluate(() => window.atc.dropConnection());
  await page.waitForSelector('#banner:not([hidden])');
  check(true, 'a dropped socket shows the reconnecting banner');
  await api('POST', `/v1/sessions/${id}/submit`, { text: 'for i in 1 2 3; do echo while-away-$i; done' });
  await until('the session to print while the page is away', async () => {
    const screen = await api('GET', `/v1/sessions/${id}/screen`);
    return screen.text.includes('while-away-3');
  });
  check(
    !(await page.evaluate(() => window.atc.terminalText())).includes('while-away-1'),
    'nothing reached the page while it was away',
  );
  await shot(page, 'reconnecting');
  await page.unroute('**/v1/tickets');
  await page.waitForSelector('#banner', { state: 'hidden' });
  await page.waitForFunction(() => window.atc.terminalText().includes('while-away-3'));
  const resumed = await page.evaluate(() => window.atc.terminalText());
  for (const line of ['hello-42', 'true-colour', 'while-away-1', 'while-away-2', 'while-away-3']) {
    check(countLines(resumed, line) === 1, `after the resume, "${line}" is shown exactly once`);
  }
  const attaches = urls.filter((u) => u.includes(`/v1/sessions/${id}/attach`));
  const last = new URL(attaches[attaches.length - 1]);
  check(
    last.searchParams.get('stream') && Number(last.searchParams.get('from')) > 0,
    `the page resumed by stream and offset (${last.search.replace(/ticket=[^&]*/, 'ticket=…')})`,
  );

  // A session starts waiting (its agent's hook says so): it comes first, with the needs-you
  // badge, a desktop notification and its prompt.
  const { session: hooked } = await api('POST', '/v1/sessions', { agent: 'claude', cwd: '/tmp', name: 'page-hook' });
  const hookedRow = 'tr.session[data-name="page-hook"]';
  await page.waitForSelector(hookedRow);
  const report = JSON.stringify({ hook_event_name: 'Notification', message: 'Allow rm?' });
  await api('POST', `/v1/sessions/${hooked.id}/submit`, { text: `printf '%s' '${report}' | ${ATC_BIN} hook-report` });
  await page.waitForSelector(`${hookedRow} .pill.state-needs_you`);
  check(
    (await page.getAttribute('#fleet tbody tr:first-child', 'data-name')) === 'page-hook',
    'the waiting session is listed first',
  );
  check((await page.textContent('#needs-you')) === '1 needs you', 'the needs-you badge counts it');
  check((await page.title()) === '(1) atc', 'and so does the tab title');
  await page.waitForFunction(() => window.__notes.includes('page-hook needs you'));
  check(true, 'a desktop notification said page-hook needs you');
  await page.waitForSelector('#permissions .permission');
  const prompt = await page.textContent('#permissions');
  check(prompt.includes('page-hook') && prompt.includes('Allow rm?'), `its permission prompt: ${prompt}`);
  await page.selectOption('#filter-state', 'needs_you');
  check((await page.locator('#fleet tr.session').count()) === 1, 'the state filter shows only the waiting one');
  await shot(page, 'needs-you');
  await page.selectOption('#filter-state', '');

  // Kill from the row's button: the row shows it exited, the terminal says why.
  await page.click(`${row} button[data-action=kill]`);
  await page.waitForSelector(`${row} .pill.state-exited`);
  await page.waitForFunction(() => /exited \(killed/.test(document.getElementById('terminal-status').textContent));
  check(true, 'kill from the button: the row shows exited, the terminal says killed');
  // Forget asks first; accepted, the row goes.
  let asked = '';
  page.once('dialog', (d) => {
    asked = d.message();
    d.accept();
  });
  await page.click(`${row} button[data-action=forget]`);
  await page.waitForSelector(row, { state: 'detached' });
  check(/Forget session page-one/.test(asked), `forget asked first: "${asked}"`);

  const violations = await page.evaluate(() => window.__csp);
  check(violations.length === 0, `no CSP violation (${violations.join('; ')})`);
  check(problems.length === 0, `no page or console error (${problems.join('; ')})`);
  const leaked = urls.filter((u) => u.includes(ATC_TOKEN));
  check(leaked.length === 0, `the token is in no URL the page used (${urls.length} URLs)`);
  check(
    urls.every((u) => new URL(u).host === new URL(ATC_URL).host),
    'the page talked only to its own origin',
  );
} catch (e) {
  failed = true;
  console.error(`FAILED: ${e.stack ?? e}`);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
