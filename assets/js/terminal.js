// One attached terminal: xterm.js on the attach socket. It keeps the session's output offset
// (counting the binary bytes after each prelude), so after a dropped connection it resumes
// with `stream` + `from` and shows nothing twice; a banner says "reconnecting" meanwhile.
// It sizes itself to its box (fit addon) and tells the session with resize frames.

import { Terminal } from '../vendor/xterm/xterm.mjs';
import { FitAddon } from '../vendor/addon-fit/addon-fit.mjs';
import { WebLinksAddon } from '../vendor/addon-web-links/addon-web-links.mjs';
import { Unicode11Addon } from '../vendor/addon-unicode11/addon-unicode11.mjs';
import { socketUrl, call, ApiError } from './api.js';
import { linkState } from './fleet.js';

/** Waits between reconnect attempts; the last one repeats. */
const RETRY_MS = [250, 500, 1000, 2000, 4000];

/** Keystrokes kept while the first attach is still connecting, at most. */
const PENDING_MAX = 4096;

const encoder = new TextEncoder();

export class TerminalView {
  /**
   * @param {object} ui `{pane, screen, title, banner, link, status, closeButton}` elements
   * @param {object} hooks `{onUnauthorized(error), onClosed(), onOpened(), transform(data)}`
   *   (`transform`: what the keyboard typed, as the key bar's sticky Ctrl changes it)
   */
  constructor(ui, hooks) {
    this.ui = ui;
    this.hooks = hooks;
    this.term = null;
    this.ws = null;
    this.session = null;
    ui.closeButton.addEventListener('click', () => this.close());
  }

  /** Attaches to session `id` (read-only with `watch`), replacing any open terminal. */
  open(session, { watch = false } = {}) {
    this.close();
    this.generation = (this.generation ?? 0) + 1;
    this.session = session;
    this.watch = watch;
    // Resume point: the stream and the offset of the next byte not yet rendered.
    this.stream = null;
    this.offset = null;
    this.preludeLeft = 0;
    this.attempt = 0;
    this.ended = false;
    this.everAttached = false;
    // Keys typed between opening the terminal and its first `attached` frame: sent once it
    // comes, so a user who types at once loses nothing. After a drop nothing is kept: a
    // command typed under the "reconnecting" banner should not run later by surprise.
    this.pending = [];
    this.pendingBytes = 0;

    const term = new Terminal({
      cursorBlink: !watch,
      disableStdin: watch,
      scrollback: 5000,
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, monospace',
      fontSize: 14,
      theme: { background: '#101418' },
      // `term.unicode` is still a proposed API in xterm.js 6.
      allowProposedApi: true,
    });
    // Unicode 11 widths: xterm.js's default table counts most emoji as one cell, where the
    // programs writing them and the screen model whose repaint this page gets count two, and
    // every cell after one would land a column off.
    term.loadAddon(new Unicode11Addon());
    term.unicode.activeVersion = '11';
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.loadAddon(new WebLinksAddon());
    this.term = term;
    this.fit = fit;
    this.ui.pane.hidden = false;
    this.ui.screen.replaceChildren();
    term.open(this.ui.screen);
    this.refit();
    term.onData((data) => this.typed(this.hooks.transform ? this.hooks.transform(data) : data));
    term.onBinary((data) => this.send(Uint8Array.from(data, (c) => c.charCodeAt(0) & 0xff)));
    term.onResize(({ cols, rows }) => this.post(JSON.stringify({ type: 'resize', cols, rows })));
    // The box changes with the window (and the fleet list beside it).
    this.observer = new ResizeObserver(() => this.refit());
    this.observer.observe(this.ui.screen);
    this.describe(session);
    this.setStatus(watch ? 'watching (read-only)' : '');
    term.focus();
    this.hooks.onOpened?.();
    this.connect();
  }

  /** Keys for the session, typed or from the key bar. */
  typed(data) {
    this.send(encoder.encode(data));
  }

  /** Whether the session asked for application cursor keys (DECCKM), for the key bar. */
  get applicationCursor() {
    return this.term?.modes.applicationCursorKeysMode ?? false;
  }

  refit() {
    if (!this.term) return;
    try {
      this.fit.fit();
    } catch {
      // A hidden box has no size to fit yet; the next resize fits it.
    }
  }

  /** Closes the terminal on purpose: no reconnect. */
  close() {
    this.generation = (this.generation ?? 0) + 1;
    clearTimeout(this.retryTimer);
    this.observer?.disconnect();
    const ws = this.ws;
    this.ws = null;
    ws?.close(1000);
    this.term?.dispose();
    this.term = null;
    if (this.session) {
      this.session = null;
      this.ui.pane.hidden = true;
      this.showBanner(false);
      this.hooks.onClosed();
    }
  }

  get sessionId() {
    return this.session?.id ?? null;
  }

  send(bytes) {
    if (this.watch) return;
    if (!this.everAttached) {
      if (this.pendingBytes + bytes.length <= PENDING_MAX) {
        this.pending.push(bytes);
        this.pendingBytes += bytes.length;
      }
      return;
    }
    this.post(bytes);
  }

  /** Sends on the socket if it is open; a closing one drops it (a browser would only log). */
  post(data) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(data);
  }

  /** Whether the terminal is attached now (its socket open and the `attached` frame in). */
  get attached() {
    return this.everAttached && this.ws?.readyState === WebSocket.OPEN && this.ui.banner.hidden;
  }

  async connect() {
    // Whether this is still the terminal that was opened when the attempt began.
    const generation = this.generation;
    const current = () => this.generation === generation;
    const session = this.session;
    const term = this.term;
    const params = { cols: term.cols, rows: term.rows };
    if (this.watch) params.mode = 'watch';
    if (this.stream !== null && this.offset !== null) {
      params.stream = this.stream;
      params.from = this.offset;
    }
    let url;
    try {
      // A session that is not running (or ended while we were away) cannot be attached; say
      // so instead of trying forever.
      const { session: now } = await call('GET', `/v1/sessions/${session.id}`);
      if (!current()) return;
      this.describe(now);
      if (!now.alive) return this.finish('the session is not running (revive it to attach again)');
      url = await socketUrl(`/v1/sessions/${session.id}/attach`, params);
    } catch (e) {
      if (!current()) return;
      if (e instanceof ApiError && e.unauthorized) return this.hooks.onUnauthorized(e);
      if (e instanceof ApiError && e.code === 'no_such_session') return this.finish('the session is gone');
      return this.retryLater();
    }
    if (!current()) return;
    const ws = new WebSocket(url);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onmessage = (msg) => {
      if (this.ws !== ws) return;
      if (typeof msg.data === 'string') this.onFrame(msg.data);
      else this.onBytes(new Uint8Array(msg.data));
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.ended) return;
      this.retryLater();
    };
  }

  retryLater() {
    this.showBanner(true);
    const delay = RETRY_MS[Math.min(this.attempt, RETRY_MS.length - 1)];
    this.attempt += 1;
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  onFrame(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    switch (frame.type) {
      case 'attached': {
        // A screen replay repaints from the screen model: on a terminal that already shows
        // output, start it clean so the repaint does not land on top of the old screen.
        if (frame.replay === 'screen' && this.everAttached) this.term.reset();
        this.stream = frame.stream;
        this.offset = frame.offset;
        this.preludeLeft = frame.prelude;
        this.everAttached = true;
        this.attempt = 0;
        this.showBanner(false);
        for (const bytes of this.pending.splice(0)) this.post(bytes);
        this.pendingBytes = 0;
        // The size may have changed while away.
        this.refit();
        const { cols, rows } = this.term;
        if (cols !== frame.cols || rows !== frame.rows) {
          this.post(JSON.stringify({ type: 'resize', cols, rows }));
        }
        break;
      }
      case 'resynced':
        // This client fell behind: a repaint follows, then live bytes from `offset`.
        this.term.reset();
        this.offset = frame.offset;
        this.preludeLeft = frame.prelude;
        break;
      case 'desync':
        this.setStatus(`fell behind: ${frame.dropped} bytes skipped, repainting`);
        break;
      case 'state':
        this.describe(frame.session);
        break;
      case 'attachment':
        this.ui.link.textContent = frame.state === 'reattaching' ? 'attachment: reattaching' : '';
        this.ui.link.hidden = frame.state !== 'reattaching';
        break;
      case 'exit': {
        const how = frame.signal ? `signal ${frame.signal}` : `code ${frame.code ?? '?'}`;
        this.finish(`exited (${frame.reason}, ${how})${frame.detail ? `: ${frame.detail}` : ''}`);
        break;
      }
      case 'error':
        this.setStatus(`${frame.code}: ${frame.message}`);
        break;
      default:
    }
  }

  onBytes(bytes) {
    let live = bytes.length;
    if (this.preludeLeft > 0) {
      const prelude = Math.min(this.preludeLeft, bytes.length);
      this.preludeLeft -= prelude;
      live -= prelude;
    }
    this.offset += live;
    this.term.write(bytes);
  }

  /** The session ended (or cannot be reached): no more reconnects. */
  finish(why) {
    this.ended = true;
    clearTimeout(this.retryTimer);
    this.showBanner(false);
    this.setStatus(why);
  }

  describe(session) {
    if (!session || session.id !== this.session?.id) return;
    this.session = session;
    this.ui.title.textContent = `${session.name} · ${session.agent} · ${session.locator?.targetID ?? ''}`;
    const link = linkState(session);
    this.ui.link.textContent = link;
    this.ui.link.hidden = !link;
  }

  setStatus(text) {
    this.ui.status.textContent = text;
  }

  showBanner(on) {
    this.ui.banner.hidden = !on;
  }

  /** The terminal's buffer as text, one line per row (for tests and the console). */
  text() {
    const buf = this.term?.buffer.active;
    if (!buf) return '';
    const lines = [];
    for (let i = 0; i < buf.length; i += 1) lines.push(buf.getLine(i)?.translateToString(true) ?? '');
    return lines.join('\n');
  }

  /** Drops the socket as a network failure would (for tests and the console). */
  dropConnection() {
    this.ws?.close(4000, 'dropped');
  }
}
