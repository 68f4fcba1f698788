//! The property the screen model's fuzz target (`fuzz/fuzz_targets/screen_repaint.rs`) and
//! `tests/round_trip.rs` check: whatever bytes a program prints, in whatever chunks, the model
//! takes them without panicking, and a fresh model fed only its repaint shows the same text,
//! cursor, modes, screen buffer and title. (Not yet the same repaint again: hidden state such
//! as a pen saved with a charset on a buffer not shown can still differ; issue 37's note.) (The fidelity tests hold the same repaint to
//! xterm.js, cell by cell; this property needs no node, so it runs under libFuzzer.)

use atc_screen::Terminal;

/// Runs the property on `data`: two bytes of size, one of chunk length, then the output.
pub fn repaint_round_trip(data: &[u8]) {
    let [c, r, k, rest @ ..] = data else {
        return;
    };
    let (cols, rows) = (2 + u16::from(*c % 120), 1 + u16::from(*r % 40));
    let chunk = 1 + usize::from(*k);
    let mut model = Terminal::new(cols, rows);
    for piece in rest.chunks(chunk) {
        model.process(piece);
    }
    let repaint = model.repaint();
    // A client in some state of its own before the repaint.
    let mut client = Terminal::new(cols, rows);
    client.process(b"\x1b[?1049h\x1b[5;9r\x1b[?6h\x1b[4h\x1b[?7l\x1b(0\x0e\x1b[1;4:3;58;5;3mold");
    client.process(&repaint);
    assert_eq!(client.text(), model.text(), "text and cursor");
    assert_eq!(client.modes(), model.modes(), "modes");
    assert_eq!(
        client.alternate_screen(),
        model.alternate_screen(),
        "screen buffer"
    );
    assert_eq!(client.title(), model.title(), "title");
}
