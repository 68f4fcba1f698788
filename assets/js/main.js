// Wires the page together: the token gate (asked once, kept in sessionStorage), then the
// fleet list (a table, or cards on a phone), the terminal and its key bar, the spawn dialog
// and the permission prompts, each built once. A refused token stops them and brings the gate
// back with the daemon's reason; a daemon that does not answer brings it back saying so. The
// service worker is registered first of all, so the page's files are kept for offline use.

import { call, hasToken, setToken, forgetToken, ApiError } from './api.js';
import { Fleet } from './fleet.js';
import { TerminalView } from './terminal.js';
import { SpawnDialog } from './spawn.js';
import { Permissions } from './permissions.js';
import { Cards } from './cards.js';
import { KeyBar } from './keys.js';
import { registerWorker } from './notify.js';

const $ = (id) => document.getElementById(id);

/** The phone layout (page.css switches at the same width): cards, a full-screen terminal. */
const PHONE = window.matchMedia('(max-width: 720px)');

/** The page's parts, built on the first accepted token. */
let parts = null;

function showGate(message, { unreachable = false } = {}) {
  parts?.fleet.stop();
  parts?.terminal.close();
  $('app').hidden = true;
  $('gate').hidden = false;
  $('gate').dataset.state = unreachable ? 'unreachable' : 'token';
  const error = $('gate-error');
  error.textContent = message ?? '';
  error.hidden = !message;
  $('token').value = '';
  $('token').focus();
}

function onUnauthorized(e) {
  forgetToken();
  showGate(`The daemon refused the token: ${e.message}`);
}

function flash(text) {
  const line = $('notice');
  line.textContent = text;
  line.hidden = !text;
  clearTimeout(flash.timer);
  if (text) flash.timer = setTimeout(() => flash(''), 8000);
}

function build() {
  const keys = new KeyBar($('keybar'), {
    send: (data) => terminal.typed(data),
    applicationCursor: () => terminal.applicationCursor,
    focus: () => terminal.term?.focus(),
  });
  const terminal = new TerminalView(
    {
      pane: $('terminal-pane'),
      screen: $('screen'),
      title: $('terminal-title'),
      banner: $('banner'),
      link: $('terminal-link'),
      status: $('terminal-status'),
      closeButton: $('terminal-close'),
    },
    {
      onUnauthorized,
      transform: (data) => keys.transform(data),
      onOpened: () => {
        document.body.classList.add('terminal-open');
        // On a phone the terminal covers the list: the phone's Back comes back to it.
        if (PHONE.matches && !history.state?.atcTerminal) history.pushState({ atcTerminal: true }, '');
      },
      onClosed: () => {
        document.body.classList.remove('terminal-open');
        keys.setCtrl(false);
        fleet.select(null);
      },
    },
  );
  $('terminal-back').addEventListener('click', () => {
    if (history.state?.atcTerminal) history.back();
    else terminal.close();
  });
  window.addEventListener('popstate', () => {
    if (terminal.session && !history.state?.atcTerminal) terminal.close();
  });
  const open = (id, { watch = false } = {}) => {
    const session = fleet.get(id);
    if (!session) return;
    // Already showing it, live and in this mode: nothing to redo.
    if (terminal.sessionId === id && terminal.watch === watch && !terminal.ended) return terminal.term?.focus();
    fleet.select(id);
    terminal.open(session, { watch });
  };
  const permissions = new Permissions($('permissions'), {
    nameOf: (id) => fleet.get(id)?.name ?? id,
    onOpen: (id) => open(id),
    onUnauthorized,
    onError: flash,
    onChange: (pending) => cards.asks(pending),
  });
  const cards = new Cards($('cards'), {
    onOpen: (id) => open(id),
    respond: (request, decision) => permissions.respond(request, decision),
    submit: async (id, text) => {
      try {
        await call('POST', `/v1/sessions/${encodeURIComponent(id)}/submit`, { text });
        return true;
      } catch (e) {
        if (e instanceof ApiError && e.unauthorized) onUnauthorized(e);
        else flash(`reply to ${fleet.get(id)?.name ?? id}: ${e.message}`);
        return false;
      }
    },
    branch: (s) => fleet.branch(s),
    nameOf: (id) => fleet.get(id)?.name ?? id,
  });
  const fleet = new Fleet(
    {
      table: $('fleet'),
      stateFilter: $('filter-state'),
      targetFilter: $('filter-target'),
      badge: $('needs-you'),
      status: $('fleet-status'),
    },
    {
      onOpen: open,
      onChange: (s) => {
        if (terminal.sessionId !== s.id) return;
        terminal.describe(s);
        // Revived while its terminal showed the end: attach to the new process.
        if (terminal.ended && s.alive) terminal.open(s, { watch: terminal.watch });
      },
      onGone: (id) => {
        if (terminal.sessionId === id) terminal.close();
      },
      onPermission: (event) => permissions.apply(event),
      onUnauthorized,
      onError: flash,
      onRender: (shown, total) => cards.sessions(shown, total),
    },
  );
  const spawn = new SpawnDialog($('spawn-dialog'), {
    onSpawned: (session, warnings) => {
      if (warnings.length) flash(warnings.map((w) => w.message ?? String(w)).join('; '));
      // The events socket may not have brought it yet.
      if (!fleet.get(session.id)) fleet.apply({ type: 'session.added', session });
      open(session.id);
    },
    onUnauthorized,
    size: () => ({ cols: terminal.term?.cols ?? 100, rows: terminal.term?.rows ?? 30 }),
  });
  $('spawn').addEventListener('click', () => spawn.open());
  $('sign-out').addEventListener('click', () => {
    forgetToken();
    showGate('');
  });
  setupNotifications();
  // Hooks for tests and the browser console; they carry no secret.
  window.atc = {
    terminalText: () => terminal.text(),
    dropConnection: () => terminal.dropConnection(),
    attachedId: () => terminal.sessionId,
    attached: () => terminal.attached,
    size: () => ({ cols: terminal.term?.cols, rows: terminal.term?.rows }),
    unicodeVersion: () => terminal.term?.unicode.activeVersion,
    ctrlArmed: () => keys.ctrl,
  };
  return { fleet, terminal, permissions, open };
}

/** While the daemon cannot be reached and a token is kept: the next try. */
let retryTimer = null;
const RETRY_MS = 5000;

/** Checks the stored token with one call, then starts following the fleet. */
async function start() {
  clearTimeout(retryTimer);
  try {
    await call('GET', '/v1/daemon');
  } catch (e) {
    if (e instanceof ApiError && e.unauthorized) return onUnauthorized(e);
    const unreachable = e instanceof ApiError && e.code === 'unreachable';
    if (!unreachable) return showGate(`The daemon could not be reached: ${e.message}`);
    // Offline, or the daemon down: the page came from the service worker's copy. Try again
    // now and then with the kept token; a token typed meanwhile is not wiped by the retries.
    retryTimer = setTimeout(start, RETRY_MS);
    const message = `The daemon could not be reached (${e.message}). Trying again every few seconds.`;
    if ($('gate').dataset.state === 'unreachable' && !$('gate').hidden) {
      $('gate-error').textContent = message;
      return undefined;
    }
    return showGate(message, { unreachable: true });
  }
  $('gate').hidden = true;
  $('app').hidden = false;
  parts ??= build();
  parts.fleet.start();
  parts.permissions.load();
}

function setupNotifications() {
  const button = $('notify');
  if (!('Notification' in window)) {
    button.hidden = true;
    return;
  }
  const show = () => {
    button.hidden = Notification.permission !== 'default';
  };
  show();
  button.addEventListener('click', async () => {
    await Notification.requestPermission();
    show();
  });
}

$('gate-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const token = $('token').value.trim();
  clearTimeout(retryTimer);
  if (!token) return showGate('Enter the token from <state dir>/token.');
  setToken(token);
  start();
});

registerWorker((id) => parts?.open(id));
// Back online (or the daemon back): try again with the token kept.
window.addEventListener('online', () => {
  if ($('gate').dataset.state !== 'unreachable') return;
  if (hasToken()) start();
  else showGate('');
});

/** With no token yet: whether the daemon answers at all (its health needs none). */
async function probe() {
  try {
    await fetch('/v1/health', { cache: 'no-store', credentials: 'omit' });
  } catch (e) {
    if ($('gate').dataset.state === 'token' && !$('token').value) {
      showGate(`The daemon could not be reached (${e.message})`, { unreachable: true });
    }
  }
}

if (hasToken()) start();
else {
  showGate('');
  probe();
}
