// The reference terminal for the screen model's fidelity harness
// (crates/atc-screen/tests/fidelity/): xterm.js's headless build with the Unicode 11 widths the
// browser page uses, so "what the reference shows" is what the page would show.
//
// Reads cases from stdin, one JSON object a line:
//   {"id": "...", "cols": N, "rows": N, "writes": [step, ...]}
// where a step is a base64 string (bytes written, in order, each awaited before the next) or
// {"cols": N, "rows": N} (a resize between writes). Every case gets a fresh Terminal.
// Answers one JSON line per case, in order, with everything a person or a program can observe
// of the terminal afterwards: each cell of the visible screen of the active buffer, the cursor,
// the buffer in use, the modes and the title (see `observe`). Hidden state (tab stops, the
// saved cursor, charsets, margins) is not read here; the harness reveals it by writing probes
// after the stream, which keeps this side to what the page can be seen doing.
//
// Cells are sparse: a cell that was never written (no character, width 1, default colours,
// no attribute, no link) is `0`; any other is an object holding only its non-default fields,
// so a screen of text stays small. The harness fills the defaults back in to compare.

import { createInterface } from 'node:readline';
import headless from '@xterm/headless';
import unicode11 from '@xterm/addon-unicode11';

const { Terminal } = headless;
const { Unicode11Addon } = unicode11;

// xterm.js's colour modes (Attributes.CM_* in its source; the values getFgColorMode returns).
const CM_P16 = 0x1000000;
const CM_P256 = 0x2000000;
const CM_RGB = 0x3000000;

// Underline styles by the number SGR 4:n sets (xterm.js's UnderlineStyle enum).
const UNDERLINE = ['none', 'single', 'double', 'curly', 'dotted', 'dashed'];

function colour(mode, value) {
  switch (mode) {
    case CM_P16:
      return `p16:${value}`;
    case CM_P256:
      return `p256:${value}`;
    case CM_RGB:
      return `rgb:${value.toString(16).padStart(6, '0')}`;
    default:
      return 'default';
  }
}

function cellState(cell, links) {
  const out = {};
  const ch = cell.getChars();
  if (ch !== '') out.ch = ch;
  if (cell.getWidth() !== 1) out.w = cell.getWidth();
  const fg = colour(cell.getFgColorMode(), cell.getFgColor());
  if (fg !== 'default') out.fg = fg;
  const bg = colour(cell.getBgColorMode(), cell.getBgColor());
  if (bg !== 'default') out.bg = bg;
  if (cell.isBold()) out.bold = true;
  if (cell.isDim()) out.faint = true;
  if (cell.isItalic()) out.italic = true;
  if (cell.isBlink()) out.blink = true;
  if (cell.isInverse()) out.inverse = true;
  if (cell.isInvisible()) out.concealed = true;
  if (cell.isStrikethrough()) out.strikethrough = true;
  if (cell.isOverline()) out.overline = true;
  if (cell.isUnderline()) {
    // Internal: the public IBufferCell says only whether a cell is underlined. The object
    // getCell returns is xterm.js's own CellData, whose extended attributes hold the style,
    // the underline colour and the OSC 8 link.
    out.underline = UNDERLINE[cell.getUnderlineStyle()] ?? `style ${cell.getUnderlineStyle()}`;
    const ulc = colour(cell.getUnderlineColorMode(), cell.getUnderlineColor());
    if (ulc !== 'default') out.underlineColour = ulc;
  }
  const urlId = cell.extended?.urlId ?? 0;
  if (urlId !== 0) {
    // Internal: the link service is how xterm.js resolves a cell's link id to its URI.
    out.link = links.getLinkData(urlId)?.uri ?? `id ${urlId}`;
  }
  return Object.keys(out).length === 0 ? 0 : out;
}

function observe(term, title) {
  const buffer = term.buffer.active;
  const core = term._core;
  const rows = [];
  for (let y = 0; y < term.rows; y++) {
    const line = buffer.getLine(buffer.baseY + y);
    const cells = [];
    for (let x = 0; x < term.cols; x++) {
      cells.push(line ? cellState(line.getCell(x), core._oscLinkService) : 0);
    }
    rows.push({ wrapped: line?.isWrapped ?? false, cells });
  }
  return {
    cols: term.cols,
    rows: term.rows,
    buffer: buffer.type,
    // cursorX is `cols` while a wrap is pending (the last column was just written).
    cursorX: buffer.cursorX,
    cursorY: buffer.cursorY,
    // Internal: neither the cursor's visibility (DECTCEM), its shape (DECSCUSR) nor the mouse
    // encoding (1006 and friends) is in the public API.
    cursorHidden: core.coreService.isCursorHidden,
    cursorStyle: core.coreService.decPrivateModes.cursorStyle ?? 'default',
    cursorBlink: core.coreService.decPrivateModes.cursorBlink ?? 'default',
    mouseEncoding: core.coreMouseService.activeEncoding,
    ...term.modes,
    title,
    screen: rows,
  };
}

function write(term, data) {
  return new Promise((resolve) => term.write(data, resolve));
}

async function run(input) {
  const term = new Terminal({
    cols: input.cols,
    rows: input.rows,
    scrollback: 0,
    allowProposedApi: true,
  });
  term.loadAddon(new Unicode11Addon());
  term.unicode.activeVersion = '11';
  let title = '';
  term.onTitleChange((t) => {
    title = t;
  });
  for (const step of input.writes) {
    if (typeof step === 'string') {
      await write(term, Buffer.from(step, 'base64'));
    } else {
      term.resize(step.cols, step.rows);
    }
  }
  const state = observe(term, title);
  term.dispose();
  return state;
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (line.trim() === '') continue;
  const input = JSON.parse(line);
  let answer;
  try {
    answer = { id: input.id, state: await run(input) };
  } catch (err) {
    answer = { id: input.id, error: String(err?.stack ?? err) };
  }
  // Waits for the pipe when the reader is behind, so a long run does not pile up in memory.
  if (!process.stdout.write(JSON.stringify(answer) + '\n')) {
    await new Promise((resolve) => process.stdout.once('drain', resolve));
  }
}
