// Wires the page together: the token gate (asked once, kept in sessionStorage), then the
// fleet list, the terminal, the spawn dialog and the permission prompts, each built once. A
// refused token stops them and brings the gate back with the daemon's reason.

import { call, hasToken, setToken, forgetToken, ApiError } from './api.js';
import { Fleet } from './fleet.js';
import { TerminalView } from './terminal.js';
import { SpawnDialog } from './spawn.js';
import { Permissions } from './permissions.js';

const $ = (id) => document.getElementById(id);

/** The page's parts, built on the first accepted token. */
let parts = null;

function showGate(message) {
  parts?.fleet.stop();
  parts?.terminal.close();
  $('app').hidden = true;
  $('gate').hidden = false;
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
    { onUnauthorized, onClosed: () => fleet.select(null) },
  );
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
  };
  return { fleet, terminal, permissions };
}

/** Checks the stored token with one call, then starts following the fleet. */
async function start() {
  try {
    await call('GET', '/v1/daemon');
  } catch (e) {
    if (e instanceof ApiError && e.unauthorized) return onUnauthorized(e);
    return showGate(`The daemon could not be reached: ${e.message}`);
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
  if (!token) return showGate('Enter the token from <state dir>/token.');
  setToken(token);
  start();
});

if (hasToken()) start();
else showGate('');
