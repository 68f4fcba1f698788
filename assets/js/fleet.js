// The fleet list: a live copy of every session, kept from the events socket (a snapshot of
// `session.added`, then every change), drawn as a table with state and target filters, row
// actions, the needs-you badge and a notification when a session starts waiting (notify.js).
// The same filtered list goes to whoever draws it as cards on a phone (`onRender`).
// Permission events are handed on to whoever listens (permissions.js). What each session uses
// (memory against its limit) is asked of the list every few seconds, since no event says a
// figure moved, and shown as `atc ls` shows it.

import { call, socketUrl, ApiError } from './api.js';
import { notifyWaiting } from './notify.js';

/** Listed order: needs-you first, then running, done, exited. */
const STATE_RANK = { needs_you: 0, running: 1, done: 2, exited: 3 };
export const STATE_LABEL = { needs_you: 'needs you', running: 'running', done: 'done', exited: 'exited' };

/** The link state of a remote session worth showing, or '' (local, or all well). */
export function linkState(session) {
  const life = session?.lifecycle ?? {};
  const parts = [];
  if (life.attachment === 'reattaching') parts.push('attachment: reattaching');
  if (life.vm === 'asleep') parts.push('vm: asleep');
  return parts.join(' · ');
}

/** A byte count in binary units with one letter, as `atc ls` writes it: 512B, 9.5K, 312M, 1.2G. */
export function bytes(n) {
  if (!(n >= 1024)) return `${Math.max(0, Math.floor(n || 0))}B`;
  let value = n / 1024;
  for (const [i, unit] of ['K', 'M', 'G', 'T', 'P', 'E'].entries()) {
    if (value < 9.95) return `${value.toFixed(1)}${unit}`;
    // 1023.7 would print as 1024, which reads better as 1.0 of the next unit.
    if (Math.round(value) < 1024 || i === 5) return `${Math.round(value)}${unit}`;
    value /= 1024;
  }
  return '';
}

/**
 * The memory cell: what the session uses, then its limit when it has one (312M/512M, -/512M
 * while no figure is known, - for neither), as `atc ls` shows it.
 */
export function memory(session) {
  const used = session?.usage ? bytes(session.usage.memoryBytes) : '-';
  const limit = session?.limits?.memoryMiB;
  return limit ? `${used}/${bytes(limit * 1024 * 1024)}` : used;
}

/** Why an exited session ended, when it is worth saying beside its state, or ''. */
export function endReason(session) {
  if (session?.alive || session?.exitReason !== 'memory_limit') return '';
  return 'memory limit';
}

export function age(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

// Sub-sessions right under their parent, each top-level session keeping its place in `list`
// (as `atc ls` shows them); one whose parent is not in `list` stands where it is.
export function asTree(list) {
  const listed = new Set(list.map((s) => s.id));
  const under = (s) => (s.parent && s.parent !== s.id && listed.has(s.parent) ? s.parent : null);
  const children = new Map();
  for (const s of list) {
    const p = under(s);
    if (p) children.set(p, [...(children.get(p) ?? []), s]);
  }
  return list
    .filter((s) => !under(s))
    .flatMap((s) => [{ s, sub: false }, ...(children.get(s.id) ?? []).map((c) => ({ s: c, sub: true }))]);
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node[k] = v;
  }
  node.append(...children);
  return node;
}

export class Fleet {
  /**
   * @param {object} ui `{table, stateFilter, targetFilter, badge, status}` elements
   * @param {object} hooks `{onOpen(id, {watch}), onChange(session), onGone(id),
   *   onPermission(event), onUnauthorized(error), onError(message), onRender(shown)}`
   */
  constructor(ui, hooks) {
    this.ui = ui;
    this.hooks = hooks;
    this.sessions = new Map();
    this.selected = null;
    this.ws = null;
    this.retry = 0;
    this.stopped = true;
    ui.stateFilter.addEventListener('change', () => this.render());
    ui.targetFilter.addEventListener('change', () => this.render());
    // Ages move on by themselves.
    this.ticker = setInterval(() => this.render(), 10000);
    // Which local workspaces hold changes not committed (ids), asked every few seconds: no
    // event says a file changed.
    this.changed = new Set();
    this.workspaceTicker = setInterval(() => this.askWorkspaces(), 3000);
    // What each session uses moves without an event; asked only while something runs.
    this.usageTicker = setInterval(() => this.askUsage(), 5000);
  }

  /** Takes each running session's usage (and limits) from the list, and redraws if one moved. */
  async askUsage() {
    if (this.stopped || ![...this.sessions.values()].some((s) => s.alive)) return;
    let answer;
    try {
      answer = await call('GET', '/v1/sessions');
    } catch {
      // A daemon going away: the events socket says so; the figures wait for the next ask.
      return;
    }
    let moved = false;
    for (const fresh of answer?.sessions ?? []) {
      const s = this.sessions.get(fresh.id);
      if (!s) continue;
      const before = memory(s);
      s.usage = fresh.usage;
      s.limits = fresh.limits;
      moved ||= memory(s) !== before;
    }
    if (moved) this.render();
  }

  /** Asks each local workspace where it stands, and redraws when a changed mark moves. */
  async askWorkspaces() {
    const local = [...this.sessions.values()].filter((s) => s.workspace?.branch);
    const changed = new Set();
    for (const s of local) {
      try {
        const status = await call('GET', `/v1/sessions/${s.id}/workspace`);
        if (status.changed.length) changed.add(s.id);
      } catch {
        // A session forgotten meanwhile, or a daemon going away: the mark waits for the next ask.
      }
    }
    const moved = changed.size !== this.changed.size || [...changed].some((id) => !this.changed.has(id));
    this.changed = changed;
    if (moved) this.render();
  }

  get(id) {
    return this.sessions.get(id);
  }

  select(id) {
    this.selected = id;
    this.render();
  }

  async connect() {
    if (this.stopped) return;
    let url;
    try {
      url = await socketUrl('/v1/events');
    } catch (e) {
      if (e instanceof ApiError && e.unauthorized) return this.hooks.onUnauthorized(e);
      return this.reconnectLater(e.message);
    }
    if (this.stopped) return;
    const ws = new WebSocket(url);
    this.ws = ws;
    ws.onopen = () => {
      // Each connection starts with a fresh snapshot (one session.added per session, none
      // for an empty fleet), which replaces what was known.
      this.retry = 0;
      this.ui.status.textContent = '';
      this.sessions.clear();
      this.render();
    };
    ws.onmessage = (msg) => {
      if (typeof msg.data !== 'string') return;
      let event;
      try {
        event = JSON.parse(msg.data);
      } catch {
        return;
      }
      this.apply(event);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.reconnectLater('the events socket closed');
    };
  }

  reconnectLater(why) {
    if (this.stopped) return;
    const delay = Math.min(250 * 2 ** this.retry, 5000);
    this.retry += 1;
    this.ui.status.textContent = `Fleet updates paused (${why}); reconnecting…`;
    setTimeout(() => this.connect(), delay);
  }

  /** Starts (or, after `stop`, restarts) following the fleet. */
  start() {
    this.stopped = false;
    this.retry = 0;
    this.connect();
  }

  /** Stops following the fleet (the token was refused, or the user signed out). */
  stop() {
    this.stopped = true;
    const ws = this.ws;
    this.ws = null;
    ws?.close();
    this.sessions.clear();
  }

  apply(event) {
    switch (event.type) {
      case 'session.added':
      case 'session.state': {
        const s = event.session;
        const before = this.sessions.get(s.id);
        // A change of state need not carry the figures; a running session keeps the last
        // ones asked until the next ask, an ended one has none.
        if (s.alive && !s.usage && before?.usage) s.usage = before.usage;
        this.sessions.set(s.id, s);
        if (event.type === 'session.state' && s.state === 'needs_you' && before?.state !== 'needs_you') {
          this.notifyWaiting(s);
        }
        this.hooks.onChange(s);
        break;
      }
      case 'session.renamed': {
        const s = this.sessions.get(event.s);
        if (s) {
          s.name = event.name;
          s.namedBy = event.namedBy;
          this.hooks.onChange(s);
        }
        break;
      }
      case 'session.resized': {
        const s = this.sessions.get(event.s);
        if (s) {
          s.cols = event.cols;
          s.rows = event.rows;
        }
        break;
      }
      case 'session.removed':
        this.sessions.delete(event.s);
        this.hooks.onGone(event.s);
        break;
      case 'permission.requested':
      case 'permission.resolved':
        this.hooks.onPermission(event);
        break;
      default:
        return;
    }
    this.render();
  }

  notifyWaiting(s) {
    notifyWaiting(s, (id) => this.hooks.onOpen(id, { watch: false }));
  }

  sorted() {
    return [...this.sessions.values()].sort(
      (a, b) =>
        (STATE_RANK[a.state] ?? 9) - (STATE_RANK[b.state] ?? 9) ||
        Number(b.pinned) - Number(a.pinned) ||
        b.createdAt - a.createdAt,
    );
  }

  render() {
    if (this.stopped) return;
    const { table, stateFilter, targetFilter, badge } = this.ui;
    const all = this.sorted();
    const waiting = all.filter((s) => s.state === 'needs_you').length;
    badge.textContent = waiting ? `${waiting} need${waiting === 1 ? 's' : ''} you` : '';
    badge.hidden = waiting === 0;
    document.title = waiting ? `(${waiting}) atc` : 'atc';

    const targets = [...new Set(all.map((s) => s.locator?.targetID ?? ''))].sort();
    const chosenTarget = targetFilter.value;
    // Rebuilt only when the set changes, so an open menu is not closed by every event.
    if (targets.join('\n') !== this.shownTargets) {
      this.shownTargets = targets.join('\n');
      targetFilter.replaceChildren(
        el('option', { value: '', textContent: 'all targets' }),
        ...targets.map((t) => el('option', { value: t, textContent: t, selected: t === chosenTarget })),
      );
    }
    const state = stateFilter.value;
    const shown = all.filter(
      (s) => (!state || s.state === state) && (!chosenTarget || s.locator?.targetID === chosenTarget),
    );
    const now = Date.now();
    const rows = asTree(shown).map(({ s, sub }) => this.row(s, now, sub));
    if (rows.length === 0) {
      rows.push(
        el('tr', { className: 'empty' }, el('td', { colSpan: 9, textContent: all.length ? 'No session matches the filters.' : 'No sessions yet: spawn one.' })),
      );
    }
    table.tBodies[0].replaceChildren(...rows);
    this.hooks.onRender?.(shown, all.length);
  }

  /** The workspace's branch to show for `s` (with + for changes not committed), or ''. */
  branch(s) {
    if (!s.workspace) return '';
    return `⎇ ${s.workspace.branch ?? s.workspace.sha.slice(0, 8)}${this.changed.has(s.id) ? ' +' : ''}`;
  }

  row(s, now, sub = false) {
    const action = (name, label, enabled = true) =>
      el('button', {
        type: 'button',
        textContent: label,
        disabled: !enabled,
        dataset: { action: name },
        onclick: (e) => {
          e.stopPropagation();
          this.act(name, s.id);
        },
      });
    const link = linkState(s);
    const reason = endReason(s);
    const u = s.usage;
    return el(
      'tr',
      {
        className: `session state-${s.state}${sub ? ' sub' : ''}${this.selected === s.id ? ' selected' : ''}`,
        dataset: { id: s.id, name: s.name },
        title: s.lastMsg || '',
        onclick: () => this.hooks.onOpen(s.id, { watch: false }),
      },
      // A session in a workspace shows its branch under its name; the repository is the title.
      el(
        'td',
        { className: 'name' },
        sub ? `└ ${s.name}` : s.name,
        ...(s.workspace
          ? [
              el('div', {
                className: 'workspace',
                textContent: this.branch(s),
                title: `${s.workspace.repoURL}${this.changed.has(s.id) ? ' (changes not committed)' : ''}`,
              }),
            ]
          : []),
      ),
      el('td', { textContent: s.agent }),
      el('td', { textContent: s.locator?.targetID ?? '' }),
      // A remote session's link state sits under its state: it qualifies it.
      el(
        'td',
        {},
        el('span', { className: `pill state-${s.state}`, textContent: STATE_LABEL[s.state] ?? s.state }),
        ...(link ? [el('div', { className: 'link', textContent: link })] : []),
        ...(reason ? [el('div', { className: 'reason', textContent: reason })] : []),
      ),
      el('td', { className: 'unread', textContent: s.unread ? '●' : '', title: s.unread ? 'unread' : '' }),
      el('td', { textContent: s.alive ? 'yes' : 'no' }),
      el('td', {
        className: 'memory',
        textContent: memory(s),
        title: u ? `peak ${bytes(u.memoryPeakBytes)} · ${u.pids} processes · ${Number(u.cpuSeconds ?? 0).toFixed(1)} s CPU` : '',
      }),
      el('td', { textContent: age(now - s.createdAt) }),
      el(
        'td',
        { className: 'actions' },
        action('watch', 'watch', s.alive),
        action('kill', 'kill', s.alive),
        action('revive', 'revive', !s.alive),
        action('suspend', 'suspend', s.alive),
        action('forget', 'forget'),
      ),
    );
  }

  async act(name, id) {
    const s = this.sessions.get(id);
    if (!s) return;
    try {
      switch (name) {
        case 'watch':
          return this.hooks.onOpen(id, { watch: true });
        case 'kill':
          await call('POST', `/v1/sessions/${id}/kill`);
          break;
        case 'revive':
          await call('POST', `/v1/sessions/${id}/revive`, {});
          break;
        case 'suspend':
          await call('POST', `/v1/sessions/${id}/suspend`, {});
          break;
        case 'forget':
          await this.forget(s);
          break;
        default:
      }
    } catch (e) {
      if (e instanceof ApiError && e.unauthorized) return this.hooks.onUnauthorized(e);
      this.hooks.onError(`${name} ${s.name}: ${e.message}`);
    }
  }

  /** Forget asks first; where forgetting destroys a host the daemon asks again, with a token. */
  async forget(s) {
    if (!window.confirm(`Forget session ${s.name}? Its row and output go.`)) return;
    let answer;
    try {
      answer = await call('DELETE', `/v1/sessions/${s.id}`);
    } catch (e) {
      // A workspace holding work is kept unless the user says to lose it.
      if (!(e instanceof ApiError) || e.code !== 'workspace_dirty') throw e;
      const { changedFiles = 0, unkeptCommits = 0 } = e.data ?? {};
      const loses = `${changedFiles} uncommitted file(s) and ${unkeptCommits} commit(s) on no other branch`;
      if (!window.confirm(`${s.name}'s workspace holds ${loses}. Forget it and lose them?`)) return;
      answer = await call('DELETE', `/v1/sessions/${s.id}?force=true`);
    }
    if (answer?.confirmToken) {
      const what = answer.destroys || 'its host';
      if (!window.confirm(`Forgetting ${s.name} also destroys ${what}. Destroy it?`)) return;
      await call('DELETE', `/v1/sessions/${s.id}?confirm=${encodeURIComponent(answer.confirmToken)}`);
    }
  }
}
