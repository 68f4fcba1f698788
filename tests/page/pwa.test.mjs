// The page as an installable app, at a desktop's 1280×800, in headless Chromium.
// tests/it/page.rs runs it with ATC_URL, ATC_TOKEN, ATC_SHOTS and ATC_BIN (for hook reports)
// against a daemon whose `claude` is a plain shell.
//
// Cases: the desktop layout (the table, no cards, no key bar) overflows nothing sideways, with
// and without a terminal open; the manifest is linked and the service worker registers for the
// whole origin, and Chromium finds the page installable; a session that starts needing you shows a notification through the worker
// while another tab is in front, and a tap on it opens the session; the worker keeps only the page's own files (no API answer, no
// token); offline, the page still loads from it and says the daemon is unreachable, and back
// online it carries on.

import { ATC_TOKEN, ATC_URL, api, check, overflow, run, shot, signIn, until } from './harness.mjs';

const { ATC_BIN } = process.env;
if (!ATC_BIN) {
  console.error('ATC_BIN must be set (tests/it/page.rs sets it)');
  process.exit(2);
}

await run(
  async ({ page, context }) => {
    await page.goto(ATC_URL);
    const manifest = await page.getAttribute('link[rel=manifest]', 'href');
    check(manifest === '/assets/manifest.webmanifest', `the page links its manifest (${manifest})`);
    const { scope, script } = await page.evaluate(async () => {
      const r = await navigator.serviceWorker.ready;
      return { scope: r.scope, script: r.active?.scriptURL };
    });
    check(scope === `${new URL(ATC_URL).origin}/` && script.endsWith('/assets/sw.js'), `the worker registered for ${scope}`);
    // What Chromium itself says of the manifest, and whether it would install the page.
    const cdp = await context.newCDPSession(page);
    const { errors } = await cdp.send('Page.getAppManifest');
    check(errors.length === 0, `Chromium reads the manifest without error (${JSON.stringify(errors)})`);
    // `in-incognito` is the test's browser context (Playwright's are), not the page.
    const { installabilityErrors } = await cdp.send('Page.getInstallabilityErrors');
    const blocking = installabilityErrors.filter((e) => e.errorId !== 'in-incognito');
    check(blocking.length === 0, `Chromium would install the page (${JSON.stringify(installabilityErrors)})`);
    await cdp.detach();

    await signIn(page, ATC_TOKEN);
    await page.waitForSelector('#app:not([hidden])');
    const { session: sh } = await api('POST', '/v1/sessions', { agent: 'sh', cwd: '/tmp', name: 'desk-sh' });
    const row = `#fleet tr.session[data-id="${sh.id}"]`;
    await page.waitForSelector(row);
    check(await page.isHidden('#cards'), 'at desktop width the fleet is the table, not cards');
    check((await overflow(page)) === '', `the list fits 1280 (${await overflow(page)})`);
    await page.click(`${row} td.name`);
    await page.waitForFunction((id) => window.atc.attachedId() === id && window.atc.attached(), sh.id);
    check(await page.isVisible('#fleet-pane'), 'the terminal opens beside the list');
    check(await page.isHidden('#keybar') && (await page.isHidden('#terminal-back')), 'with no key bar or Back');
    await page.click('#screen');
    await page.keyboard.type('echo desk-$((4*4))\n');
    await page.waitForFunction(() => window.atc.terminalText().includes('desk-16'));
    check((await overflow(page)) === '', `list and terminal fit 1280 (${await overflow(page)})`);
    await shot(page, 'desktop');

    // Another tab in front; the page with the fleet behind it. A session starts needing you.
    const other = await context.newPage();
    await other.goto(ATC_URL);
    await other.bringToFront();
    const { session: hooked } = await api('POST', '/v1/sessions', { agent: 'claude', cwd: '/tmp', name: 'desk-hook' });
    await page.waitForSelector(`#fleet tr.session[data-id="${hooked.id}"]`);
    const report = JSON.stringify({ hook_event_name: 'Notification', message: 'Allow rm?' });
    await api('POST', `/v1/sessions/${hooked.id}/submit`, { text: `printf '%s' '${report}' | ${ATC_BIN} hook-report` });
    // getNotifications lists only what was shown through the worker's registration.
    const shown = await until('a notification through the service worker', () =>
      other.evaluate(async () => {
        const r = await navigator.serviceWorker.ready;
        const notes = await r.getNotifications();
        return notes.map((n) => ({ title: n.title, body: n.body, session: n.data?.session }))[0];
      }),
    );
    check(
      shown.title === 'desk-hook needs you' && shown.session === hooked.id && shown.body === 'Allow rm?',
      `the worker shows it while another tab is in front: ${JSON.stringify(shown)}`,
    );
    // A tap on it (played in the worker, as the browser would dispatch it) opens the session
    // in the page that follows the fleet.
    const [worker] = context.serviceWorkers();
    await worker.evaluate(async () => {
      const [n] = await self.registration.getNotifications();
      self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n }));
    });
    await page.waitForFunction((id) => window.atc.attachedId() === id, hooked.id);
    check(true, 'a tap on the notification opened the session in the page');
    await other.close();

    // What the worker keeps: the page's own files, with no token and no API answer.
    const kept = await page.evaluate(async (token) => {
      const out = [];
      for (const name of await caches.keys()) {
        const cache = await caches.open(name);
        for (const request of await cache.keys()) {
          const body = await (await cache.match(request)).text();
          out.push({ url: request.url, auth: request.headers.has('Authorization'), token: body.includes(token) || request.url.includes(token) });
        }
      }
      return out;
    }, ATC_TOKEN);
    const paths = kept.map((k) => new URL(k.url).pathname);
    check(paths.includes('/') && paths.includes('/assets/js/main.js') && paths.includes('/assets/vendor/xterm/xterm.mjs'), `the worker keeps the shell (${kept.length} files)`);
    const strays = paths.filter((p) => p !== '/' && !p.startsWith('/assets/'));
    check(strays.length === 0, `and nothing else (${strays.join(' ')})`);
    check(kept.every((k) => !k.auth && !k.token), 'no kept request or answer holds the token');

    // Offline: the page loads from the worker and says the daemon is unreachable.
    await context.setOffline(true);
    const reach = await worker.evaluate(() => fetch('/assets/page.css', { cache: 'no-store' }).then(() => 'reached', () => 'unreachable'));
    check(reach === 'unreachable', `offline, the worker itself cannot reach the daemon (${reach})`);
    await page.reload();
    await page.waitForSelector('#gate[data-state=unreachable]');
    const said = await page.textContent('#gate-error');
    check(/could not be reached/.test(said), `offline, the page loads and says: ${said}`);
    check(await page.evaluate(() => !!navigator.serviceWorker.controller), 'from the service worker');
    check(await page.isHidden('#app'), 'and shows no fleet');
    await shot(page, 'offline');
    // Online again, it signs in with the token it kept.
    await context.setOffline(false);
    await page.waitForSelector('#app:not([hidden])');
    await page.waitForSelector(`#fleet tr.session[data-id="${hooked.id}"]`);
    check(true, 'back online, the fleet is back');
  },
  { viewport: { width: 1280, height: 800 } },
);
