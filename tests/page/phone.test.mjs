// The page on a phone (390×844, touch) in headless Chromium. tests/it/page.rs runs it with
// ATC_URL, ATC_TOKEN, ATC_SHOTS, ATC_BIN (for hook reports) and a daemon whose `claude` is a
// plain shell and whose `bash` is bash without its rc files.
//
// Cases: nothing overflows sideways, at the gate, in the list and in the terminal; the fleet
// is cards (name, agent, state, branch, memory) with needs-you first; a respondable permission
// is allowed from its card; a session that needs you gets a reply from its card, which reaches
// it as a line; a tap opens the terminal full-screen, and its key bar types Enter, an arrow
// (bash's history, and SS3 in application cursor mode), Tab (bash's completion), Esc and
// Ctrl-C (sticky, then the keyboard's c);
// Back, and the phone's own back, return to the list.

import { ATC_TOKEN, PHONE, api, check, overflow, run, shot, signIn, until } from './harness.mjs';

const { ATC_BIN } = process.env;
if (!ATC_BIN) {
  console.error('ATC_BIN must be set (tests/it/page.rs sets it)');
  process.exit(2);
}

/** Whole terminal lines equal to `line`. */
const countLines = (text, line) => text.split('\n').filter((l) => l.trimEnd() === line).length;

await run(async ({ page }) => {
  await page.goto(process.env.ATC_URL);
  check((await overflow(page)) === '', `the gate fits the phone (${await overflow(page)})`);
  // What each key sends (keys.js's pure part), in the page's own browser.
  const sent = await page.evaluate(async () => {
    const { sequence, withCtrl } = await import('/assets/js/keys.js');
    return {
      plain: ['esc', 'tab', 'enter', 'up', 'down', 'right', 'left'].map((k) => sequence(k)),
      application: sequence('up', { application: true }),
      ctrlArrow: sequence('left', { ctrl: true, application: true }),
      ctrl: ['c', 'C', 'd', '[', '?', ' ', '@', '1', 'ab', 'é'].map(withCtrl),
      unknown: sequence('f13'),
    };
  });
  const expectSent = {
    plain: ['\x1b', '\t', '\r', '\x1b[A', '\x1b[B', '\x1b[C', '\x1b[D'],
    application: '\x1bOA',
    ctrlArrow: '\x1b[1;5D',
    ctrl: ['\x03', '\x03', '\x04', '\x1b', '\x7f', '\x00', '\x00', '1', 'ab', 'é'],
    unknown: '',
  };
  check(JSON.stringify(sent) === JSON.stringify(expectSent), `the key bar's bytes: ${JSON.stringify(sent)}`);
  await signIn(page, ATC_TOKEN);
  await page.waitForSelector('#app:not([hidden])');

  const { session: bash } = await api('POST', '/v1/sessions', { agent: 'bash', cwd: '/tmp', name: 'phone-bash' });
  const { session: hooked } = await api('POST', '/v1/sessions', { agent: 'claude', cwd: '/tmp', name: 'phone-hook' });
  const bashCard = `#cards li.card[data-id="${bash.id}"]`;
  const hookCard = `#cards li.card[data-id="${hooked.id}"]`;
  await page.waitForSelector(bashCard);
  await page.waitForSelector(hookCard);
  check(await page.isHidden('#fleet'), 'on a phone the table is not shown');
  const card = await page.textContent(bashCard);
  check(card.includes('phone-bash') && card.includes('bash') && card.includes('running'), `a card: ${card}`);
  await until('the memory on the card', async () => /\d(\.\d)?[BKMG]/.test(await page.textContent(`${bashCard} .memory`)));
  check(true, `the card shows memory (${await page.textContent(`${bashCard} .memory`)})`);

  // A session that needs you comes first, and is answered from its card.
  const report = JSON.stringify({ hook_event_name: 'Notification', message: 'Allow rm?' });
  await api('POST', `/v1/sessions/${hooked.id}/submit`, { text: `printf '%s' '${report}' | ${ATC_BIN} hook-report` });
  await page.waitForSelector(`${hookCard}.state-needs_you`);
  check(
    (await page.getAttribute('#cards li.card:first-child', 'data-id')) === hooked.id,
    'the session that needs you is the first card',
  );
  check((await page.textContent(hookCard)).includes('Allow rm?'), 'its card says what it asks');
  await page.tap(`${hookCard} input[name=reply]`);
  const fontSize = await page.$eval(`${hookCard} input[name=reply]`, (e) => parseFloat(getComputedStyle(e).fontSize));
  check(fontSize >= 16, `the reply box's text is ${fontSize}px (iOS zooms below 16)`);
  await page.keyboard.type('echo replied-$((40+2))');
  check((await overflow(page)) === '', `the list fits the phone (${await overflow(page)})`);
  await shot(page, 'phone-fleet');
  await page.tap(`${hookCard} form.reply button[type=submit]`);
  await until('the reply to run in the session', async () => {
    const screen = await api('GET', `/v1/sessions/${hooked.id}/screen`);
    return countLines(screen.text, 'replied-42') === 1;
  });
  check(await page.evaluate(() => window.atc.attachedId() === null), 'replied from the card, without opening the terminal');
  await until('the reply box to clear', async () => (await page.inputValue(`${hookCard} input[name=reply]`)) === '');
  check(true, 'the reply box is cleared once sent');

  // The spawn dialog fits too.
  await page.tap('#spawn');
  await page.waitForSelector('#spawn-dialog[open]');
  const dialog = await page.$eval('#spawn-dialog', (e) => e.getBoundingClientRect().toJSON());
  check(dialog.left >= 0 && dialog.right <= 390, `the spawn dialog fits the phone (${dialog.left}..${dialog.right})`);
  check((await overflow(page)) === '', `and nothing overflows with it open (${await overflow(page)})`);
  await page.tap('#spawn-dialog button[data-action=cancel]');
  await page.waitForSelector('#spawn-dialog[open]', { state: 'detached' });

  // A tap opens the terminal full-screen with the key bar.
  await page.tap(`${bashCard} .name`);
  await page.waitForFunction((id) => window.atc.attachedId() === id && window.atc.attached(), bash.id);
  check(await page.isHidden('#fleet-pane'), 'the terminal covers the list');
  check(await page.isHidden('header'), 'and the header');
  const box = await page.$eval('#terminal-pane', (e) => e.getBoundingClientRect().toJSON());
  check(box.width === 390 && box.height >= 800, `the terminal takes the screen (${box.width}×${box.height})`);
  check(await page.isVisible('#keybar'), 'the key bar is under it');
  check(await page.isVisible('#terminal-back'), 'Back is over it');
  const keyHeight = await page.$eval('#keybar button', (e) => e.getBoundingClientRect().height);
  check(keyHeight >= 40, `keys are big enough to tap (${keyHeight}px)`);

  const text = () => page.evaluate(() => window.atc.terminalText());
  const key = (name) => page.tap(`#keybar button[data-key=${name}]`);
  // Enter from the bar.
  await page.keyboard.type('echo key-$((2+3))');
  await key('enter');
  await until('the echo', async () => countLines(await text(), 'key-5') === 1);
  check(true, 'typed a command and ran it with the bar\'s ⏎');
  // Up: bash's history brings the command back.
  await key('up');
  await key('enter');
  await until('the command again', async () => countLines(await text(), 'key-5') === 2);
  check(true, '↑ brought the command back from the history');
  // Tab: bash completes a command name.
  await page.keyboard.type('printf tab-%s\\\\n $((3*3)); ech');
  await key('tab');
  await page.keyboard.type(' tabbed');
  await key('enter');
  await until('the completed command', async () => countLines(await text(), 'tabbed') === 1);
  check(countLines(await text(), 'tab-9') === 1, 'Tab completed ech to echo');
  // Ctrl is sticky: armed by the bar, it changes the keyboard's next key (c → Ctrl-C).
  await page.keyboard.type('sleep 300');
  await key('enter');
  await key('ctrl');
  check(await page.evaluate(() => window.atc.ctrlArmed()), 'Ctrl is armed');
  check((await page.getAttribute('#keybar button[data-key=ctrl]', 'aria-pressed')) === 'true', 'and shows it');
  await page.keyboard.type('c');
  check(!(await page.evaluate(() => window.atc.ctrlArmed())), 'one key later it is not');
  await page.keyboard.type('echo after-$((1+1))');
  await key('enter');
  await until('the shell back from sleep', async () => countLines(await text(), 'after-2') === 1);
  check(true, 'Ctrl then c interrupted sleep 300');
  // Esc, and an arrow once the program asks for application cursor keys (DECCKM, as a TUI
  // does): `cat -v` shows what arrives.
  await page.keyboard.type("printf '\\033[?1h'; cat -v");
  await key('enter');
  await key('esc');
  await page.keyboard.type('x');
  await key('up');
  await key('enter');
  await until('cat -v to show the keys', async () => (await text()).split('\n').some((l) => l.trimEnd() === '^[x^[OA'));
  check(true, 'Esc arrived as ESC, and ↑ as SS3 A in application mode (cat -v shows ^[x^[OA)');
  await key('ctrl');
  await page.keyboard.type('d');
  check((await overflow(page)) === '', `the terminal fits the phone (${await overflow(page)})`);
  await shot(page, 'phone-terminal');

  // Back returns to the list; so does the phone's own back.
  await page.tap('#terminal-back');
  await page.waitForSelector('#fleet-pane:not([hidden])', { state: 'visible' });
  await page.waitForFunction(() => window.atc.attachedId() === null);
  check(await page.isHidden('#terminal-pane'), 'Back returned to the list');
  await page.tap(`${hookCard} .name`);
  await page.waitForFunction((id) => window.atc.attachedId() === id, hooked.id);
  await page.evaluate(() => history.back());
  await page.waitForFunction(() => window.atc.attachedId() === null);
  check(await page.isVisible(hookCard), "the phone's back returned to the list too");
  check((await overflow(page)) === '', `the list still fits (${await overflow(page)})`);

  // A respondable permission request on a card: Allow sends {decision: allow}. The test plays a respondable permission
  // source (the daemon has none yet), as link.test.mjs does: one event added to the events
  // socket, and its POST answered here. Routed last, on a new events socket (signed out and in
  // again): Playwright's socket routing throws in the page when a routed page closes a socket
  // the server still writes to, as closing a terminal does, where a browser drops the bytes.
  let events = null;
  await page.routeWebSocket(/\/v1\/events/, (ws) => {
    ws.connectToServer();
    events = ws;
  });
  let decided = null;
  await page.route('**/v1/permissions/p-phone', async (route) => {
    decided = route.request().postDataJSON();
    await route.fulfill({ status: 200, contentType: 'application/json', body: '{}' });
  });

  await page.tap('#sign-out');
  // The page's list of pending requests replaces what it knew when it comes: the played
  // request (which the daemon does not hold) goes in after it.
  const listed = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/permissions');
  await signIn(page, ATC_TOKEN);
  await listed;
  await page.waitForSelector(bashCard);
  await until('the events socket', async () => events);
  // Sent again until it shows (the same request each time), in case the list still landed
  // after it.
  const requested = JSON.stringify({ type: 'permission.requested', request: 'p-phone', s: bash.id, message: 'Run make?', respondable: true });
  await until('the request on its card', async () => {
    events.send(requested);
    return page.$(`${bashCard} .ask[data-request="p-phone"] button[data-decision=allow]`);
  });
  check((await page.textContent(`${bashCard} .ask`)).includes('Run make?'), 'the permission request is on its card');
  check(await page.isHidden('#permissions'), 'and not in a strip over the cards');
  check((await overflow(page)) === '', `the list with a request fits the phone (${await overflow(page)})`);
  await shot(page, 'phone-permission');
  await page.tap(`${bashCard} button[data-decision=allow]`);
  await page.waitForSelector(`${bashCard} .ask[data-request="p-phone"]`, { state: 'detached' });
  check(decided?.decision === 'allow', `Allow on the card sent {decision: allow} (${JSON.stringify(decided)})`);
  check(await page.evaluate(() => window.atc.attachedId() === null), 'answering did not open the terminal');
}, PHONE);
