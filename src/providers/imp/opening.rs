//! Which opening a remote harness sends next (spec §5.6, impd §9.3–9.7): a pure function of
//! where the harness came from, whether impd has answered one of its openings yet, whether the
//! host reports offsets, and the cursor. [`super::outcome::decide`] says *whether* to open
//! again; this says *what* to open with. The harness builds the wire message from the choice.
//!
//! Until impd has answered once, the origin decides: a spawn sends a plain `start`; a revive
//! sends a `start` resuming its stored position (a process gone meanwhile is started anew); a
//! daemon restart attaches with `wake: false` and no resume point, so impd's replay rebuilds
//! the empty screen. Once impd has answered, every opening is a `wake: false` attach resuming
//! from the cursor, fresh (a replay under a screen reset) when there is no resume point.

use super::cursor::Cursor;

/// Where a harness came from; it decides the openings until impd answers one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A new session: its process does not exist yet.
    Spawn,
    /// A revive: continue the process an earlier harness let go of, at its stored position.
    Revive,
    /// A daemon restart: re-attach to the process the last daemon ran, which must still be
    /// this execution generation.
    Restart {
        /// The generation the last daemon recorded; `None` when it was killed after writing
        /// the spawn's row and before the process's position. The name is derived from the
        /// session id alone, so whatever runs under it is this session's process.
        generation: Option<String>,
    },
}

/// Whether impd has answered `started` to an opening of this harness yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Not yet: openings follow the origin.
    Unanswered,
    /// At least once: openings are resuming attaches.
    Answered,
}

/// The opening message's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `start` with the session name: starts the process, or joins it if it runs.
    Start,
    /// `attach` with `wake: false`: never boots or wakes the imp.
    Attach,
}

/// What the session's screen gets before the connection's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    /// Nothing: the bytes continue what the session has.
    Keep,
    /// A reset: the bytes are impd's replay of recent history.
    Reset,
}

/// The next opening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// `start` or `attach`.
    pub kind: Kind,
    /// `resumeFrom`: `(generation, offset)`, when the opening resumes.
    pub resume_from: Option<(String, u64)>,
    /// Whether the screen is reset before the connection's bytes.
    pub screen: Screen,
}

/// Chooses the next opening.
pub fn choose(origin: &Origin, progress: Progress, offsets: bool, cursor: &Cursor) -> Choice {
    let resume = || offsets.then(|| cursor.resume_from()).flatten();
    let screen_for = |resume_from: &Option<(String, u64)>| match resume_from {
        Some(_) => Screen::Keep,
        None => Screen::Reset,
    };
    match (progress, origin) {
        // Nothing to resume and nothing on the screen to clear.
        (Progress::Unanswered, Origin::Spawn) => Choice {
            kind: Kind::Start,
            resume_from: None,
            screen: Screen::Keep,
        },
        // Without a resume point the start joins or starts with a replay: clear first.
        (Progress::Unanswered, Origin::Revive) => {
            let resume_from = resume();
            Choice {
                kind: Kind::Start,
                screen: screen_for(&resume_from),
                resume_from,
            }
        }
        // A restarted daemon has an empty screen: it wants impd's replay, not a resume.
        (Progress::Unanswered, Origin::Restart { .. }) => Choice {
            kind: Kind::Attach,
            resume_from: None,
            screen: Screen::Reset,
        },
        (Progress::Answered, _) => {
            let resume_from = resume();
            Choice {
                kind: Kind::Attach,
                screen: screen_for(&resume_from),
                resume_from,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::cursor::Continuity;
    use super::*;

    fn following() -> Cursor {
        let mut c = Cursor::default();
        let mut feed = c.begin(
            Some(&Continuity {
                boot_id: "B1".into(),
                generation: "G1".into(),
                offset: 0,
                prelude: 0,
            }),
            true,
        );
        c.take(&mut feed, bytes::Bytes::from_static(b"12345"));
        c
    }

    fn restart() -> Origin {
        Origin::Restart {
            generation: Some("G1".into()),
        }
    }

    fn choice(kind: Kind, resume_from: Option<(&str, u64)>, screen: Screen) -> Choice {
        Choice {
            kind,
            resume_from: resume_from.map(|(g, o)| (g.to_string(), o)),
            screen,
        }
    }

    #[test]
    fn before_impd_answers_the_origin_decides() {
        let c = following();
        let empty = Cursor::default();
        let cases = [
            (
                Origin::Spawn,
                &empty,
                choice(Kind::Start, None, Screen::Keep),
            ),
            // A revive resumes where the last harness left off.
            (
                Origin::Revive,
                &c,
                choice(Kind::Start, Some(("G1", 5)), Screen::Keep),
            ),
            // A revive with no stored position replays under a reset.
            (
                Origin::Revive,
                &empty,
                choice(Kind::Start, None, Screen::Reset),
            ),
            // A restart never resumes, even with a position: its screen is empty.
            (restart(), &c, choice(Kind::Attach, None, Screen::Reset)),
        ];
        for (origin, cursor, want) in cases {
            assert_eq!(
                choose(&origin, Progress::Unanswered, true, cursor),
                want,
                "{origin:?}"
            );
        }
    }

    #[test]
    fn once_impd_answered_every_origin_attaches_resuming_from_the_cursor() {
        for origin in [Origin::Spawn, Origin::Revive, restart()] {
            assert_eq!(
                choose(&origin, Progress::Answered, true, &following()),
                choice(Kind::Attach, Some(("G1", 5)), Screen::Keep),
                "{origin:?}"
            );
            // No cursor (cleared after INVALID_RESUME, or none yet): a fresh attach.
            assert_eq!(
                choose(&origin, Progress::Answered, true, &Cursor::default()),
                choice(Kind::Attach, None, Screen::Reset),
                "{origin:?}"
            );
        }
    }

    #[test]
    fn a_host_without_offsets_never_resumes() {
        let c = following();
        assert_eq!(
            choose(&Origin::Revive, Progress::Unanswered, false, &c),
            choice(Kind::Start, None, Screen::Reset)
        );
        assert_eq!(
            choose(&Origin::Spawn, Progress::Answered, false, &c),
            choice(Kind::Attach, None, Screen::Reset)
        );
    }
}
