//! The screen model's fidelity harness: the model's repaint, checked against an independent
//! emulator, xterm.js (headless, with the Unicode 11 widths the browser page loads).
//!
//! For a stream S at a size, the model is fed S in odd-sized chunks (so sequences and UTF-8
//! split as they do between PTY reads) and asked for its repaint R. The rule: xterm.js fed S
//! shows exactly what xterm.js fed R shows, cell for cell, attribute for attribute, with the
//! same cursor, buffer, modes and title. Then for each continuation probe P
//! ([`probes`]), xterm.js fed S+P shows what it shows fed R+P, which catches state the
//! screen hides but later output depends on (margins, tab stops, charsets, the saved cursor...).
//!
//! Every (stream, probe) pair prints `identical` or `DIFFERS` with the first difference, and
//! any difference fails the test after all are printed. Modules: [`reference`] runs xterm.js,
//! [`compare`] says where two answers part, [`corpus`] holds the named streams, [`generator`]
//! the random ones.
//!
//! Needs node and `npm ci --prefix tests/screen-reference`; without them the tests skip
//! (`reference::available`).

mod compare;
mod corpus;
mod generator;
mod probes;
mod reference;

use atc_screen::Terminal;
use reference::{Case, Step};

/// A stream of output for a terminal starting at `cols`×`rows`.
pub struct Stream {
    pub name: String,
    pub cols: u16,
    pub rows: u16,
    pub steps: Vec<Step>,
}

/// Bytes that stand for a stream on a fresh terminal, and the size that terminal has.
type Repaint = fn(&Stream) -> (Vec<u8>, u16, u16);

/// The model's repaint after `stream`, and the size it ends at.
fn model_repaint(stream: &Stream) -> (Vec<u8>, u16, u16) {
    let (mut cols, mut rows) = (stream.cols, stream.rows);
    let mut model = Terminal::new(cols, rows);
    // Alternating chunk sizes, both odd and neither a divisor of the other, put the splits
    // at ever different places in sequences and characters.
    let mut sizes = [7, 397].into_iter().cycle();
    for step in &stream.steps {
        match step {
            Step::Write(bytes) => {
                let mut rest = &bytes[..];
                while !rest.is_empty() {
                    let n = sizes.next().unwrap_or(7).min(rest.len());
                    model.process(&rest[..n]);
                    rest = &rest[n..];
                }
            }
            Step::Resize { cols: c, rows: r } => {
                model.resize(*c, *r);
                (cols, rows) = (*c, *r);
            }
        }
    }
    (model.repaint(), cols, rows)
}

/// One comparison: the reference after the stream (plus a probe) against the reference after
/// the repaint (plus the same probe).
struct Pair {
    stream: usize,
    probe: &'static str,
}

/// Checks every stream with every probe and prints a line per pair; fails if any differs.
fn check(streams: &[Stream], repaint: Repaint) {
    let mut cases = Vec::new();
    let mut pairs = Vec::new();
    for (i, stream) in streams.iter().enumerate() {
        let (repaint, cols, rows) = repaint(stream);
        let mut probes = vec![("", Vec::new())];
        probes.extend(probes::probes(rows));
        for (probe, bytes) in probes {
            let mut after_stream = stream.steps.clone();
            let mut after_repaint = vec![Step::Write(repaint.clone())];
            if !bytes.is_empty() {
                after_stream.push(Step::Write(bytes.clone()));
                after_repaint.push(Step::Write(bytes));
            }
            cases.push(Case {
                id: format!("{} +{probe} stream", stream.name),
                cols: stream.cols,
                rows: stream.rows,
                steps: after_stream,
            });
            cases.push(Case {
                id: format!("{} +{probe} repaint", stream.name),
                cols,
                rows,
                steps: after_repaint,
            });
            pairs.push(Pair { stream: i, probe });
        }
    }

    let answers = reference::observe(&cases);
    let mut differing = 0;
    let mut known_differing = 0;
    let mut known_present = std::collections::BTreeSet::new();
    let mut known_seen = std::collections::BTreeSet::new();
    let mut streams_differing = Vec::new();
    for (pair, answer) in pairs.iter().zip(answers.chunks(2)) {
        let name = &streams[pair.stream].name;
        let probe = if pair.probe.is_empty() {
            String::new()
        } else {
            format!(" +{}", pair.probe)
        };
        let known = KNOWN_DIFFERENCES
            .iter()
            .find(|(known, _)| name.starts_with(known));
        if let Some((prefix, _)) = known {
            known_present.insert(*prefix);
        }
        match (compare::difference(&answer[0], &answer[1]), known) {
            (None, _) => println!("identical  {name}{probe}"),
            (Some(how), Some((prefix, why))) => {
                known_differing += 1;
                known_seen.insert(*prefix);
                println!("KNOWN      {name}{probe}: {how} ({why})");
            }
            (Some(how), None) => {
                differing += 1;
                if streams_differing.last() != Some(&pair.stream) {
                    streams_differing.push(pair.stream);
                }
                println!("DIFFERS    {name}{probe}: {how}");
            }
        }
    }
    // A known difference that no longer shows must leave the list, so it says only what is true.
    for prefix in known_present.difference(&known_seen) {
        differing += 1;
        println!("FIXED      {prefix}: remove it from KNOWN_DIFFERENCES");
    }
    println!("{known_differing} pairs differ as KNOWN_DIFFERENCES says they do");
    println!(
        "{} of {} (stream, probe) pairs identical; {} of {} streams differ somewhere",
        pairs.len() - differing - known_differing,
        pairs.len(),
        streams_differing.len(),
        streams.len()
    );
    assert_eq!(
        differing, 0,
        "{differing} (stream, probe) pairs differ between xterm.js fed the stream and fed the \
         model's repaint (lines marked DIFFERS above; `ATC_FIDELITY_SEED=<seed>` replays a \
         random stream alone)"
    );
}

/// Streams (by name prefix) the model is known to show otherwise than xterm.js, with why. Each
/// is reported as KNOWN; one that starts to agree fails the test until its entry goes.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    (
        "resize-alt-screen-narrower-then-wider",
        "xterm.js does not cut the alternate screen's rows on a narrower resize, so a wider one \
         shows the cut cells again; the model cuts them",
    ),
    (
        "random seed=0xa7c5c4ee000000f7",
        "a pending wrap under a pen only DECRC can make: restoring moves the cursor, and \
         printing the wrap again changes the pen",
    ),
];

#[test]
fn a_repaint_shows_in_xterm_js_what_each_named_stream_showed() {
    if !reference::available() {
        return;
    }
    check(&corpus::streams(), model_repaint);
}

/// How many random streams a run checks, and the seed the first is drawn from.
const RANDOM_STREAMS: u64 = 300;
const FIRST_SEED: u64 = 0xA7C5_C4EE_0000_0000;

#[test]
fn a_repaint_shows_in_xterm_js_what_each_random_stream_showed() {
    if !reference::available() {
        return;
    }
    // `ATC_FIDELITY_SEED=0x...` replays the one stream a failure printed.
    let seeds: Vec<u64> = match std::env::var("ATC_FIDELITY_SEED") {
        Ok(seed) => {
            let digits = seed.trim_start_matches("0x");
            vec![u64::from_str_radix(digits, 16).expect("ATC_FIDELITY_SEED in hex")]
        }
        Err(_) => (0..RANDOM_STREAMS).map(|i| FIRST_SEED + i).collect(),
    };
    let streams: Vec<Stream> = seeds.into_iter().map(generator::stream).collect();
    check(&streams, model_repaint);
}

/// The harness itself, with no model involved: xterm.js sees two ways of writing the same
/// plain text alike, and faint text apart from plain. This one runs in every `cargo test`, so
/// a broken reference install shows apart from a model's difference.
#[test]
fn the_reference_sees_the_same_text_alike_and_faint_apart() {
    if !reference::available() {
        return;
    }
    let case = |id: &str, bytes: &[u8]| Case {
        id: id.into(),
        cols: 20,
        rows: 6,
        steps: vec![Step::Write(bytes.to_vec())],
    };
    let answers = reference::observe(&[
        case("plain", b"hello\r\nworld"),
        case("moved", b"\x1b[2;1Hworld\x1b[1;1Hhello\x1b[2;6H"),
        case("faint", b"\x1b[2mhello\x1b[m\r\nworld"),
    ]);
    assert_eq!(compare::difference(&answers[0], &answers[1]), None);
    let faint = compare::difference(&answers[0], &answers[2]).expect("faint differs");
    assert!(
        faint.starts_with("row 0 col 0: faint: stream false / repaint true"),
        "{faint}"
    );
}

/// The rule holds when the "repaint" is the stream itself, for every named stream without a
/// resize and for a slice of the random ones: so a difference the tests above report is the
/// model's, not xterm.js answering the same bytes two ways or a probe that no repaint could
/// satisfy.
#[test]
fn the_stream_itself_passes_for_its_own_repaint() {
    if !reference::available() {
        return;
    }
    fn itself(stream: &Stream) -> (Vec<u8>, u16, u16) {
        let mut bytes = Vec::new();
        for step in &stream.steps {
            match step {
                Step::Write(b) => bytes.extend_from_slice(b),
                Step::Resize { .. } => unreachable!("streams with a resize are left out"),
            }
        }
        (bytes, stream.cols, stream.rows)
    }
    let mut streams: Vec<Stream> = corpus::streams()
        .into_iter()
        .filter(|s| s.steps.iter().all(|step| matches!(step, Step::Write(_))))
        .collect();
    streams.extend((0..30).map(|i| generator::stream(FIRST_SEED + i)));
    check(&streams, itself);
}
