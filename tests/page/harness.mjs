// What both page scripts share: the environment tests/it/page.rs sets, Debian's Chromium with
// the flags that keep it off the network, checks that print as they pass, the API from the
// test's side, and a page that records CSP violations, page errors, notifications (the page's
// own and those shown through its service worker) and every URL it uses. `run` fails the
// script if any of those went wrong.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

export const { ATC_URL, ATC_TOKEN, ATC_SHOTS } = process.env;
if (!ATC_URL || !ATC_TOKEN || !ATC_SHOTS) {
  console.error('ATC_URL, ATC_TOKEN and ATC_SHOTS must be set (tests/it/page.rs sets them)');
  process.exit(2);
}
mkdirSync(ATC_SHOTS, { recursive: true });

export const WITHIN = 15000;
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

export function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
  console.log(`ok - ${what}`);
}

/** The daemon's API from the test's side (with the token, as a script would). */
export async function api(method, path, body) {
  const resp = await fetch(`${ATC_URL}${path}`, {
    method,
    headers: { Authorization: `Bearer ${ATC_TOKEN}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await resp.json().catch(() => null);
  if (!resp.ok) throw new Error(`${method} ${path}: ${resp.status} ${JSON.stringify(json)}`);
  return json;
}

/** Polls `fn` until it answers something truthy, within a deadline. */
export async function until(what, fn, within = WITHIN) {
  const deadline = Date.now() + within;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function shot(page, name) {
  const path = join(ATC_SHOTS, `${name}.png`);
  await page.screenshot({ path });
  console.log(`screenshot: ${path}`);
}

/** Enters `token` at the gate. */
export async function signIn(page, token) {
  await page.fill('#token', token);
  await page.click('#gate-form button[type=submit]');
}

/** A phone: 390×844 CSS pixels, touch, and a mobile viewport. */
export const PHONE = { viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true, deviceScaleFactor: 2 };

/** Whether the page is wider than its window (something overflows sideways). */
export async function overflow(page) {
  return page.evaluate(() => {
    const { scrollWidth, clientWidth } = document.documentElement;
    return scrollWidth > clientWidth ? `${scrollWidth} > ${clientWidth}` : '';
  });
}

/**
 * Runs `body({page, context, urls})` on a fresh page of the daemon (in a context made with
 * `options`, a desktop window by default), then checks that no CSP violation, page error or
 * unexpected console error happened and that the token was in no URL and no other origin was
 * reached. Exits the process: 0 if all passed.
 */
export async function run(body, options = { viewport: { width: 1400, height: 800 } }) {
  // Over HTTPS (page.rs runs one script so) the certificate is a test CA's made for the run:
  // Chromium is told to accept it, on the command line too, without which it refuses to
  // register a service worker from that origin. Node's own fetch trusts that CA through
  // NODE_EXTRA_CA_CERTS, which page.rs sets.
  const https = ATC_URL.startsWith('https:');
  const args = https ? [...FLAGS, '--ignore-certificate-errors'] : FLAGS;
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args });
  let failed = false;
  try {
    const context = await browser.newContext({ ...options, ignoreHTTPSErrors: https });
    const page = await context.newPage();
    page.setDefaultTimeout(WITHIN);
    const problems = [];
    const urls = [];
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    // Expected errors: the wrong token's 401, and the sockets and tickets a test cuts off.
    // 409: forgetting a session whose workspace holds work is refused before the page asks
    // again (page.test.mjs); the browser logs that answer as a failed load.
    // ERR_INTERNET_DISCONNECTED: a test that takes the browser offline (pwa.test.mjs).
    const expected = [
      /status of 401/,
      /status of 409/,
      /ERR_CONNECTION_REFUSED/,
      /ERR_INTERNET_DISCONNECTED/,
      /WebSocket connection/,
    ];
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
      // Absent outside a secure context.
      if (window.ServiceWorkerRegistration) {
        const show = ServiceWorkerRegistration.prototype.showNotification;
        ServiceWorkerRegistration.prototype.showNotification = function recorded(title, options) {
          window.__notes.push(title);
          return show.call(this, title, options);
        };
      }
    });
    await context.grantPermissions(['notifications'], { origin: ATC_URL });

    await body({ page, context, urls });

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
}
