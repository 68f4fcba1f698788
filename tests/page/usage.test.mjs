// What sessions use, in the page (tests/it/page.rs sets up ATC_RUNNING, a running session, and
// ATC_KILLED, an exited one). The daemon under test may have no cgroups to read usage from, so
// the test plays the figures: it answers the page's GET /v1/sessions with the daemon's own
// list plus usage and a limit for ATC_RUNNING, and tells the events socket (otherwise passed
// through) that ATC_KILLED ended at its memory limit. The running row shows its memory against
// its limit, and keeps it across a change of state that carries no figures; the killed row says
// why it ended.

import { ATC_TOKEN, api, check, run, shot, signIn } from './harness.mjs';

const { ATC_RUNNING, ATC_KILLED } = process.env;
if (!ATC_RUNNING || !ATC_KILLED) {
  console.error('ATC_RUNNING and ATC_KILLED must be set (tests/it/page.rs sets them)');
  process.exit(2);
}

const MIB = 1024 * 1024;

await run(async ({ page }) => {
  let events = null;
  await page.routeWebSocket(/\/v1\/events/, (ws) => {
    ws.connectToServer();
    events = ws;
  });
  let asked = 0;
  await page.route('**/v1/sessions', async (route) => {
    if (route.request().method() !== 'GET') return route.continue();
    const answer = await (await route.fetch()).json();
    for (const s of answer.sessions) {
      if (s.id !== ATC_RUNNING) continue;
      s.usage = { memoryBytes: 312 * MIB, memoryPeakBytes: 400 * MIB, cpuSeconds: 1.5, pids: 2 };
      s.limits = { memoryMiB: 512 };
    }
    asked += 1;
    await route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(answer) });
  });
  await page.goto(process.env.ATC_URL);
  await signIn(page, ATC_TOKEN);
  const running = `tr.session[data-id="${ATC_RUNNING}"]`;
  const killed = `tr.session[data-id="${ATC_KILLED}"]`;
  await page.waitForSelector(running);
  await page.waitForSelector(killed);
  check((await page.textContent('#fleet thead')).includes('mem'), 'the list has a memory column');

  await page.waitForFunction(
    (row) => document.querySelector(`${row} td.memory`)?.textContent === '312M/512M',
    running,
  );
  check(asked > 0, 'the page asked the list for usage');
  check(
    (await page.getAttribute(`${running} td.memory`, 'title')).includes('peak 400M'),
    'a running session shows its memory against its limit, with its peak in the title',
  );
  check((await page.textContent(`${killed} td.memory`)) === '-', 'an exited session shows no figure');

  // A change of state without figures keeps the last ones while the session runs (its limits
  // come with it, as they do with every descriptor of a limited session). Events are applied
  // in order, so once the second one shows, the first was taken too.
  const { session: plain } = await api('GET', `/v1/sessions/${ATC_RUNNING}`);
  events.send(JSON.stringify({ type: 'session.state', session: { ...plain, usage: undefined, limits: { memoryMiB: 512 } } }));
  const { session: ended } = await api('GET', `/v1/sessions/${ATC_KILLED}`);
  check(ended.alive === false, 'the killed session has ended');
  events.send(JSON.stringify({ type: 'session.state', session: { ...ended, exitReason: 'memory_limit' } }));
  await page.waitForSelector(`${killed} .reason`);
  check(
    (await page.textContent(`${killed} .reason`)) === 'memory limit',
    'a session killed at its memory limit says so under its state',
  );
  check(
    (await page.textContent(`${running} td.memory`)) === '312M/512M',
    'a state event without figures keeps the last ones',
  );
  check((await page.$(`${running} .reason`)) === null, 'a running session gives no reason');
  await shot(page, 'usage');
});
