// A remote session's link state in the page (tests/it/page.rs sets it up on the impd simulator):
// ATC_ASLEEP names a session whose host sleeps, ATC_AWAY one whose link dropped and keeps
// failing to come back. Each row says so, and so does the bar over its terminal. Forgetting the
// sleeping one takes the two-step confirmation, since it destroys the host. And a respondable
// permission request gets Allow and Deny.

import { ATC_TOKEN, check, run, shot, signIn, until } from './harness.mjs';

const { ATC_ASLEEP, ATC_AWAY } = process.env;
if (!ATC_ASLEEP || !ATC_AWAY) {
  console.error('ATC_ASLEEP and ATC_AWAY must be set (tests/it/page.rs sets them)');
  process.exit(2);
}

await run(async ({ page }) => {
  // The daemon has no respondable permission source yet, so the test plays one: it adds a
  // respondable request to the events socket (otherwise passed through) and answers its POST.
  let events = null;
  await page.routeWebSocket(/\/v1\/events/, (ws) => {
    ws.connectToServer();
    events = ws;
  });
  let decided = null;
  await page.route('**/v1/permissions/p-test', async (route) => {
    decided = route.request().postDataJSON();
    await route.fulfill({ status: 200, contentType: 'application/json', body: '{}' });
  });
  await page.goto(process.env.ATC_URL);
  await signIn(page, ATC_TOKEN);
  const away = `tr.session[data-id="${ATC_AWAY}"]`;
  const asleep = `tr.session[data-id="${ATC_ASLEEP}"]`;
  await page.waitForSelector(away);
  await page.waitForSelector(asleep);
  check((await page.textContent(`${away} .link`)) === 'attachment: reattaching', 'the dropped link shows on its row');
  check((await page.textContent(`${asleep} .link`)).includes('vm: asleep'), 'the sleeping host shows on its row');

  await until('the events socket', async () => events);
  events.send(
    JSON.stringify({ type: 'permission.requested', request: 'p-test', s: ATC_AWAY, message: 'Run make?', respondable: true }),
  );
  await page.waitForSelector('#permissions .permission[data-request="p-test"] button[data-decision=allow]');
  check((await page.textContent('#permissions')).includes('Run make?'), 'a respondable request shows Allow and Deny');
  await page.click('#permissions button[data-decision=allow]');
  await page.waitForSelector('#permissions .permission[data-request="p-test"]', { state: 'detached' });
  check(decided?.decision === 'allow', `Allow sent {decision: allow} (${JSON.stringify(decided)})`);

  await page.click(`${away} td.name`);
  await page.waitForSelector('#terminal-link:not([hidden])');
  check(
    (await page.textContent('#terminal-link')) === 'attachment: reattaching',
    'and over its terminal',
  );
  await shot(page, 'link-reattaching');
  await page.click(`${asleep} td.name`);
  await page.waitForFunction(() => document.getElementById('terminal-link').textContent.includes('vm: asleep'));
  check(true, 'a sleeping host shows over its terminal too');
  await shot(page, 'link-asleep');

  // Forgetting it destroys its host: the page asks, the daemon asks again with a token, the
  // page asks again, and only then is it gone.
  const asked = [];
  page.on('dialog', (d) => {
    asked.push(d.message());
    d.accept();
  });
  await page.click(`${asleep} button[data-action=forget]`);
  await page.waitForSelector(asleep, { state: 'detached' });
  check(asked.length === 2 && /destroys/.test(asked[1]), `forget asked twice: ${asked.join(' / ')}`);
});
