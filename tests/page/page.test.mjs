// The daemon's browser page in Debian's headless Chromium, driven by Playwright. `tests/it/page.rs`
// starts the daemon and runs this with ATC_URL, ATC_TOKEN, ATC_SHOTS (the screenshot folder)
// ATC_BIN (the atc binary, for hook reports) and ATC_REPO (a git repository for a workspace) in
// the environment; any failed check exits
// non-zero with the reason.
//
// Cases: a wrong token shows a clear error; spawn from the button; type a command and see its
// output; resizing the window changes `stty size` in the session; a dropped socket shows the
// banner, then resumes with no line repeated; a session that starts waiting comes first with
// the needs-you badge, a desktop notification and its permission prompt, and can be watched
// read-only; kill, revive and
// forget from the buttons; a session in a workspace shows its branch, and forgetting it while it
// holds work asks again. Throughout (harness.mjs), no Content-Security-Policy violation, no page error,
// and the token in no URL.

import { existsSync, writeFileSync } from 'node:fs';
import { ATC_URL, ATC_TOKEN, api, check, run, shot, signIn, until } from './harness.mjs';

const { ATC_BIN, ATC_REPO } = process.env;
if (!ATC_BIN || !ATC_REPO) {
  console.error('ATC_BIN and ATC_REPO must be set (tests/it/page.rs sets them)');
  process.exit(2);
}

/** Whole terminal lines equal to `line`. */
const countLines = (text, line) => text.split('\n').filter((l) => l.trimEnd() === line).length;

await run(async ({ page, urls }) => {
  const first = await page.goto(ATC_URL);
  const headers = first.headers();
  check(headers['content-security-policy']?.includes("script-src 'self'"), 'the page has a strict CSP');
  check(headers['x-frame-options'] === 'DENY', 'X-Frame-Options: DENY');
  check(headers['x-content-type-options'] === 'nosniff', 'X-Content-Type-Options: nosniff');
  check(headers['referrer-policy'] === 'no-referrer', 'Referrer-Policy: no-referrer');

  // A wrong token: a clear error, and the gate stays.
  await signIn(page, 'this-is-not-the-token-of-this-daemon');
  await page.waitForSelector('#gate-error:not([hidden])');
  const refusal = await page.textContent('#gate-error');
  check(/refused the token/.test(refusal) && /token is wrong/.test(refusal), `a wrong token shows: ${refusal}`);
  check(await page.isHidden('#app'), 'nothing past the gate with a wrong token');
  await shot(page, 'wrong-token');

  // The right one.
  await signIn(page, ATC_TOKEN);
  await page.waitForSelector('#app:not([hidden])');
  check(
    (await page.evaluate(() => sessionStorage.getItem('atc.token'))) === ATC_TOKEN,
    'the token is kept in sessionStorage',
  );

  // Spawn from the button. The attach's ticket is held back until the typing below is done,
  // so the keys surely land before the socket is in.
  let typingDone;
  const typing = new Promise((r) => {
    typingDone = r;
  });
  const slowTicket = async (route) => {
    await typing;
    await route.continue();
  };
  await page.route('**/v1/tickets', slowTicket);
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
  // attribute the CSP has to allow). This types at once: keys typed while the first attach
  // connects are kept and sent when it is in.
  await page.click('#screen');
  await page.keyboard.type("echo hello-$((6*7)); printf '\\033[38;2;255;120;0mtrue-colour\\033[0m\\n'\n");
  check(!(await page.evaluate(() => window.atc.attached())), 'typed before the attach was in');
  typingDone();
  await page.waitForFunction(() => window.atc.terminalText().includes('hello-42'));
  await page.unroute('**/v1/tickets', slowTicket);
  const typed = await page.evaluate(() => window.atc.terminalText());
  check(countLines(typed, 'hello-42') === 1, 'typed a command in the terminal and saw its output');
  await page.waitForFunction(() => window.atc.terminalText().includes('\ntrue-colour'));
  await shot(page, 'fleet-and-terminal');
  // Emoji take two cells, as they do in the screen model (the Unicode 11 addon).
  check((await page.evaluate(() => window.atc.unicodeVersion())) === '11', 'Unicode 11 widths');

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
  // It is spawned from the dialog with the agent's model and effort options.
  await page.click('#spawn');
  await page.waitForSelector('#spawn-dialog[open]');
  await page.selectOption('#spawn-dialog select[name=agent]', 'claude');
  const efforts = await page.$$eval('#spawn-dialog [data-option=effort] select option', (os) => os.map((o) => o.value));
  check(efforts.includes('high') && efforts.includes('max'), `effort offers the agent's closed set (${efforts.join(' ')})`);
  const models = await page.$$eval('#model-list option', (os) => os.map((o) => o.value));
  check(models.includes('sonnet'), `model suggests the agent's examples (${models.join(' ')})`);
  await page.selectOption('#spawn-dialog [data-option=effort] select', 'high');
  await page.fill('#spawn-dialog input[name=model]', 'sonnet');
  await page.fill('#spawn-dialog input[name=cwd]', '/tmp');
  await page.fill('#spawn-dialog input[name=name]', 'page-hook');
  await page.click('#spawn-dialog button[type=submit]');
  const hookedRow = 'tr.session[data-name="page-hook"]';
  await page.waitForSelector(hookedRow);
  await page.waitForFunction(() => document.getElementById('terminal-title').textContent.startsWith('page-hook'));
  const hooked = { id: await page.evaluate(() => window.atc.attachedId()) };
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
  // Watch it: read-only, by `mode=watch`, and what is typed goes nowhere.
  await page.click(`${hookedRow} button[data-action=watch]`);
  await page.waitForFunction(() => document.getElementById('terminal-status').textContent.includes('read-only'));
  await until('the watch attach', async () =>
    urls.some((u) => u.includes(`/v1/sessions/${hooked.id}/attach`) && new URL(u).searchParams.get('mode') === 'watch'),
  );
  await page.click('#screen');
  await page.keyboard.type('echo typed-while-watching\n');
  // Absence: for a short window, nothing typed reaches the session.
  await new Promise((r) => setTimeout(r, 500));
  const watched = await api('GET', `/v1/sessions/${hooked.id}/screen`);
  check(!watched.text.includes('typed-while-watching'), 'watch opens read-only: typing reaches nothing');
  // Back to page-one's terminal.
  await page.click(`${row} td.name`);
  await page.waitForFunction((want) => window.atc.attachedId() === want, id);

  // Kill from the row's button: the row shows it exited, the terminal says why.
  await page.click(`${row} button[data-action=kill]`);
  await page.waitForSelector(`${row} .pill.state-exited`);
  await page.waitForFunction(() => /exited \(killed/.test(document.getElementById('terminal-status').textContent));
  check(true, 'kill from the button: the row shows exited, the terminal says killed');
  // Revive from the button: the open terminal attaches to the new process by itself.
  await page.click(`${row} button[data-action=revive]`);
  await page.waitForSelector(`${row} .pill.state-running`);
  await page.waitForFunction(() => document.getElementById('terminal-status').textContent === '');
  await page.waitForFunction(() => window.atc.attached());
  await page.click('#screen');
  await page.keyboard.type('echo revived-$((1+1))\n');
  await page.waitForFunction(() => window.atc.terminalText().includes('revived-2'));
  check(true, 'revive from the button: the terminal reattached and takes input again');
  await page.click(`${row} button[data-action=kill]`);
  await page.waitForSelector(`${row} .pill.state-exited`);
  // Forget asks first; accepted, the row goes.
  let asked = '';
  page.once('dialog', (d) => {
    asked = d.message();
    d.accept();
  });
  await page.click(`${row} button[data-action=forget]`);
  await page.waitForSelector(row, { state: 'detached' });
  check(/Forget session page-one/.test(asked), `forget asked first: "${asked}"`);

  // A session in a workspace shows its branch; forgetting it while it holds work asks again.
  const { session: ws } = await api('POST', '/v1/sessions', { agent: 'sh', cwd: ATC_REPO, name: 'in-ws', workspace: { path: ATC_REPO } });
  const wsRow = `#fleet tr[data-id="${ws.id}"]`;
  await page.waitForSelector(`${wsRow} .workspace`);
  const shown = await page.$eval(`${wsRow} .workspace`, (e) => e.textContent);
  check(shown === `⎇ ${ws.workspace.branch}`, `the row shows the workspace's branch: "${shown}"`);
  writeFileSync(`${ws.workspace.dir}/unsaved.txt`, 'work');
  await page.waitForFunction((sel) => document.querySelector(sel)?.textContent.endsWith(' +'), `${wsRow} .workspace`);
  check(true, 'a workspace holding changes not committed is marked +');
  const asks = [];
  page.on('dialog', (d) => {
    asks.push(d.message());
    d.accept();
  });
  await page.click(`${wsRow} button[data-action=forget]`);
  await page.waitForSelector(wsRow, { state: 'detached' });
  check(asks.length === 2 && /holds 1 uncommitted file/.test(asks[1]), `a dirty workspace asked again: ${JSON.stringify(asks)}`);
  check(!existsSync(ws.workspace.dir), 'accepted, the workspace went with the session');
});
