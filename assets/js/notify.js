// The service worker (sw.js) and what goes through it: it is registered for the whole origin
// as the page loads (before the token gate, so the page's files are kept even for a page that
// never signs in), and a session that starts needing you is shown through it
// (registration.showNotification), which a phone and a background tab display where a page's
// own `new Notification` may not. A tap on one comes back as a message naming the session.

const WORKER = '/assets/sw.js';

/** Registers the worker; `onOpen(sessionId)` runs when a tap on a notification asks for one. */
export function registerWorker(onOpen) {
  // Absent outside a secure context (a plain http:// address that is not loopback).
  if (!('serviceWorker' in navigator)) return;
  navigator.serviceWorker.addEventListener('message', (e) => {
    if (e.data?.type === 'open' && typeof e.data.session === 'string') onOpen(e.data.session);
  });
  navigator.serviceWorker.register(WORKER, { scope: '/' }).catch(() => {
    // Without it the page works as before: online only, notifications from the page itself.
  });
}

/** The active worker's registration, or null. */
async function activeRegistration() {
  if (!('serviceWorker' in navigator)) return null;
  try {
    const registration = await navigator.serviceWorker.getRegistration('/');
    return registration?.active ? registration : null;
  } catch {
    return null;
  }
}

/** Says that session `s` needs you, if the user allowed notifications. */
export async function notifyWaiting(s, onOpen) {
  if (!('Notification' in window) || Notification.permission !== 'granted') return;
  const title = `${s.name} needs you`;
  // One per session: a second tab, or the same session again, replaces it.
  const options = { body: s.lastMsg || s.agent, tag: `atc-${s.id}`, icon: '/assets/icons/icon-192.png', data: { session: s.id } };
  const registration = await activeRegistration();
  if (registration) {
    try {
      await registration.showNotification(title, options);
      return;
    } catch {
      // Fall through to the page's own notification.
    }
  }
  const n = new Notification(title, options);
  n.onclick = () => {
    window.focus();
    onOpen(s.id);
  };
}
