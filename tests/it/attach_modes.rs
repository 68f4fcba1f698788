//! The modes a full-screen agent sets reach a client that attaches later: a stand-in for
//! Claude Code 2.1 sits in the alternate screen with mouse tracking (1000, 1002, 1003 with
//! SGR encoding 1006), focus events (1004), bracketed paste (2004) and colour-scheme reports
//! (2031) on, and each fresh client's prelude, read by a terminal model of the test's own,
//! leaves that terminal in the same modes; modes the program turned off are off in it.

use std::collections::{BTreeMap, BTreeSet};

use atc::config::{AgentConfig, Config};
use atc_testkit::{id_of, test_config, TestDaemon};

/// The sequences Claude Code 2.1 writes when it starts.
const CLAUDE_MODES: &str =
    r"\033[?1049h\033[?1000h\033[?1002h\033[?1003h\033[?1006h\033[?1004h\033[?2004h\033[?2031h";

/// The test config with `fullscreen`: a shell that sets Claude Code's modes, says `ready`
/// on the alternate screen and then reads commands without a prompt.
fn config() -> Config {
    let mut config = test_config();
    let mut env = BTreeMap::new();
    env.insert("PS1".to_string(), String::new());
    config.agents.insert(
        "fullscreen".into(),
        AgentConfig {
            bin: "/bin/sh".into(),
            args: vec![
                "-c".into(),
                format!("printf '{CLAUDE_MODES}'; echo ready; exec /bin/sh"),
            ],
            env,
            ..Default::default()
        },
    );
    config
}

/// A client's terminal, as the test reads it: vt100, and the DEC private modes vt100 does not
/// keep, followed from the `CSI ? … h/l` it hands over.
#[derive(Default)]
struct OtherModes(BTreeSet<u16>);

impl vt100::Callbacks for OtherModes {
    fn unhandled_csi(
        &mut self,
        _: &mut vt100::Screen,
        i1: Option<u8>,
        _: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        for param in params {
            match (i1, c, param) {
                (Some(b'?'), 'h', [n]) => {
                    self.0.insert(*n);
                }
                (Some(b'?'), 'l', [n]) => {
                    self.0.remove(n);
                }
                _ => {}
            }
        }
    }
}

/// The terminal a prelude lands on.
#[derive(Clone, Copy)]
enum Terminal {
    /// A new one, every mode off: the prelude must set what is on.
    Fresh,
    /// One left with every mode on by an earlier attach: the prelude must reset what is off.
    LeftWithEveryModeOn,
}

/// What a terminal that took `prelude` sends its program and shows, in a line per mode.
fn modes_after(terminal_was: Terminal, prelude: &[u8]) -> BTreeMap<&'static str, String> {
    let mut terminal = vt100::Parser::new_with_callbacks(
        std::num::NonZeroU16::new(24).unwrap(),
        std::num::NonZeroU16::new(80).unwrap(),
        0,
        OtherModes::default(),
    );
    if let Terminal::LeftWithEveryModeOn = terminal_was {
        terminal.process(
            b"\x1b[?1049h\x1b[?1003h\x1b[?1006h\x1b[?1004h\x1b[?2004h\x1b[?2031h\x1b[?1h\x1b[?25l",
        );
    }
    terminal.process(prelude);
    let screen = terminal.screen();
    let on = |n: u16| terminal.callbacks().0.contains(&n).to_string();
    BTreeMap::from([
        ("alternate screen", screen.alternate_screen().to_string()),
        (
            "mouse tracking",
            format!("{:?}", screen.mouse_protocol_mode()),
        ),
        (
            "mouse encoding",
            format!("{:?}", screen.mouse_protocol_encoding()),
        ),
        ("bracketed paste", screen.bracketed_paste().to_string()),
        ("cursor keys", screen.application_cursor().to_string()),
        ("cursor hidden", screen.hide_cursor().to_string()),
        ("focus events", on(1004)),
        ("colour-scheme reports", on(2031)),
        ("text", screen.contents().trim().to_string()),
    ])
}

fn expected(pairs: [(&'static str, &str); 9]) -> BTreeMap<&'static str, String> {
    pairs.into_iter().map(|(k, v)| (k, v.to_string())).collect()
}

fn says(prelude: &[u8], sequence: &str) -> bool {
    prelude
        .windows(sequence.len())
        .any(|w| w == sequence.as_bytes())
}

/// Claude Code's modes, all on, as a terminal that took the prelude has them.
fn all_on(text: &str) -> BTreeMap<&'static str, String> {
    expected([
        ("alternate screen", "true"),
        // 1000, 1002 and 1003 are one setting; the last set is in effect.
        ("mouse tracking", "AnyMotion"),
        ("mouse encoding", "Sgr"),
        ("bracketed paste", "true"),
        ("cursor keys", "false"),
        ("cursor hidden", "false"),
        ("focus events", "true"),
        ("colour-scheme reports", "true"),
        ("text", text),
    ])
}

#[actix_rt::test]
async fn a_fresh_client_gets_the_modes_of_a_full_screen_agent_and_not_the_ones_it_turned_off() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config()).await;
    let id = id_of(&d.spawn("fullscreen").await);
    d.wait_screen(&id, "ready").await;

    let (mut first, attached, prelude) = d.attach(&id, "cols=80&rows=24").await;
    assert_eq!(attached["replay"], "screen");
    for sequence in [
        "\x1b[?1049h",
        "\x1b[?1003h",
        "\x1b[?1006h",
        "\x1b[?1004h",
        "\x1b[?2004h",
        "\x1b[?2031h",
    ] {
        assert!(
            says(&prelude, sequence),
            "{} missing from the prelude {}",
            sequence.escape_debug(),
            prelude.escape_ascii()
        );
    }
    assert_eq!(modes_after(Terminal::Fresh, &prelude), all_on("ready"));

    // The program turns mouse tracking, focus events and colour-scheme reports off, the way
    // a program leaving them resets each mode it set; the alternate screen, the encoding
    // and bracketed paste stay.
    first
        .send_binary(
            b"printf '\\033[?1003l\\033[?1002l\\033[?1000l\\033[?1004l\\033[?2031l'; \
              echo off-$((1+1))\r",
        )
        .await;
    d.wait_screen(&id, "off-2").await;
    first.close().await;

    let (_later, _, prelude) = d.attach(&id, "cols=80&rows=24").await;
    for sequence in ["\x1b[?1003h", "\x1b[?1004h", "\x1b[?2031h"] {
        assert!(
            !says(&prelude, sequence),
            "{} still in the prelude {}",
            sequence.escape_debug(),
            prelude.escape_ascii()
        );
    }
    let modes = modes_after(Terminal::LeftWithEveryModeOn, &prelude);
    let mut off = all_on(modes["text"].as_str());
    off.insert("mouse tracking", "None".into());
    off.insert("focus events", "false".into());
    off.insert("colour-scheme reports", "false".into());
    assert_eq!(modes, off);
    assert!(modes["text"].contains("off-2"), "{modes:?}");
    d.stop().await;
}

#[actix_rt::test]
async fn after_a_daemon_restart_the_revived_agent_s_modes_reach_a_fresh_client() {
    // The daemon keeps no screen across a restart: the session revives, its program sets its
    // modes again, and the screen model built from that output gives them to a client.
    let tmp = tempfile::tempdir().unwrap();
    let d1 = TestDaemon::start_on(tmp.path(), config()).await;
    let id = id_of(&d1.spawn("fullscreen").await);
    d1.wait_screen(&id, "ready").await;
    d1.stop().await;

    let d2 = TestDaemon::start_on(tmp.path(), config()).await;
    let (status, body) = d2
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d2.wait_screen(&id, "ready").await;
    let (_ws, attached, prelude) = d2.attach(&id, "cols=80&rows=24").await;
    assert_eq!(attached["replay"], "screen");
    assert_eq!(modes_after(Terminal::Fresh, &prelude), all_on("ready"));
    d2.stop().await;
}
