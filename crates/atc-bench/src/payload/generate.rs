//! The generated payload shapes: each function writes one period of the bytes a kind of real
//! program prints, for a terminal of a given size; the bench writes the period to a file and
//! replays it over and over (`shape.rs`). Each generator is small and names the program it
//! imitates.
//!
//! Every period is deterministic (a fixed-seed [`Dice`], no clock), so two runs of one build
//! push the same bytes, and valid UTF-8. The PTY's output post-processing is off while a
//! payload runs (`stty -opost`), so lines end in `\r\n` where the program's terminal would
//! have turned its `\n` into that. A payload is cut at an arbitrary byte, so nothing here
//! relies on a period being read whole; a shape whose start must happen once (entering the
//! alternate screen) has a prelude, written before the first period only.

use std::fmt::Write as _;

/// Text the generators draw printable ASCII from (the `lines` shape's line, without its end).
const ASCII: &str = crate::payload::PAYLOAD_LINE;

/// Wide (two-column) CJK characters, common ones from Chinese and Japanese text.
const WIDE: [char; 16] = [
    '日', '本', '語', '中', '文', '字', '漢', '終', '端', '画', '面', '表', '示', '設', '定', '完',
];

/// A base letter and a combining mark after it, one column together.
const COMBINED: [&str; 4] = ["e\u{301}", "a\u{308}", "n\u{303}", "o\u{302}"];

/// The braille spinner Ink's `ink-spinner` ("dots") cycles through.
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// A tiny fixed-seed generator (xorshift64), so every period is the same in every run.
struct Dice(u64);

impl Dice {
    fn new(seed: u64) -> Dice {
        Dice(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A number in `lo..=hi`.
    fn within(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// `n` printable ASCII characters starting at `from` in [`ASCII`], wrapping around.
fn ascii(from: usize, n: usize) -> impl Iterator<Item = char> {
    ASCII.chars().cycle().skip(from % ASCII.len()).take(n)
}

/// `wrapped`: one unbroken run of printable text with no line ends, so every row ends in an
/// autowrap, as a program printing a minified JSON document or a base64 blob does.
pub fn wrapped() -> String {
    // A length that is no multiple of a common width, so wraps fall at moving places in the text.
    ascii(0, 64 * 1024 + 7).collect()
}

/// `sgr`: lines of short runs of 2–8 characters, each behind an SGR change — 16-colour,
/// 256-colour and truecolor foreground and background, bold, italic and underline switched on
/// and off — as agent TUIs print syntax-highlighted code and styled markdown.
pub fn sgr(cols: u16) -> String {
    let mut dice = Dice::new(0x5612);
    let mut out = String::new();
    for line in 0..1500 {
        // Never a full row, so the shape's cost is the styling, not wrapping.
        let width = usize::from(cols) - 1 - dice.below(usize::from(cols) / 3);
        let mut used = 0;
        while used < width {
            out.push_str(&sgr_change(&mut dice));
            let run = dice.within(2, 8).min(width - used);
            out.extend(ascii(line * 7 + used, run));
            used += run;
        }
        out.push_str("\x1b[0m\r\n");
    }
    out
}

/// One SGR change of a kind chosen by `dice`.
fn sgr_change(dice: &mut Dice) -> String {
    let n = dice.below(256);
    let (r, g, b) = (dice.below(256), dice.below(256), dice.below(256));
    match dice.below(11) {
        0 => format!(
            "\x1b[{}m",
            dice.pick(&[30, 31, 32, 33, 34, 35, 36, 37, 90, 94, 96])
        ),
        1 => format!("\x1b[{}m", dice.pick(&[40, 41, 42, 44, 100, 104])),
        2 => format!("\x1b[38;5;{n}m"),
        3 => format!("\x1b[48;5;{n}m"),
        4 => format!("\x1b[38;2;{r};{g};{b}m"),
        5 => format!("\x1b[48;2;{r};{g};{b}m"),
        6 => dice.pick(&["\x1b[1m", "\x1b[22m"]).to_string(),
        7 => dice.pick(&["\x1b[3m", "\x1b[23m"]).to_string(),
        8 => dice.pick(&["\x1b[4m", "\x1b[24m"]).to_string(),
        9 => dice.pick(&["\x1b[39m", "\x1b[49m"]).to_string(),
        _ => "\x1b[0m".to_string(),
    }
}

/// Lines of the status area `redraw` repaints, and so how many it erases each frame.
const STATUS_LINES: usize = 3;

/// `redraw`: an Ink (React for the terminal) status area redrawn in place, frame after frame,
/// as Claude Code and other Ink TUIs print while they work. Ink's `log-update` erases its last
/// output line by line (`ESC[2K` erase line, `ESC[1A` up, once per line it wrote plus the
/// empty one after its final newline, then `ESC[G`) and writes the new frame; a spinner glyph
/// and a counter change every frame. Every few frames a line of log text goes above the area,
/// as Ink's `<Static>` output does: erase, the new line, the area again.
pub fn redraw(cols: u16) -> String {
    let mut dice = Dice::new(0x1_4c);
    let erase = {
        let mut e = String::new();
        for i in 0..=STATUS_LINES {
            e.push_str("\x1b[2K");
            if i < STATUS_LINES {
                e.push_str("\x1b[1A");
            }
        }
        e.push_str("\x1b[G");
        e
    };
    let rule: String = "─".repeat(usize::from(cols) - 2);
    let mut out = String::new();
    for frame in 0..1000usize {
        out.push_str(&erase);
        if frame % 7 == 0 {
            // Static output: a tool call's line of log, then the area below it again.
            let width = dice.within(20, usize::from(cols) - 4);
            let _ = write!(out, "\x1b[32m⏺\x1b[39m ");
            out.extend(ascii(frame, width));
            out.push_str("\r\n");
        }
        let tenths = frame * 3;
        let spinner = SPINNER[frame % SPINNER.len()];
        let _ = write!(
            out,
            "\x1b[38;5;174m{spinner}\x1b[39m \x1b[1mWorking…\x1b[22m "
        );
        let _ = write!(
            out,
            "\x1b[2m({}.{}s · ↑ {} tokens · esc to interrupt)\x1b[22m\r\n",
            tenths / 10,
            tenths % 10,
            1000 + frame * 17
        );
        let _ = write!(out, "\x1b[2m╭{rule}╮\x1b[22m\r\n");
        let typed = frame % 40;
        let _ = write!(out, "\x1b[2m│\x1b[22m > ");
        out.extend(ascii(0, typed));
        out.push_str("\x1b[7m \x1b[27m\r\n");
    }
    out
}

/// `alt`'s prelude: enter the alternate screen, hide the cursor, clear, as htop and vim start.
pub fn alt_prelude() -> String {
    "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J".to_string()
}

/// `alt`: full-screen redraws on the alternate screen, as htop repaints every second: cursor
/// home, then every row placed with CUP and written in colour to the full width (meters,
/// a header bar, process rows, the function-key bar).
pub fn alt(cols: u16, rows: u16) -> String {
    let mut dice = Dice::new(0xa17);
    let (cols, rows) = (usize::from(cols), usize::from(rows));
    let mut out = String::new();
    for frame in 0..30usize {
        out.push_str("\x1b[H");
        for row in 1..=rows {
            let _ = write!(out, "\x1b[{row};1H");
            let mut r = Row::default();
            if row <= 4 {
                // A CPU meter: bars of two colours, the rest blank, the figure at the end.
                let inner = cols - 13;
                let user = dice.below(inner / 2);
                let system = dice.below(inner / 4);
                r.text(&format!("  {row}  "));
                r.styled("\x1b[1m", "[", "\x1b[22m");
                r.styled("\x1b[32m", &"|".repeat(user), "");
                r.styled("\x1b[31m", &"|".repeat(system), "\x1b[39m");
                r.text(&" ".repeat(inner - user - system));
                let pct = (user + system) * 100 / inner;
                r.styled("\x1b[1m", &format!("{pct:>4}%]"), "\x1b[22m");
            } else if row == 6 {
                let header =
                    "    PID USER      PRI  NI  VIRT   RES   SHR S  CPU% MEM%   TIME+  Command";
                r.styled("\x1b[30;42m", &format!("{header:<cols$}"), "\x1b[0m");
            } else if row == rows {
                for (key, label) in [
                    ("F1", "Help  "),
                    ("F2", "Setup "),
                    ("F3", "Search"),
                    ("F9", "Kill  "),
                    ("F10", "Quit  "),
                ] {
                    r.text(key);
                    r.styled("\x1b[30;46m", label, "\x1b[0m");
                }
            } else if row > 6 {
                let selected = row == 7 + frame % (rows - 8);
                if selected {
                    r.styled("\x1b[30;46m", "", "");
                }
                let cpu = dice.below(1000);
                r.text(&format!("{:>7} ", 1000 + row * 37 + frame));
                r.styled("\x1b[33m", "bench     ", "\x1b[39m");
                r.text(&format!(
                    " 20   0 {:>5}M {:>4}M {:>5} R {:>3}.{} {:>4}  0:{:02}.{:02} ",
                    100 + dice.below(900),
                    10 + dice.below(90),
                    dice.below(9999),
                    cpu / 10,
                    cpu % 10,
                    dice.below(100),
                    frame % 60,
                    dice.below(100)
                ));
                r.styled(
                    "\x1b[36m",
                    &ascii(row * 11, 40).collect::<String>(),
                    "\x1b[39m",
                );
                if selected {
                    r.pad_to(cols);
                    r.styled("", "", "\x1b[0m");
                }
            }
            if r.width == 0 {
                // The blank row between meters and the list.
                out.push_str("\x1b[K");
            } else {
                r.pad_to(cols);
                out.push_str(&r.out);
            }
        }
    }
    out
}

/// A row being written, with the columns its text takes (all of it one column a character).
#[derive(Default)]
struct Row {
    out: String,
    width: usize,
}

impl Row {
    fn text(&mut self, text: &str) {
        self.out.push_str(text);
        self.width += text.chars().count();
    }

    /// `text` between two SGR changes.
    fn styled(&mut self, on: &str, text: &str, off: &str) {
        self.out.push_str(on);
        self.text(text);
        self.out.push_str(off);
    }

    fn pad_to(&mut self, cols: usize) {
        self.text(&" ".repeat(cols.saturating_sub(self.width)));
    }
}

/// `cjk`: lines of wide CJK characters with letters and combining marks between them, long
/// enough to wrap, as a chat or an agent answering in Chinese or Japanese prints. Each line
/// starts at an offset of 0–3 columns, so wide characters land on both parities of column:
/// some end exactly at the right margin, some fall on the last column, where the terminal
/// must leave it blank and wrap the character to the next row.
pub fn cjk(cols: u16) -> String {
    let mut dice = Dice::new(0xc1c);
    let cols = usize::from(cols);
    let mut out = String::new();
    for line in 0..1500 {
        let offset = line % 4;
        out.extend(ascii(line, offset));
        let mut width = offset;
        let target = cols + cols / 2 + dice.below(cols);
        while width < target {
            match dice.below(10) {
                0 => {
                    out.push_str(dice.pick(&COMBINED));
                    width += 1;
                }
                1 => {
                    out.push(' ');
                    width += 1;
                }
                _ => {
                    out.push(dice.pick(&WIDE));
                    width += 2;
                }
            }
        }
        out.push_str("\r\n");
    }
    out
}

/// `scroll`: text scrolling inside a scroll region between a header and a status line, as
/// less and vim page through a file: the region `ESC[2;{rows-1}r` is set, the header (row 1)
/// and footer (the last row) painted, then lines printed at the region's bottom scroll it up,
/// with the footer's position updated now and then (saved and restored cursor) and a few
/// lines scrolled back in at the top (reverse index), as paging back does.
pub fn scroll(cols: u16, rows: u16) -> String {
    let cols = usize::from(cols);
    let bottom = usize::from(rows) - 1;
    let mut dice = Dice::new(0x5c0);
    let mut out = String::new();
    let title = "  report.rs";
    let _ = write!(out, "\x1b[r\x1b[1;1H\x1b[7m{title:<cols$}\x1b[27m");
    let _ = write!(out, "\x1b[{rows};1H\x1b[7m{:<cols$}\x1b[27m", ":");
    let _ = write!(out, "\x1b[2;{bottom}r\x1b[{bottom};1H");
    for line in 0..2000usize {
        if line % 10 == 0 {
            let status = format!(
                "report.rs lines {}-{} {}%",
                line + 1,
                line + bottom,
                line / 20
            );
            let _ = write!(
                out,
                "\x1b7\x1b[{rows};1H\x1b[7m{status:<cols$}\x1b[27m\x1b8"
            );
        }
        if line % 50 == 49 {
            // Back a few lines: reverse index at the region's top scrolls it down.
            out.push_str("\x1b[2;1H");
            for back in 0..3 {
                out.push_str("\x1bM\x1b[K");
                out.extend(ascii(line + back, dice.within(10, cols - 1)));
                out.push('\r');
            }
            let _ = write!(out, "\x1b[{bottom};1H");
        }
        let width = dice.below(cols);
        if line % 3 == 0 {
            out.push_str("\x1b[33m");
            out.extend(ascii(line, width));
            out.push_str("\x1b[39m");
        } else {
            out.extend(ascii(line, width));
        }
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: u16 = 120;
    const ROWS: u16 = 40;

    /// Columns a character takes, for the characters the generators use.
    fn width(c: char) -> usize {
        match c {
            '\u{300}'..='\u{36f}' => 0,
            c if WIDE.contains(&c) => 2,
            _ => 1,
        }
    }

    /// Where wide characters start, by column, in printable text written from column 0 with
    /// autowrap on: (ended exactly at the margin, started on the last column).
    fn wide_at_margin(text: &str, cols: usize) -> (usize, usize) {
        let (mut col, mut ends, mut last) = (0, 0, 0);
        for c in text.chars() {
            match c {
                '\r' => col = 0,
                '\n' => {}
                c => {
                    let w = width(c);
                    if w == 2 && col == cols - 1 {
                        last += 1;
                    }
                    if col + w > cols {
                        col = 0;
                    }
                    col += w;
                    if w == 2 && col == cols {
                        ends += 1;
                    }
                }
            }
        }
        (ends, last)
    }

    /// `text` without its CSI sequences and their final bytes.
    fn strip_escapes(text: &str) -> String {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                if chars.next() == Some('[') {
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() {
                            break;
                        }
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    #[test]
    fn every_period_is_made_the_same_each_time() {
        assert_eq!(sgr(COLS), sgr(COLS));
        assert_eq!(redraw(COLS), redraw(COLS));
        assert_eq!(alt(COLS, ROWS), alt(COLS, ROWS));
        assert_eq!(cjk(COLS), cjk(COLS));
        assert_eq!(scroll(COLS, ROWS), scroll(COLS, ROWS));
    }

    #[test]
    fn wrapped_is_one_run_with_no_line_end_or_control() {
        let w = wrapped();
        assert!(w.len() > 64 * 1024);
        assert!(w.bytes().all(|b| b.is_ascii_graphic() || b == b' '));
    }

    #[test]
    fn sgr_changes_style_every_few_characters_of_every_kind() {
        let s = sgr(COLS);
        for kind in [
            "\x1b[38;5;",
            "\x1b[48;5;",
            "\x1b[38;2;",
            "\x1b[48;2;",
            "\x1b[1m",
            "\x1b[22m",
            "\x1b[3m",
            "\x1b[23m",
            "\x1b[4m",
            "\x1b[24m",
            "\x1b[31m",
        ] {
            assert!(s.contains(kind), "no {kind:?}");
        }
        // Runs are short: at least one change per 8 printable characters.
        let changes = s.matches('\x1b').count();
        let printable = strip_escapes(&s)
            .chars()
            .filter(|c| !c.is_control())
            .count();
        assert!(
            changes * 8 >= printable,
            "{changes} changes for {printable} characters"
        );
        for line in s.split("\r\n").filter(|l| !l.is_empty()) {
            assert!(line.ends_with("\x1b[0m"), "a line leaves its style on");
        }
    }

    #[test]
    fn redraw_erases_its_area_and_changes_spinner_and_counter() {
        let r = redraw(COLS);
        let erase = "\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b[G";
        assert!(r.starts_with(erase));
        let frames: Vec<&str> = r.split(erase).skip(1).collect();
        assert_eq!(frames.len(), 1000);
        // Every frame writes the area's three lines; some write a log line above it first.
        for f in &frames {
            let lines = f.matches("\r\n").count();
            assert!(lines == STATUS_LINES || lines == STATUS_LINES + 1, "{f:?}");
        }
        assert!(frames.iter().filter(|f| f.contains('⏺')).count() > 100);
        assert_ne!(frames[1], frames[2]);
        assert!(frames[1].contains(SPINNER[1]) && frames[2].contains(SPINNER[2]));
    }

    #[test]
    fn alt_enters_the_alternate_screen_once_and_redraws_every_row() {
        let (prelude, period) = (alt_prelude(), alt(COLS, ROWS));
        assert!(prelude.contains("\x1b[?1049h"));
        assert!(
            !period.contains("\x1b[?1049"),
            "entered once, in the prelude"
        );
        let frames = period.matches("\x1b[H").count();
        assert_eq!(frames, 30);
        for row in 1..=ROWS {
            assert_eq!(period.matches(&format!("\x1b[{row};1H")).count(), frames);
        }
        // No line ends at all: every row but the blank one is written to the full width.
        assert!(!period.contains('\n'));
        for row in period
            .split("\x1b[H")
            .nth(1)
            .expect("a frame")
            .split(";1H")
            .skip(1)
        {
            let text = strip_escapes(row);
            assert!(
                text.is_empty() || text.chars().count() == usize::from(COLS),
                "{text:?}"
            );
        }
    }

    #[test]
    fn cjk_puts_wide_characters_at_the_margin_and_on_the_last_column() {
        let c = cjk(COLS);
        let (ends, last) = wide_at_margin(&c, usize::from(COLS));
        assert!(ends > 100, "{ends} wide characters end at the margin");
        assert!(
            last > 100,
            "{last} wide characters start on the last column"
        );
        assert!(c.contains("e\u{301}"));
        // Every line is long enough to wrap.
        for line in c.split("\r\n").filter(|l| !l.is_empty()) {
            assert!(line.chars().map(width).sum::<usize>() > usize::from(COLS));
        }
    }

    #[test]
    fn scroll_sets_a_region_between_header_and_footer() {
        let s = scroll(COLS, ROWS);
        assert!(s.starts_with("\x1b[r\x1b[1;1H\x1b[7m"));
        assert!(s.contains("\x1b[40;1H\x1b[7m"));
        assert_eq!(s.matches("\x1b[2;39r").count(), 1);
        assert!(s.contains("\x1bM"), "scrolls back now and then");
        assert!(s.matches("\r\n").count() >= 2000);
    }

    #[test]
    fn no_period_is_empty_and_each_fits_a_replay_file() {
        for p in [
            wrapped(),
            sgr(COLS),
            redraw(COLS),
            alt(COLS, ROWS),
            cjk(COLS),
            scroll(COLS, ROWS),
        ] {
            assert!(p.len() > 32 * 1024 && p.len() < 1 << 20, "{}", p.len());
        }
    }
}
