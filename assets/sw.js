// The page's service worker. It keeps the page's own files (the shell) so the page opens
// without the daemon and says it is unreachable, and it shows the needs-you notifications the
// page asks for (registration.showNotification), so they appear while the page is in another
// tab or in the background. It never touches the API: a `/v1/` request, or any request that
// carries a token, goes straight to the network and nothing of it is kept.
//
// Served from /assets/ with `Service-Worker-Allowed: /` (src/server/page.rs) and registered
// with scope `/`, so it also answers for the page itself at `/`.

const CACHE = 'atc-shell-v1';

/** The shell: the page and every file it loads. page.rs's tests check this list. */
const SHELL = [
  '/',
  '/assets/page.css',
  '/assets/manifest.webmanifest',
  '/assets/icons/icon.svg',
  '/assets/icons/icon-192.png',
  '/assets/icons/icon-512.png',
  '/assets/js/main.js',
  '/assets/js/api.js',
  '/assets/js/fleet.js',
  '/assets/js/cards.js',
  '/assets/js/keys.js',
  '/assets/js/notify.js',
  '/assets/js/terminal.js',
  '/assets/js/spawn.js',
  '/assets/js/permissions.js',
  '/assets/vendor/xterm/xterm.mjs',
  '/assets/vendor/xterm/xterm.css',
  '/assets/vendor/addon-fit/addon-fit.mjs',
  '/assets/vendor/addon-web-links/addon-web-links.mjs',
  '/assets/vendor/addon-unicode11/addon-unicode11.mjs',
];

self.addEventListener('install', (event) => {
  // `reload`: a new daemon binary may bring new files under the same names.
  event.waitUntil(
    caches
      .open(CACHE)
      .then((cache) => cache.addAll(SHELL.map((url) => new Request(url, { cache: 'reload' }))))
      .then(() => self.skipWaiting()),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(
    caches.keys().then((names) => Promise.all(names.filter((n) => n !== CACHE).map((n) => caches.delete(n)))),
  );
});

/** Whether the worker may answer `request`: a GET of the shell, with no credentials. */
function isShell(request) {
  if (request.method !== 'GET' || request.headers.has('Authorization')) return false;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin || url.search) return false;
  return url.pathname === '/' || (url.pathname.startsWith('/assets/') && url.pathname !== '/assets/sw.js');
}

self.addEventListener('fetch', (event) => {
  // Not answered here: the browser sends it as if there were no worker.
  if (!isShell(event.request)) return;
  event.respondWith(networkFirst(event.request));
});

/**
 * The daemon's copy when it answers (kept for next time), else the kept copy. Kept under the
 * bare URL, so no header of the request is stored.
 */
async function networkFirst(request) {
  const key = new URL(request.url).pathname;
  const cache = await caches.open(CACHE);
  try {
    const response = await fetch(request);
    if (response.ok) await cache.put(key, response.clone());
    return response;
  } catch (e) {
    const kept = await cache.match(key);
    if (kept) return kept;
    throw e;
  }
}

// A tap on a needs-you notification: bring the page used last forward, and have the pages open
// the session (those signed in do; the worker cannot tell which are). No page open: open one.
self.addEventListener('notificationclick', (event) => {
  event.notification.close();
  const session = event.notification.data?.session;
  event.waitUntil(
    (async () => {
      // Most recently focused first.
      const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
      if (windows.length === 0) return self.clients.openWindow('/');
      for (const w of windows) w.postMessage({ type: 'open', session });
      try {
        await windows[0].focus();
      } catch {
        // Focusing needs the tap's user activation, which a browser may not grant.
      }
      return undefined;
    })(),
  );
});
