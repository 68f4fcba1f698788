//! Continuation probes: output written after a stream to bring out state the screen does not
//! show but the next bytes depend on. A repaint has to carry that state too, or the program
//! that keeps writing after a client attaches draws something else there than it would have.
//! Each probe is checked on its own, after the stream and after the repaint.

/// `(name, bytes)` for every probe, for a terminal `rows` high.
pub fn probes(rows: u16) -> Vec<(&'static str, Vec<u8>)> {
    let mut scroll = Vec::new();
    for i in 0..=rows {
        scroll.extend_from_slice(format!("\r\nscroll {i}").as_bytes());
    }
    let mut tabs = b"\r".to_vec();
    for i in 0..20 {
        tabs.extend_from_slice(format!("\t{}", i % 10).as_bytes());
    }
    vec![
        // The main screen kept under the alternate one (and, on the main screen, the cursor
        // 1049 saved).
        ("leave-alt", b"\x1b[?1049l".to_vec()),
        // Line feeds from the cursor down: the scroll region's margins, and the pen the
        // scrolled-in text takes.
        ("scroll", scroll),
        // Tab stops after HTS/TBC changed them.
        ("tabs", tabs),
        // Line-drawing letters under the G0 and G1 designations and the shift in force.
        ("charset", b"qqqx\x0eqqx\x0fqx".to_vec()),
        // The pen (SGR) and whether a wrap is pending.
        ("pen", b"pen".to_vec()),
        // Absolute moves, which origin mode makes relative to the scroll region.
        ("origin", b"\x1b[1;1Ho\x1b[99;1Hr".to_vec()),
        // Text at the right margin: wraps, or overwrites the last column under `ESC[?7l`.
        ("right-margin", b"\x1b[999Cabc".to_vec()),
        // The cursor `ESC 7` saved: position, pen, origin mode and charsets.
        ("restore", b"\x1b8@@".to_vec()),
        // Text at the start of the top row: inserted under insert mode, written over without.
        ("insert", b"\x1b[H\x1b[1Gins".to_vec()),
    ]
}
