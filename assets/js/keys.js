// The key bar under the terminal on a phone: the keys a phone's keyboard lacks (Esc, Tab,
// the arrows, Enter) and Ctrl, a sticky modifier that applies to the next key, from the bar or
// from the keyboard. What each key sends is pure (`sequence`, `withCtrl`); the bar only wires
// buttons to it and keeps the terminal's focus, so the phone's keyboard stays up.

/** The bytes of each plain key. */
const PLAIN = { esc: '\x1b', tab: '\t', enter: '\r' };

/** The final byte of each arrow's sequence (CSI A..D, or SS3 A..D in application mode). */
const ARROW = { up: 'A', down: 'B', right: 'C', left: 'D' };

/**
 * What key `name` sends. Arrows follow the terminal's cursor-key mode (`application`, as
 * DECCKM sets it, makes them SS3 like a real keyboard's) and with Ctrl become `CSI 1;5 X`.
 * Answers '' for a name the bar does not have.
 */
export function sequence(name, { application = false, ctrl = false } = {}) {
  if (name in ARROW) {
    if (ctrl) return `\x1b[1;5${ARROW[name]}`;
    return `${application ? '\x1bO' : '\x1b['}${ARROW[name]}`;
  }
  return PLAIN[name] ?? '';
}

/**
 * `data` typed with Ctrl held: one character becomes its control code, as a terminal's
 * keyboard makes it (c → ETX, [ → ESC, ? → DEL, space and @ → NUL). Anything else (a paste,
 * an IME's word, a character with no control code) goes as it is.
 */
export function withCtrl(data) {
  if (data.length !== 1) return data;
  const c = data.charCodeAt(0);
  if (c === 0x3f) return '\x7f';
  if (c === 0x20) return '\x00';
  if (c >= 0x61 && c <= 0x7a) return String.fromCharCode(c - 0x60);
  if (c >= 0x40 && c <= 0x5f) return String.fromCharCode(c - 0x40);
  return data;
}

export class KeyBar {
  /**
   * @param {HTMLElement} bar holds buttons with `data-key` (esc, tab, ctrl, up, down, left,
   *   right, enter)
   * @param {object} hooks `{send(data), applicationCursor(), focus()}`
   */
  constructor(bar, hooks) {
    this.bar = bar;
    this.hooks = hooks;
    this.ctrl = false;
    for (const button of bar.querySelectorAll('button[data-key]')) {
      // A tap must not take the focus from the terminal: the phone's keyboard would drop.
      button.addEventListener('pointerdown', (e) => e.preventDefault());
      button.addEventListener('mousedown', (e) => e.preventDefault());
      button.addEventListener('click', () => this.press(button.dataset.key));
    }
  }

  press(name) {
    if (name === 'ctrl') {
      this.setCtrl(!this.ctrl);
    } else {
      const data = sequence(name, { application: this.hooks.applicationCursor(), ctrl: this.ctrl });
      this.setCtrl(false);
      if (data) this.hooks.send(data);
    }
    this.hooks.focus();
  }

  /** What the keyboard typed, with Ctrl applied if it is armed (and then released). */
  transform(data) {
    if (!this.ctrl) return data;
    this.setCtrl(false);
    return withCtrl(data);
  }

  setCtrl(on) {
    this.ctrl = on;
    this.bar.querySelector('button[data-key=ctrl]')?.setAttribute('aria-pressed', String(on));
  }
}
