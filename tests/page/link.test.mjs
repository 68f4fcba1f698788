// A remote session's link state in the page (tests/page.rs sets it up on the impd simulator):
// ATC_ASLEEP names a session whose host sleeps, ATC_AWAY one whose link dropped and keeps
// failing to come back. Each row says so, and so does the bar over its terminal. Forgetting the
// sleeping one takes the two-step confirmation, since it destroys the host.

import { ATC_TOKEN, check, run, shot, signIn } from './harness.mjs';

const { ATC_ASLEEP, ATC_AWAY } = process.env;
if (!ATC_ASLEEP || !ATC_AWAY) {
  console.error('ATC_ASLEEP and ATC_AWAY must be set (tests/page.rs sets them)');
  process.exit(2);
}

await run(async ({ page }) => {
  await page.goto(process.env.ATC_URL);
  await signIn(page, ATC_TOKEN);
  const away = `tr.session[data-id="${ATC_AWAY}"]`;
  const asleep = `tr.session[data-id="${ATC_ASLEEP}"]`;
  await page.waitForSelector(away);
  await page.waitForSelector(asleep);
  check((await page.textContent(`${away} .link`)) === 'attachment: reattaching', 'the dropped link shows on its row');
  check((await page.textContent(`${asleep} .link`)).includes('vm: asleep'), 'the sleeping host shows on its row');

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
