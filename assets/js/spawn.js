// The spawn dialog: agent and target from `GET /v1/agents`, cwd suggestions from
// `GET /v1/dirs`, name, and the agent's model and effort options (a closed set becomes a
// menu, examples become suggestions). A spawn carries a fresh Idempotency-Key, so a retried
// click cannot start two sessions.

import { call, idempotencyKey, ApiError } from './api.js';

function option(value, label, selected = false) {
  const o = document.createElement('option');
  o.value = value;
  o.textContent = label;
  o.selected = selected;
  return o;
}

export class SpawnDialog {
  /**
   * @param {HTMLDialogElement} dialog the form's dialog (fields by name: agent, target, cwd,
   *   name, model, effort; a `.error` line; datalists #cwd-list, #model-list)
   * @param {object} hooks `{onSpawned(session), onUnauthorized(error), size()}`
   */
  constructor(dialog, hooks) {
    this.dialog = dialog;
    this.form = dialog.querySelector('form');
    this.hooks = hooks;
    this.listing = null;
    this.field('agent').addEventListener('change', () => this.showOptions());
    this.form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.submit();
    });
    dialog.querySelector('[data-action="cancel"]').addEventListener('click', () => dialog.close());
  }

  /** A form control by name (`form.name` and `form.target` are the form's own attributes). */
  field(name) {
    return this.form.elements.namedItem(name);
  }

  async open() {
    this.error('');
    try {
      const [listing, dirs] = await Promise.all([call('GET', '/v1/agents'), call('GET', '/v1/dirs')]);
      this.listing = listing;
      this.fill(listing, dirs.dirs ?? []);
    } catch (e) {
      if (e instanceof ApiError && e.unauthorized) return this.hooks.onUnauthorized(e);
      this.error(e.message);
    }
    this.dialog.showModal();
    this.field('cwd').focus();
  }

  fill(listing, dirs) {
    const defaults = listing.spawnDefaults ?? {};
    const spawnable = listing.agents.filter((a) => a.capabilities?.spawn);
    this.field('agent').replaceChildren(
      ...spawnable.map((a) => option(a.id, a.label && a.label !== a.id ? `${a.label} (${a.id})` : a.id, a.id === defaults.agent)),
    );
    const targets = listing.targets.filter((t) => t.available);
    this.field('target').replaceChildren(
      ...targets.map((t) => option(t.id, `${t.id} (${t.provider})`, t.id === (defaults.target ?? listing.defaultTarget))),
    );
    document.getElementById('cwd-list').replaceChildren(...dirs.map((d) => option(d, d)));
    if (!this.field('cwd').value && dirs.length) this.field('cwd').value = dirs[0];
    this.showOptions();
  }

  /** Model and effort as the chosen agent offers them. */
  showOptions() {
    const agent = this.listing?.agents.find((a) => a.id === this.field('agent').value);
    const opts = agent?.spawnOptions ?? {};
    this.showOption('model', opts.model);
    this.showOption('effort', opts.effort);
  }

  showOption(name, spec) {
    const field = this.form.querySelector(`[data-option="${name}"]`);
    const supported = !!spec?.supported;
    field.hidden = !supported;
    const select = field.querySelector('select');
    const input = field.querySelector('input');
    const list = field.querySelector('datalist');
    const closed = Array.isArray(spec?.values);
    select.hidden = !closed;
    select.disabled = !supported || !closed;
    input.hidden = closed;
    input.disabled = !supported || closed;
    const fallback = spec?.default ? `default (${spec.default})` : 'default';
    if (closed) {
      select.replaceChildren(option('', fallback), ...spec.values.map((v) => option(v, v)));
    } else {
      input.value = '';
      input.placeholder = fallback;
      list.replaceChildren(...(spec?.examples ?? []).map((ex) => option(ex.value, ex.resolvesTo ? `${ex.value} → ${ex.resolvesTo}` : ex.value)));
    }
  }

  value(name) {
    const field = this.form.querySelector(`[data-option="${name}"]`);
    if (field.hidden) return undefined;
    const control = field.querySelector('select:not([hidden]), input:not([hidden])');
    return control?.value.trim() || undefined;
  }

  async submit() {
    const f = this.form;
    const { cols, rows } = this.hooks.size();
    const body = {
      agent: this.field('agent').value || undefined,
      target: this.field('target').value || undefined,
      cwd: this.field('cwd').value.trim(),
      name: this.field('name').value.trim() || undefined,
      model: this.value('model'),
      effort: this.value('effort'),
      cols,
      rows,
    };
    const button = f.querySelector('button[type="submit"]');
    button.disabled = true;
    try {
      const answer = await call('POST', '/v1/sessions', body, { 'Idempotency-Key': idempotencyKey() });
      this.dialog.close();
      this.field('name').value = '';
      this.hooks.onSpawned(answer.session, answer.warnings ?? []);
    } catch (e) {
      if (e instanceof ApiError && e.unauthorized) {
        this.dialog.close();
        return this.hooks.onUnauthorized(e);
      }
      this.error(e.message);
    } finally {
      button.disabled = false;
    }
  }

  error(text) {
    const line = this.dialog.querySelector('.error');
    line.textContent = text;
    line.hidden = !text;
  }
}
