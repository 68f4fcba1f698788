// Permission prompts: the pending requests (`GET /v1/permissions`, then the events socket's
// `permission.requested`/`permission.resolved`). A respondable request gets Allow and Deny
// buttons (`POST /v1/permissions/{id}`); one that is not is answered by typing in its
// terminal, so it only says where.

import { call, ApiError } from './api.js';

export class Permissions {
  /**
   * @param {HTMLElement} list where the prompts go
   * @param {object} hooks `{nameOf(sessionId), onOpen(sessionId), onUnauthorized(error), onError(text),
   *   onChange(pending)}` (`onChange`: the pending requests, each time they change, for the cards)
   */
  constructor(list, hooks) {
    this.list = list;
    this.hooks = hooks;
    this.pending = new Map();
  }

  async load() {
    try {
      const { permissions } = await call('GET', '/v1/permissions');
      this.pending.clear();
      for (const p of permissions) this.pending.set(p.request, p);
      this.render();
    } catch (e) {
      if (e instanceof ApiError && e.unauthorized) return this.hooks.onUnauthorized(e);
      this.hooks.onError(`permissions: ${e.message}`);
    }
  }

  /** A `permission.*` event from the events socket. */
  apply(event) {
    if (event.type === 'permission.requested') {
      this.pending.set(event.request, {
        request: event.request,
        session: event.s,
        message: event.message,
        respondable: event.respondable,
      });
    } else if (event.type === 'permission.resolved') {
      this.pending.delete(event.request);
    }
    this.render();
  }

  async respond(request, decision) {
    try {
      await call('POST', `/v1/permissions/${encodeURIComponent(request)}`, { decision });
      this.pending.delete(request);
      this.render();
    } catch (e) {
      if (e instanceof ApiError && e.unauthorized) return this.hooks.onUnauthorized(e);
      if (e instanceof ApiError && (e.code === 'already_answered' || e.status === 404)) {
        this.pending.delete(request);
        this.render();
      }
      this.hooks.onError(`permission ${request}: ${e.message}`);
    }
  }

  render() {
    const items = [...this.pending.values()].map((p) => {
      const item = document.createElement('div');
      item.className = 'permission';
      item.dataset.request = p.request;
      const what = document.createElement('div');
      what.className = 'what';
      const who = document.createElement('strong');
      who.textContent = this.hooks.nameOf(p.session);
      what.append(who, document.createTextNode(` asks: ${p.message}`));
      item.append(what);
      if (p.respondable) {
        for (const [decision, label] of [['allow', 'Allow'], ['deny', 'Deny']]) {
          const b = document.createElement('button');
          b.type = 'button';
          b.textContent = label;
          b.dataset.decision = decision;
          b.addEventListener('click', () => this.respond(p.request, decision));
          item.append(b);
        }
      } else {
        const b = document.createElement('button');
        b.type = 'button';
        b.textContent = 'Answer in its terminal';
        b.addEventListener('click', () => this.hooks.onOpen(p.session));
        item.append(b);
      }
      return item;
    });
    this.list.replaceChildren(...items);
    this.list.hidden = items.length === 0;
    this.hooks.onChange?.([...this.pending.values()]);
  }
}
