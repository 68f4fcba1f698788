//! The named corpus: one short stream for each shape of output the screen model has to carry
//! (the kinds agents write, and each SGR attribute and mode on its own), each at a small and a
//! usual terminal size, plus the recordings of real Claude Code and Codex sessions cut at
//! several points.
//!
//! A shape is written against the size it runs at (a wide character at the last column is at
//! the last column of either), so the same shape exercises both.

use std::path::PathBuf;

use crate::reference::Step;
use crate::Stream;

/// The sizes every shape runs at.
const SIZES: [(u16, u16); 2] = [(20, 6), (80, 24)];

/// `(name, bytes for cols×rows)` for every shape.
type Shape = (&'static str, fn(u16, u16) -> String);

fn lines(n: usize, f: impl Fn(usize) -> String) -> String {
    (0..n).map(f).collect::<Vec<_>>().join("\r\n")
}

const SHAPES: &[Shape] = &[
    ("plain-lines", |_, _| {
        lines(4, |i| format!("line {i}: plain text"))
    }),
    ("plain-lines-scrolling", |_, rows| {
        lines(usize::from(rows) * 2, |i| format!("line {i}"))
    }),
    ("long-wrapped-run", |cols, _| {
        ('a'..='z')
            .cycle()
            .take(usize::from(cols) * 3 + 5)
            .collect()
    }),
    ("pending-wrap", |cols, _| "x".repeat(usize::from(cols))),
    ("sgr-16-colours", |_, _| {
        lines(4, |i| {
            let fg = [31, 32, 93, 97][i];
            let bg = [40, 44, 101, 107][i];
            format!("\x1b[{fg};{bg}mfg {fg} bg {bg}\x1b[39mdefault fg\x1b[0m after")
        })
    }),
    ("sgr-256-colours", |_, _| {
        lines(4, |i| {
            let n = [1, 17, 128, 255][i];
            format!(
                "\x1b[38;5;{n}m256 fg {n}\x1b[48;5;{}m bg\x1b[49m back\x1b[0m",
                255 - n
            )
        })
    }),
    ("sgr-truecolour", |_, _| {
        lines(3, |i| {
            let (r, g, b) = [(255, 0, 0), (1, 2, 3), (18, 52, 86)][i];
            format!("\x1b[38;2;{r};{g};{b}mrgb\x1b[48;2;{b};{g};{r}m both\x1b[0m plain")
        })
    }),
    ("sgr-colour-runs", |_, _| {
        let mut s = String::new();
        for i in 0..24 {
            s.push_str(&format!("\x1b[{};{}m{i:02}", 30 + i % 8, 40 + (i + 3) % 8));
            s.push_str(&format!(
                "\x1b[38;5;{};48;2;{};0;{}m#",
                i * 9,
                i * 10,
                240 - i * 10
            ));
        }
        s + "\x1b[m"
    }),
    ("ink-status-redraw", |_, _| {
        let mut s = String::from("> a prompt\r\n\r\nsome answer text\r\n");
        let status = |n: usize| {
            format!(
                "\x1b[38;5;244m╭────────╮\x1b[39m\r\n\
                 \x1b[1;36m│ step {n} \x1b[22;2m…\x1b[0m\r\n\
                 \x1b[38;2;120;120;120m╰────────╯\x1b[39m"
            )
        };
        s.push_str(&status(0));
        for n in 1..6 {
            // Ink erases its previous frame line by line from the bottom, then draws again.
            s.push_str("\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K\x1b[G");
            s.push_str(&status(n));
        }
        s
    }),
    ("alt-screen-full-redraws", |cols, rows| {
        let mut s = String::from("main screen text\r\nsecond line");
        s.push_str("\x1b[?1049h");
        for frame in 0..3 {
            s.push_str("\x1b[H\x1b[2J");
            for y in 1..=rows {
                let text = format!("frame {frame} row {y}");
                let text = &text[..text.len().min(usize::from(cols))];
                s.push_str(&format!("\x1b[{y};1H\x1b[3{}m{text}", y % 8));
            }
            s.push_str("\x1b[0m\x1b[2;3H");
        }
        s
    }),
    ("alt-screen-47", |_, _| {
        "under\x1b[?47hon 47\x1b[?1047lback\x1b[?1047hagain".into()
    }),
    ("wide-cjk-and-combining", |_, _| {
        "中文字符\r\n日本語 한국어\r\n\
         e\u{301}a\u{308}n\u{303} cafe\u{301}\r\n中\u{301}x"
            .into()
    }),
    ("wide-at-last-column", |cols, _| {
        format!(
            "{}中after\r\n{}日",
            "x".repeat(usize::from(cols) - 1),
            "y".repeat(usize::from(cols) - 2)
        )
    }),
    ("emoji", |_, _| "ok 😀 🚀 done ✅\r\n⭐ 🎉 👍 🔥".into()),
    ("scroll-region", |cols, rows| {
        let footer = "footer"
            .repeat(usize::from(cols))
            .chars()
            .take(usize::from(cols))
            .collect::<String>();
        let mut s = format!(
            "\x1b[1;1H\x1b[7mheader\x1b[0m\x1b[{rows};1H{footer}\x1b[2;{}r\x1b[{};1H",
            rows - 1,
            rows - 1
        );
        for i in 0..rows * 2 {
            s.push_str(&format!("\r\n\x1b[3{}mscrolled {i}\x1b[0m", i % 8));
        }
        s
    }),
    ("scroll-up-down-in-region", |_, rows| {
        format!(
            "{}\x1b[2;{}r\x1b[2S\x1b[1T\x1b[2;1H\x1bM\x1bMri\x1b[{};1H\x1bDind\x1bEnel",
            lines(usize::from(rows), |i| format!("row {i}")),
            rows - 1,
            rows - 1
        )
    }),
    ("bold-then-faint", |_, _| {
        "\x1b[1mbold\x1b[2mboth\x1b[22mnone\r\n\
         \x1b[2mfaint\x1b[1mboth\x1b[22mplain\r\n\
         \x1b[1;2mbold+faint\x1b[0m"
            .into()
    }),
    ("edit-under-background", |_, rows| {
        let text = lines(usize::from(rows) - 1, |i| format!("{i}abcdefghijklmnop"));
        format!(
            "{text}\x1b[44m\x1b[1;3H\x1b[2@\x1b[2;3H\x1b[3P\x1b[3;1H\x1b[L\
             \x1b[4;1H\x1b[M\x1b[2;2H\x1b[4X\x1b[3;9H\x1b[K\x1b[0m"
        )
    }),
    ("erase-variants", |_, rows| {
        let text = lines(usize::from(rows), |i| format!("{i}abcdefghijklmnop"));
        format!(
            "{text}\x1b[41m\x1b[2;5H\x1b[1K\x1b[3;5H\x1b[0K\x1b[4;4H\x1b[1J\x1b[0m\x1b[5;8H\x1b[J"
        )
    }),
    ("line-drawing-g0", |_, _| {
        "\x1b(0lqqqk\r\nx   x\r\nmqqqj\x1b(B ok".into()
    }),
    ("line-drawing-g0-left-on", |_, _| "text \x1b(0lqk".into()),
    ("line-drawing-g1-shift", |_, _| {
        "\x1b)0\x0elqk\x0f text \x0eqqq\x0f done".into()
    }),
    ("line-drawing-g1-left-shifted", |_, _| {
        "\x1b)0a\x0elqk".into()
    }),
    ("insert-mode", |_, _| "hello world\r\x1b[4hXX".into()),
    ("insert-mode-off-again", |_, _| {
        "hello world\r\x1b[4hXX\x1b[4lYY".into()
    }),
    ("tab-stops-default", |_, _| "a\tb\tc\r\n\td".into()),
    ("tab-stops-changed", |_, _| {
        // Clears all, sets 5 and 13, clears 13 again with TBC 0 and sets 9; CHT and CBT move
        // over the new stops.
        "\x1b[3g\x1b[1;5H\x1bH\x1b[1;13H\x1bH\x1b[g\x1b[1;9H\x1bH\r\ta\tb\r\n\x1b[2Ic\x1b[Zd".into()
    }),
    ("sgr-attributes", |_, _| {
        [
            "\x1b[9mstrike\x1b[29m",
            "\x1b[53mover\x1b[55m",
            "\x1b[5mblink\x1b[25m",
            "\x1b[8mhidden\x1b[28m",
            "\x1b[7minverse\x1b[27m",
            "\x1b[3mitalic\x1b[23m",
            "\x1b[4munder\x1b[24m",
            "\x1b[4:2mdouble\x1b[4:0m",
            "\x1b[21mdouble21\x1b[24m",
            "\x1b[4:3mcurly\x1b[24m",
            "\x1b[4:4mdotted\x1b[24m",
            "\x1b[4:5mdashed\x1b[24m",
            "\x1b[4:3m\x1b[58:2::255:0:128mcurly-rgb\x1b[59mdefault-ul\x1b[0m",
            "\x1b[4m\x1b[58;5;196mul-256\x1b[0m",
            "\x1b[4m\x1b[58;2;1;2;3mul-rgb-semi\x1b[0m",
        ]
        .join(" ")
    }),
    ("pen-left-set", |_, _| "\x1b[1;3;4;31;44mpen on".into()),
    ("pen-left-rgb-underline", |_, _| {
        "\x1b[38;2;9;8;7;4:3;58;5;21mpen".into()
    }),
    ("origin-mode", |_, rows| {
        format!("\x1b[2;{}r\x1b[?6h\x1b[1;1Hin region\x1b[3;3Hx", rows - 1)
    }),
    ("origin-mode-reset", |_, rows| {
        format!(
            "\x1b[2;{}r\x1b[?6h\x1b[1;1Hin\x1b[?6l\x1b[1;1Hout",
            rows - 1
        )
    }),
    ("wrap-off", |cols, _| {
        format!(
            "\x1b[?7l{}",
            ('a'..='z')
                .cycle()
                .take(usize::from(cols) + 7)
                .collect::<String>()
        )
    }),
    ("cursor-hidden", |_, _| "\x1b[?25lhidden cursor".into()),
    ("cursor-shape", |_, _| "\x1b[5 qbar".into()),
    ("bracketed-paste", |_, _| "\x1b[?2004h$ ".into()),
    ("mouse-1000", |_, _| "\x1b[?1000h".into()),
    ("mouse-1002-sgr", |_, _| "\x1b[?1002h\x1b[?1006h".into()),
    ("mouse-1003-sgr", |_, _| "\x1b[?1003;1006h".into()),
    ("focus-events", |_, _| "\x1b[?1004h".into()),
    ("app-cursor-keys", |_, _| "\x1b[?1h".into()),
    ("app-keypad", |_, _| "\x1b=".into()),
    ("title-osc0", |_, _| "\x1b]0;a title\x07text".into()),
    ("title-osc2-st", |_, _| {
        "\x1b]2;other title\x1b\\text".into()
    }),
    ("saved-cursor", |_, _| {
        "\x1b[3;5H\x1b[1;32m\x1b7\x1b[0m\x1b[1;1Hmoved".into()
    }),
    ("saved-cursor-with-charset-and-origin", |_, rows| {
        format!(
            "\x1b[2;{}r\x1b[?6h\x1b(0\x1b[2;2H\x1b7\x1b(B\x1b[?6l\x1b[rplain",
            rows - 1
        )
    }),
    ("hyperlink", |_, _| {
        "\x1b]8;;https://example.com/a\x1b\\a link\x1b]8;;\x1b\\ and not".into()
    }),
    ("reset-mid-stream", |_, _| {
        "\x1b[1;31m\x1b[?1049hjunk\x1bcclean".into()
    }),
    ("screen-alignment", |_, _| "\x1b#8".into()),
    ("repeat-char", |_, _| "ab\x1b[5b".into()),
];

/// Every shape at every size, the recordings at their cuts, and a few streams with a resize.
pub fn streams() -> Vec<Stream> {
    let mut streams = Vec::new();
    for &(cols, rows) in &SIZES {
        for (name, bytes) in SHAPES {
            streams.push(Stream {
                name: format!("{name} {cols}x{rows}"),
                cols,
                rows,
                steps: vec![Step::Write(bytes(cols, rows).into_bytes())],
            });
        }
    }
    streams.extend(resizes());
    streams.extend(recordings());
    streams
}

/// A size change between writes: xterm.js reflows the main screen's wrapped lines (not the
/// cursor's, nor the alternate screen's), trims rows from below the cursor and then from the
/// top, resets the scroll region and adds tab stops; the model must end up where it did.
fn resizes() -> Vec<Stream> {
    let text = |n: usize| ('a'..='z').cycle().take(n).collect::<String>();
    // Two-column characters, so an odd width leaves one straddling the edge.
    let wide = |n: usize| "中文字符宽".chars().cycle().take(n).collect::<String>();
    let lines = |n: usize| {
        (0..n)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\r\n")
    };
    let resize = |cols, rows| Step::Resize { cols, rows };
    let write = |s: String| Step::Write(s.into_bytes());
    let stream = |name: &str, cols, rows, steps| Stream {
        name: name.into(),
        cols,
        rows,
        steps,
    };
    vec![
        stream(
            "resize-narrower 40x10->20x10",
            40,
            10,
            vec![
                write(format!("short\r\n{}\r\nend", text(50))),
                resize(20, 10),
                write(" more".into()),
            ],
        ),
        stream(
            "resize-wider 20x10->40x10",
            20,
            10,
            vec![
                write(format!("short\r\n{}\r\nend", text(50))),
                resize(40, 10),
                write(" more".into()),
            ],
        ),
        stream(
            "resize-wider-then-narrower 20x8->45x8->20x8",
            20,
            8,
            vec![
                write(format!("{}\r\n{}\r\nend", text(45), text(30))),
                resize(45, 8),
                resize(20, 8),
                write(" more".into()),
            ],
        ),
        stream(
            "resize-narrower-cursor-at-bottom 30x6->12x6",
            30,
            6,
            vec![
                write(format!("{}\r\n{}\r\n{}", lines(3), text(40), text(25))),
                resize(12, 6),
                write("\r\nnext".into()),
            ],
        ),
        stream(
            "resize-wider-wrapped-below-cursor 10x8->25x8",
            10,
            8,
            vec![
                write(format!("top\r\n{}\r\nbelow\x1b[1;2H", text(35))),
                resize(25, 8),
                write("X".into()),
            ],
        ),
        stream(
            "resize-narrower-cursor-in-wrapped-line 30x6->10x6",
            30,
            6,
            vec![
                write(format!("{}\r\n{}\x1b[2;5H", text(20), text(45))),
                resize(10, 6),
                write("X".into()),
            ],
        ),
        // Rewrapping adds more rows than fit below the cursor: xterm.js slides its viewport
        // past the end of its rows and shows the top one again at the bottom.
        stream(
            "resize-narrower-slides-viewport 40x10->20x10",
            40,
            10,
            vec![
                write(format!("{0}\r\n{0}\r\n{0}\r\n$ ", text(80))),
                resize(20, 10),
                write("ls".into()),
            ],
        ),
        stream(
            "resize-taller 20x6->20x10",
            20,
            6,
            vec![
                write(format!("{}\r\n{}", lines(8), text(30))),
                resize(20, 10),
                write("\r\nafter".into()),
            ],
        ),
        stream(
            "resize-shorter-cursor-at-bottom 20x10->20x5",
            20,
            10,
            vec![write(lines(10)), resize(20, 5), write("\r\nafter".into())],
        ),
        stream(
            "resize-shorter-cursor-near-top 20x10->20x5",
            20,
            10,
            vec![
                write(format!("{}\x1b[3;4H", lines(10))),
                resize(20, 5),
                write("X".into()),
            ],
        ),
        stream(
            "resize-shorter-then-taller-saved-cursor 20x10->20x4->20x10",
            20,
            10,
            vec![
                write(format!("{}\x1b[9;3H\x1b7\x1b[2;1H", lines(10))),
                resize(20, 4),
                resize(20, 10),
                write("\x1b8saved".into()),
            ],
        ),
        stream(
            "resize-both 30x8->14x5",
            30,
            8,
            vec![
                write(format!("{}\r\n{}\r\n{}", lines(4), text(40), text(10))),
                resize(14, 5),
                write(" more".into()),
            ],
        ),
        stream(
            "resize-wide-chars-narrower 21x6->9x6",
            21,
            6,
            vec![
                write(format!("{}\r\nend", wide(25))),
                resize(9, 6),
                write(" more".into()),
            ],
        ),
        stream(
            "resize-wide-chars-wider 9x8->21x8",
            9,
            8,
            vec![
                write(format!("{}\r\nend", wide(16))),
                resize(21, 8),
                write(" more".into()),
            ],
        ),
        stream(
            "resize-pending-wrap 10x4->10x6",
            10,
            4,
            vec![write(text(10)), resize(10, 6), write("X".into())],
        ),
        stream(
            "resize-alt-screen 20x6->30x8",
            20,
            6,
            vec![
                write("main\x1b[?1049h\x1b[Halt row".into()),
                resize(30, 8),
                write("\x1b[8;1Hbottom".into()),
            ],
        ),
        stream(
            "resize-alt-screen-narrower-then-leave 40x8->20x6",
            40,
            8,
            vec![
                write(format!("{}\r\nkept\x1b[?1049h{}", text(60), text(50))),
                resize(20, 6),
                write("\x1b[?1049l after".into()),
            ],
        ),
        stream(
            "resize-alt-screen-wider-then-leave 20x6->40x8",
            20,
            6,
            vec![
                write(format!("{}\r\nkept\x1b[?1049h{}", text(50), text(30))),
                resize(40, 8),
                write("alt\x1b[?1049l after".into()),
            ],
        ),
        stream(
            "resize-alt-screen-narrower-then-wider 30x6->15x6->30x6",
            30,
            6,
            vec![
                write(format!("\x1b[?1049h{}", text(28))),
                resize(15, 6),
                resize(30, 6),
                write("\r\nback".into()),
            ],
        ),
        stream(
            "resize-scroll-region 20x10->30x8",
            20,
            10,
            vec![
                write(format!("{}\x1b[3;7r\x1b[5;1H", lines(9))),
                resize(30, 8),
                write("in\r\n\r\n\r\n\r\n\r\nscrolled".into()),
            ],
        ),
        stream(
            "resize-tab-stops 40x4->20x4->45x4",
            40,
            4,
            vec![
                write("\x1b[3g\x1b[1;4H\x1bH\x1b[1;11H\x1bH\x1b[1;30H\x1bH\r".into()),
                resize(20, 4),
                resize(45, 4),
                write("\ta\tb\tc\td\te\tf\tg".into()),
            ],
        ),
    ]
}

/// The recordings of real agents (`tests/agents/recordings/*.bin`, 120×40), each cut at a
/// quarter, a half, three quarters and whole. A cut is moved on to the next CSI, so it falls
/// between sequences as an attach between two reads usually does.
fn recordings() -> Vec<Stream> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/agents/recordings");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "bin"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no recordings in {}", dir.display());
    let mut streams = Vec::new();
    for path in files {
        let bytes = std::fs::read(&path).expect("read a recording");
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        for quarter in 1..=4 {
            let mut cut = bytes.len() * quarter / 4;
            while cut < bytes.len() && !bytes[cut..].starts_with(b"\x1b[") {
                cut += 1;
            }
            streams.push(Stream {
                name: format!("{name} to {cut} of {} 120x40", bytes.len()),
                cols: 120,
                rows: 40,
                steps: vec![Step::Write(bytes[..cut].to_vec())],
            });
        }
    }
    streams
}
