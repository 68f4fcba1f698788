// The fleet as cards, for a phone: the same filtered list as the table (needs-you first), each
// card saying name, agent, state, branch and memory. A tap opens the session's terminal. A
// card answers what its session asks without opening it: Allow or Deny for a permission
// request, and a reply box (submitted as a line, `POST /v1/sessions/{id}/submit`) for a
// session that needs you. Requests of sessions with no card (filtered out, or not yet known)
// get a card of their own at the top.
//
// Cards are kept per session and updated in place, so a reply being typed survives the
// redraws every event brings.

import { STATE_LABEL, memory, linkState } from './fleet.js';

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  Object.assign(node, props);
  node.append(...children);
  return node;
}

export class Cards {
  /**
   * @param {HTMLElement} list the `<ul>` the cards go in
   * @param {object} hooks `{onOpen(id), respond(request, decision), submit(id, text) → Promise<boolean>,
   *   branch(session), nameOf(id)}`
   */
  constructor(list, hooks) {
    this.list = list;
    this.hooks = hooks;
    this.cards = new Map();
    this.shown = [];
    this.total = 0;
    this.permissions = [];
  }

  /** The fleet's filtered list changed (`total`: how many sessions there are at all). */
  sessions(shown, total) {
    this.shown = shown;
    this.total = total;
    this.render();
  }

  /** The pending permission requests changed. */
  asks(pending) {
    this.permissions = pending;
    this.render();
  }

  render() {
    const ids = new Set(this.shown.map((s) => s.id));
    const orphans = this.permissions.filter((p) => !ids.has(p.session)).map((p) => this.orphan(p));
    const cards = this.shown.map((s) => this.card(s));
    for (const id of this.cards.keys()) if (!ids.has(id)) this.cards.delete(id);
    const empty = cards.length || orphans.length ? [] : [
      el('li', { className: 'empty', textContent: this.total ? 'No session matches the filters.' : 'No sessions yet: spawn one.' }),
    ];
    const wanted = [...orphans, ...cards, ...empty];
    // Reordering moves nodes, which drops the focus: only when the order changed, and the
    // focus (a reply being typed) is put back.
    const same = wanted.length === this.list.children.length && wanted.every((c, i) => this.list.children[i] === c);
    if (same) return;
    const focused = document.activeElement;
    this.list.replaceChildren(...wanted);
    if (focused && focused !== document.activeElement && this.list.contains(focused)) focused.focus();
  }

  /** The card of session `s`, made once and brought up to date. */
  card(s) {
    let card = this.cards.get(s.id);
    if (!card) {
      card = this.make(s.id);
      this.cards.set(s.id, card);
    }
    const { parts } = card;
    card.className = `card state-${s.state}`;
    card.dataset.id = s.id;
    card.dataset.name = s.name;
    parts.name.textContent = s.name;
    parts.state.className = `pill state-${s.state}`;
    parts.state.textContent = STATE_LABEL[s.state] ?? s.state;
    const branch = this.hooks.branch(s);
    const link = linkState(s);
    parts.meta.replaceChildren(
      el('span', { className: 'agent', textContent: s.agent }),
      ...(branch ? [el('span', { className: 'branch', textContent: branch })] : []),
      el('span', { className: 'memory', textContent: memory(s) }),
      ...(link ? [el('span', { className: 'link', textContent: link })] : []),
    );
    const asks = this.permissions.filter((p) => p.session === s.id);
    parts.msg.textContent = s.lastMsg || '';
    // A request says it already: once is enough on a phone.
    parts.msg.hidden = !s.lastMsg || asks.some((p) => p.message === s.lastMsg);
    parts.asks.replaceChildren(...asks.map((p) => this.ask(p)));
    // A reply is for a live session that waits for its user.
    parts.reply.hidden = !(s.state === 'needs_you' && s.alive);
    return card;
  }

  make(id) {
    const name = el('strong', { className: 'name' });
    const state = el('span');
    const meta = el('div', { className: 'meta' });
    const msg = el('div', { className: 'msg' });
    const asks = el('div', { className: 'asks' });
    const input = el('input', {
      type: 'text',
      name: 'reply',
      placeholder: 'Reply…',
      autocomplete: 'off',
      spellcheck: false,
    });
    input.setAttribute('aria-label', 'reply');
    const send = el('button', { type: 'submit', textContent: 'Send' });
    const reply = el('form', { className: 'reply' }, input, send);
    reply.addEventListener('submit', async (e) => {
      e.preventDefault();
      const text = input.value;
      if (!text.trim()) return;
      send.disabled = true;
      if (await this.hooks.submit(id, text)) input.value = '';
      send.disabled = false;
    });
    const card = el('li', {}, el('div', { className: 'head' }, name, state), meta, msg, asks, reply);
    card.parts = { name, state, meta, msg, asks, reply };
    // A tap on the card opens it; one on its buttons or its reply box does only that.
    card.addEventListener('click', (e) => {
      if (e.target.closest('button, input, form')) return;
      this.hooks.onOpen(id);
    });
    return card;
  }

  /** One permission request: its message and Allow/Deny, or where to answer it. */
  ask(p) {
    const buttons = p.respondable
      ? [['allow', 'Allow'], ['deny', 'Deny']].map(([decision, label]) => {
          const b = el('button', { type: 'button', textContent: label, className: decision });
          b.dataset.decision = decision;
          b.addEventListener('click', () => this.hooks.respond(p.request, decision));
          return b;
        })
      : [(() => {
          const b = el('button', { type: 'button', textContent: 'Answer in its terminal' });
          b.addEventListener('click', () => this.hooks.onOpen(p.session));
          return b;
        })()];
    const item = el('div', { className: 'ask' }, el('div', { className: 'what', textContent: `asks: ${p.message}` }), el('div', { className: 'buttons' }, ...buttons));
    item.dataset.request = p.request;
    return item;
  }

  /** A card for a request whose session has no card. */
  orphan(p) {
    const card = el('li', { className: 'card orphan' }, el('div', { className: 'head' }, el('strong', { className: 'name', textContent: this.hooks.nameOf(p.session) })), this.ask(p));
    card.dataset.id = p.session;
    return card;
  }
}
