//! Unit tests of [`super::HarnessState`]: every row of the outcome table from a started
//! connection and from a first opening impd never answered, for each origin, plus the
//! `started` answers (gap, generation changes, a restart's check), stale reports, and input.

use std::rc::Rc;

use super::*;
use crate::providers::imp::input_queue::tests::FakeLink;
use crate::providers::imp::input_queue::INPUT_BACKLOG_BYTES;
use impd_client::{ImpdCode, Output};
use serde_json::{json, Value};

type State = HarnessState<Rc<FakeLink>>;

const DELAYS: [Duration; 2] = [Duration::from_millis(10), Duration::from_millis(20)];

fn size(cols: u16, rows: u16) -> TermSize {
    TermSize { cols, rows }
}

fn params() -> StartParams {
    StartParams {
        imp: "imp-1".into(),
        session: "s-1".into(),
        argv: vec!["sh".into()],
        env: BTreeMap::new(),
        cwd: "/work".into(),
        require_broker: false,
    }
}

fn position(generation: &str, offset: u64) -> RemotePosition {
    RemotePosition {
        boot_id: "B1".into(),
        generation: generation.into(),
        offset,
    }
}

fn restart() -> Origin {
    Origin::Restart {
        generation: Some("G1".into()),
    }
}

/// A fresh harness of `origin`; a revive or restart has position G1 at 5.
fn state(origin: &Origin) -> State {
    let stored = position("G1", 5);
    let position = (*origin != Origin::Spawn).then_some(&stored);
    let mut s = State::new(
        params(),
        origin.clone(),
        size(80, 24),
        position,
        DELAYS.to_vec(),
    );
    if !matches!(origin, Origin::Restart { .. }) {
        assert!(!s.lease_held(true));
    }
    s
}

fn output(generation: &str, offset: u64, resume: Option<Resume>) -> Output {
    Output {
        continuity: "offsets".into(),
        boot_id: "B1".into(),
        execution_generation: generation.into(),
        end: offset,
        offset,
        resume,
        ..Default::default()
    }
}

fn answer(output: Option<Output>) -> Started {
    Started {
        pid: 7,
        session: Some("s-1".into()),
        created: Some(false),
        output,
    }
}

/// The attempt and opening of the `Open` among `effects`.
fn opened(effects: &[Effect]) -> (u64, Opening) {
    effects
        .iter()
        .find_map(|e| match e {
            Effect::Open { attempt, opening } => Some((*attempt, opening.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no Open in {effects:?}"))
}

/// An opening as `(kind, resumeFrom)`.
fn shape(opening: &Opening) -> (Kind, Option<(String, u64)>) {
    match opening {
        Opening::Start(s) => (
            Kind::Start,
            s.resume_from
                .as_ref()
                .map(|r| (r.execution_generation.clone(), r.offset)),
        ),
        Opening::Attach(a) => {
            assert!(!a.wake, "an attach never wakes the imp");
            (
                Kind::Attach,
                a.resume_from
                    .as_ref()
                    .map(|r| (r.execution_generation.clone(), r.offset)),
            )
        }
    }
}

/// What impd answers each origin's first opening when all is well.
fn good_answer(origin: &Origin) -> Output {
    match origin {
        Origin::Spawn => output("G1", 5, None),
        Origin::Revive => output("G1", 5, Some(Resume::Exact)),
        Origin::Restart { .. } => output("G1", 5, None),
    }
}

/// A harness of `origin` with a started connection: the state, its writer, the attempt.
fn up(origin: &Origin) -> (State, Rc<FakeLink>, u64) {
    let mut s = state(origin);
    let (attempt, _) = opened(&s.open());
    let link = Rc::new(FakeLink::default());
    let effects = s.started(attempt, answer(Some(good_answer(origin))), link.clone());
    assert!(
        matches!(effects.last(), Some(Effect::Attached(Some(_)))),
        "{effects:?}"
    );
    assert_eq!(s.phase(), PhaseKind::Started);
    (s, link, attempt)
}

/// What a list of effects amounts to.
#[derive(Debug, PartialEq)]
enum Then {
    /// The harness ended with this status.
    Exit(Option<i32>, Option<i32>),
    /// The harness ended without one: its end and detail.
    End(HarnessEnd, String),
    /// A connection opens at once.
    Open {
        reattaching: bool,
        kind: Kind,
        resume: Option<(String, u64)>,
    },
    /// A connection opens after this delay.
    Later(Duration),
}

fn then(effects: &[Effect]) -> Then {
    let reattaching = effects.iter().any(|e| matches!(e, Effect::Reattaching));
    for e in effects {
        match e {
            Effect::Finish { exit, .. } if exit.end == HarnessEnd::Exited => {
                return Then::Exit(exit.code, exit.signal)
            }
            Effect::Finish { exit, .. } => {
                return Then::End(exit.end, exit.detail.clone().unwrap_or_default())
            }
            Effect::Open { opening, .. } => {
                let (kind, resume) = shape(opening);
                return Then::Open {
                    reattaching,
                    kind,
                    resume,
                };
            }
            Effect::OpenAfter(d) => {
                assert!(reattaching, "a delayed reconnect shows reattaching");
                return Then::Later(*d);
            }
            _ => {}
        }
    }
    panic!("nothing follows from {effects:?}")
}

fn refused(code: &str, data: Value) -> ConnectionEnd {
    ConnectionEnd::Refused {
        code: ImpdCode::parse(code),
        message: "text".into(),
        data,
    }
}

fn ended(why: &str) -> Then {
    Then::End(HarnessEnd::Ended, why.into())
}

fn attach(resume: Option<(&str, u64)>, reattaching: bool) -> Then {
    Then::Open {
        reattaching,
        kind: Kind::Attach,
        resume: resume.map(|(g, o)| (g.to_string(), o)),
    }
}

/// Rows whose result is the same whatever the harness's origin once a connection started.
fn started_rows() -> Vec<(ConnectionEnd, Then)> {
    vec![
        (
            ConnectionEnd::Exit {
                code: Some(3),
                signal: None,
            },
            Then::Exit(Some(3), None),
        ),
        (
            ConnectionEnd::Exit {
                code: None,
                signal: Some("SIGHUP".into()),
            },
            Then::Exit(None, Some(1)),
        ),
        (
            refused(
                "NO_SESSION",
                json!({"bootId": "B1", "previous": {"executionGeneration": "G1", "exitCode": 7}}),
            ),
            Then::Exit(Some(7), None),
        ),
        (
            refused(
                "NO_SESSION",
                json!({"bootId": "B2", "coldBoots": [{"bootId": "B2", "cause": "watchdog"}, {"bootId": "B1", "cause": "start"}]}),
            ),
            ended("imp rebooted (watchdog)"),
        ),
        (
            refused("NO_SESSION", json!({"bootId": "B9"})),
            ended("ended, cause unknown"),
        ),
        (
            refused("INVALID_STATE", json!({"state": "sleeping"})),
            Then::End(HarnessEnd::Suspended, "asleep".into()),
        ),
        (
            refused("INVALID_STATE", json!({"state": "stopped"})),
            ended("imp is stopped"),
        ),
        (
            refused(
                "PRECONDITION_FAILED",
                json!({"reason": "broker_not_ready", "detail": "no grant"}),
            ),
            ended("imp broker not ready (no grant)"),
        ),
        (
            refused("PRECONDITION_FAILED", json!({"reason": "impd_outdated"})),
            ended("impd too old to require the broker"),
        ),
        (
            refused("SESSION_LIMIT", Value::Null),
            ended("imp refused the session (SESSION_LIMIT)"),
        ),
        (
            ConnectionEnd::Unauthorized,
            ended("impd refused the token; fix the target's token"),
        ),
        (
            ConnectionEnd::Closed { code: Some(1008) },
            ended("impd revoked the token (close 1008); fix the target's token"),
        ),
        // A dropped started connection: at once, resuming from the cursor.
        (
            ConnectionEnd::Closed { code: Some(1011) },
            attach(Some(("G1", 5)), true),
        ),
        (
            ConnectionEnd::Detached {
                reason: "slow".into(),
            },
            attach(Some(("G1", 5)), true),
        ),
        // The cursor is dropped: a fresh attach at once.
        (
            refused("INVALID_RESUME", json!({"end": 3})),
            attach(None, false),
        ),
        // Everything else waits for the first delay.
        (
            ConnectionEnd::Closed { code: Some(1012) },
            Then::Later(DELAYS[0]),
        ),
        (ConnectionEnd::Closed { code: None }, Then::Later(DELAYS[0])),
        (
            ConnectionEnd::Detached {
                reason: "taken_over".into(),
            },
            Then::Later(DELAYS[0]),
        ),
        (
            ConnectionEnd::Detached {
                reason: "lost".into(),
            },
            Then::Later(DELAYS[0]),
        ),
        (
            ConnectionEnd::Unreachable("refused".into()),
            Then::Later(DELAYS[0]),
        ),
        (
            ConnectionEnd::HandlerError("boom".into()),
            Then::Later(DELAYS[0]),
        ),
    ]
}

fn phase_after(t: &Then) -> PhaseKind {
    match t {
        Then::Exit(..) | Then::End(..) => PhaseKind::Ended,
        Then::Open {
            kind: Kind::Start, ..
        } => PhaseKind::OpeningStart,
        Then::Open {
            kind: Kind::Attach, ..
        } => PhaseKind::OpeningAttach,
        Then::Later(_) => PhaseKind::WaitingToReconnect,
    }
}

#[test]
fn every_outcome_row_of_a_started_connection_leads_to_its_phase_for_every_origin() {
    for origin in [Origin::Spawn, Origin::Revive, restart()] {
        for (end, want) in started_rows() {
            let (mut s, _, attempt) = up(&origin);
            let next = s.ended(attempt, &end, true).expect("current attempt");
            assert_eq!(s.phase(), PhaseKind::WaitingToReconnect);
            let effects = s.after(next);
            let got = then(&effects);
            assert_eq!(got, want, "{origin:?} {end:?}");
            assert_eq!(s.phase(), phase_after(&want), "{origin:?} {end:?}");
            // A delayed reconnect is an attach resuming from the cursor, whatever the origin.
            if let Then::Later(_) = got {
                assert_eq!(then(&s.open()), attach(Some(("G1", 5)), false));
                assert_eq!(s.phase(), PhaseKind::OpeningAttach);
            }
        }
    }
}

#[test]
fn a_first_opening_impd_never_answered_is_sent_again_as_its_origin_says() {
    let start = |resume: Option<(&str, u64)>| Then::Open {
        reattaching: false,
        kind: Kind::Start,
        resume: resume.map(|(g, o)| (g.to_string(), o)),
    };
    // (origin, what a retry opens, what a fresh attach after INVALID_RESUME opens)
    let cases = [
        (Origin::Spawn, start(None), start(None)),
        (Origin::Revive, start(Some(("G1", 5))), start(None)),
        (restart(), attach(None, false), attach(None, false)),
    ];
    for (origin, retry, fresh) in cases {
        for end in [
            ConnectionEnd::Closed { code: Some(1011) },
            ConnectionEnd::Closed { code: None },
            ConnectionEnd::Unreachable("refused".into()),
            ConnectionEnd::Detached {
                reason: "slow".into(),
            },
            ConnectionEnd::HandlerError("boom".into()),
        ] {
            let mut s = state(&origin);
            let (attempt, _) = opened(&s.open());
            // Not started: even a 1011 or `slow` waits for a delay.
            let next = s.ended(attempt, &end, false).expect("current attempt");
            assert_eq!(
                then(&s.after(next)),
                Then::Later(DELAYS[0]),
                "{origin:?} {end:?}"
            );
            assert_eq!(s.phase(), PhaseKind::WaitingToReconnect);
            assert_eq!(then(&s.open()), retry, "{origin:?} {end:?}");
        }
        let mut s = state(&origin);
        let (attempt, _) = opened(&s.open());
        let next = s
            .ended(attempt, &refused("INVALID_RESUME", json!({})), false)
            .expect("current attempt");
        assert_eq!(then(&s.after(next)), fresh, "{origin:?}");
    }
}

#[test]
fn reconnect_delays_run_out_into_an_end_with_the_last_outcome_and_a_start_resets_them() {
    let (mut s, _, mut attempt) = up(&Origin::Spawn);
    let lost = ConnectionEnd::Unreachable("refused".into());
    for delay in DELAYS {
        let next = s.ended(attempt, &lost, false).expect("current");
        assert_eq!(then(&s.after(next)), Then::Later(delay));
        attempt = opened(&s.open()).0;
    }
    // A start in between resets the count: the next failure waits the first delay again.
    let link = Rc::new(FakeLink::default());
    s.started(
        attempt,
        answer(Some(output("G1", 5, Some(Resume::Exact)))),
        link,
    );
    let next = s.ended(attempt, &lost, true).expect("current");
    assert_eq!(then(&s.after(next)), Then::Later(DELAYS[0]));
    for _ in 0..DELAYS.len() {
        attempt = opened(&s.open()).0;
        let next = s.ended(attempt, &lost, false).expect("current");
        s.after(next);
    }
    assert_eq!(s.phase(), PhaseKind::Ended);
}

#[test]
fn a_gap_closes_the_connection_and_attaches_fresh() {
    let (mut s, _, attempt) = up(&Origin::Spawn);
    let next = s
        .ended(attempt, &ConnectionEnd::Closed { code: Some(1011) }, true)
        .unwrap();
    let (attempt, _) = opened(&s.after(next));
    let link = Rc::new(FakeLink::default());
    let effects = s.started(
        attempt,
        answer(Some(output(
            "G1",
            9000,
            Some(Resume::Gap { from: 5, to: 9000 }),
        ))),
        link.clone(),
    );
    assert!(link.closed.get());
    assert_eq!(then(&effects), attach(None, false));
}

#[test]
fn a_generation_change_on_an_attach_ends_and_on_a_revives_start_resets_the_screen() {
    let changed = |previous: Option<Previous>| {
        let mut o = output(
            "G2",
            0,
            Some(Resume::GenerationChanged {
                execution_generation: "G2".into(),
                first_offset: 0,
            }),
        );
        o.previous = previous;
        o
    };
    // On an attach: our generation's recorded exit, or someone else's process.
    for (previous, want) in [
        (
            Some(Previous {
                execution_generation: "G1".into(),
                end: 5,
                exit_code: Some(4),
            }),
            Then::Exit(Some(4), None),
        ),
        (None, ended("imp replaced the process")),
    ] {
        let (mut s, _, attempt) = up(&Origin::Spawn);
        let next = s
            .ended(attempt, &ConnectionEnd::Closed { code: Some(1011) }, true)
            .unwrap();
        let (attempt, _) = opened(&s.after(next));
        let link = Rc::new(FakeLink::default());
        assert_eq!(
            then(&s.started(attempt, answer(Some(changed(previous))), link.clone())),
            want
        );
        assert!(link.closed.get());
    }
    // On a revive's start: the old process was gone and a new one runs, under a reset.
    let mut s = state(&Origin::Revive);
    let (attempt, _) = opened(&s.open());
    let effects = s.started(
        attempt,
        answer(Some(changed(None))),
        Rc::new(FakeLink::default()),
    );
    assert!(
        matches!(effects.first(), Some(Effect::ResetScreen)),
        "{effects:?}"
    );
    assert_eq!(s.phase(), PhaseKind::Started);
}

#[test]
fn a_restart_checks_the_generation_then_takes_the_lease_once() {
    // The generation it knew: a fresh replay under a reset, and the lease asked for.
    let mut s = state(&restart());
    let (attempt, opening) = opened(&s.open());
    assert_eq!(shape(&opening), (Kind::Attach, None));
    let effects = s.started(
        attempt,
        answer(Some(output("G1", 5, None))),
        Rc::new(FakeLink::default()),
    );
    assert!(matches!(effects.first(), Some(Effect::ResetScreen)));
    assert!(effects.iter().any(|e| matches!(e, Effect::AskLease)));
    // A reconnect asks no more, and an end owes nothing until the lease is held.
    let next = s
        .ended(attempt, &ConnectionEnd::Closed { code: Some(1011) }, true)
        .unwrap();
    let (attempt, _) = opened(&s.after(next));
    let effects = s.started(
        attempt,
        answer(Some(output("G1", 5, Some(Resume::Exact)))),
        Rc::new(FakeLink::default()),
    );
    assert!(!effects.iter().any(|e| matches!(e, Effect::AskLease)));
    let effects = s.detach(false);
    assert!(matches!(
        effects.as_slice(),
        [Effect::Finish {
            give_back_lease: false,
            ..
        }]
    ));
    // The lease arrives after the end: it is given back at once.
    assert!(s.lease_held(true));
    // Another generation under the name: replaced.
    let mut s = state(&restart());
    let (attempt, _) = opened(&s.open());
    let effects = s.started(
        attempt,
        answer(Some(output("G7", 0, None))),
        Rc::new(FakeLink::default()),
    );
    assert_eq!(then(&effects), ended("imp replaced the process"));
}

#[test]
fn a_restart_without_a_recorded_generation_adopts_the_process_under_its_name() {
    // The last daemon died between the spawn's row and the process's position.
    let unrecorded = || {
        State::new(
            params(),
            Origin::Restart { generation: None },
            size(80, 24),
            None,
            DELAYS.to_vec(),
        )
    };
    let mut s = unrecorded();
    let (attempt, opening) = opened(&s.open());
    assert_eq!(shape(&opening), (Kind::Attach, None));
    let effects = s.started(
        attempt,
        answer(Some(output("G7", 40, None))),
        Rc::new(FakeLink::default()),
    );
    assert!(matches!(effects.first(), Some(Effect::ResetScreen)));
    assert!(effects.iter().any(|e| matches!(e, Effect::AskLease)));
    match effects.last() {
        Some(Effect::Attached(Some(p))) => assert_eq!(p.generation, "G7"),
        other => panic!("not attached: {other:?}"),
    }
    // Nothing under the name (the start never reached impd): the session ends.
    let mut s = unrecorded();
    let (attempt, _) = opened(&s.open());
    let next = s
        .ended(
            attempt,
            &refused("NO_SESSION", json!({"bootId": "B1"})),
            false,
        )
        .unwrap();
    assert_eq!(then(&s.after(next)), ended("ended, cause unknown"));
}

#[test]
fn reports_of_an_earlier_attempt_change_nothing() {
    let (mut s, _, old) = up(&Origin::Spawn);
    let next = s
        .ended(old, &ConnectionEnd::Closed { code: Some(1011) }, true)
        .unwrap();
    let (attempt, _) = opened(&s.after(next));
    assert!(s
        .ended(old, &ConnectionEnd::Closed { code: None }, true)
        .is_none());
    assert!(s.data(old, Bytes::from_static(b"late")).is_empty());
    let stale = Rc::new(FakeLink::default());
    assert!(s
        .started(old, answer(Some(output("G1", 5, None))), stale.clone())
        .is_empty());
    assert!(stale.closed.get());
    assert_eq!(s.phase(), PhaseKind::OpeningAttach);
    assert!(s
        .ended(attempt, &ConnectionEnd::Closed { code: None }, false)
        .is_some());
}

#[test]
fn without_offsets_only_the_first_start_continues_and_every_reconnect_replays() {
    let mut s = State::new(params(), Origin::Spawn, size(80, 24), None, DELAYS.to_vec());
    s.lease_held(false);
    let (attempt, _) = opened(&s.open());
    let effects = s.started(attempt, answer(None), Rc::new(FakeLink::default()));
    assert!(!effects.iter().any(|e| matches!(e, Effect::ResetScreen)));
    let next = s
        .ended(attempt, &ConnectionEnd::Closed { code: Some(1011) }, true)
        .unwrap();
    let (attempt, opening) = opened(&s.after(next));
    assert_eq!(shape(&opening), (Kind::Attach, None));
    let effects = s.started(attempt, answer(None), Rc::new(FakeLink::default()));
    assert!(matches!(effects.first(), Some(Effect::ResetScreen)));
}

/// Takes `s` (started on `attempt`) through a dropped connection into the next opening.
fn drop_and_reopen(s: &mut State, attempt: u64) -> u64 {
    let next = s
        .ended(attempt, &ConnectionEnd::Closed { code: Some(1011) }, true)
        .unwrap();
    opened(&s.after(next)).0
}

#[test]
fn input_resize_and_kill_made_while_away_go_out_after_the_next_start_in_order() {
    let (mut s, _, attempt) = up(&Origin::Spawn);
    let attempt = drop_and_reopen(&mut s, attempt);
    s.input(Bytes::from_static(b"one ")).unwrap();
    s.resize(size(100, 30));
    s.input(Bytes::from_static(b"two")).unwrap();
    s.signal(Signal::Hangup);
    let link = Rc::new(FakeLink::default());
    s.started(
        attempt,
        answer(Some(output("G1", 5, Some(Resume::Exact)))),
        link.clone(),
    );
    assert_eq!(link.text(), b"one two");
    // The opening asked for the old size (it was sent before the resize).
    assert_eq!(*link.resized.borrow(), [size(100, 30)]);
    assert_eq!(*link.signals.borrow(), ["SIGHUP"]);
    // Up: straight through.
    s.input(Bytes::from_static(b"!")).unwrap();
    assert_eq!(link.text(), b"one two!");
}

#[test]
fn input_a_failing_writer_could_not_take_goes_out_on_the_connection_after_it_once() {
    let (mut s, _, attempt) = up(&Origin::Spawn);
    let attempt = drop_and_reopen(&mut s, attempt);
    s.input(Bytes::from_static(b"first ")).unwrap();
    s.signal(Signal::Hangup);
    // The next connection's socket is gone by the time it starts.
    let dead = Rc::new(FakeLink::gone());
    s.started(
        attempt,
        answer(Some(output("G1", 5, Some(Resume::Exact)))),
        dead,
    );
    s.input(Bytes::from_static(b"second")).unwrap();
    let attempt = drop_and_reopen(&mut s, attempt);
    let link = Rc::new(FakeLink::default());
    s.started(
        attempt,
        answer(Some(output("G1", 5, Some(Resume::Exact)))),
        link.clone(),
    );
    assert_eq!(link.text(), b"first second");
    assert_eq!(*link.signals.borrow(), ["SIGHUP"]);
}

#[test]
fn input_past_four_mib_is_too_slow_whether_or_not_a_connection_is_up() {
    let big = || Bytes::from(vec![b'x'; INPUT_BACKLOG_BYTES]);
    // Away.
    let (mut s, _, attempt) = up(&Origin::Spawn);
    drop_and_reopen(&mut s, attempt);
    s.input(big()).unwrap();
    let err = s.input(Bytes::from_static(b"y")).unwrap_err();
    assert!(
        matches!(err, HostError::InputFull { connected: false }),
        "{err}"
    );
    // Up, with a peer that does not read.
    let mut s = state(&Origin::Spawn);
    let (attempt, _) = opened(&s.open());
    let link = Rc::new(FakeLink::stuck());
    s.started(attempt, answer(Some(output("G1", 0, None))), link.clone());
    s.input(big()).unwrap();
    let err = s.input(Bytes::from_static(b"y")).unwrap_err();
    assert!(
        matches!(err, HostError::InputFull { connected: true }),
        "{err}"
    );
    link.drain();
    s.input(Bytes::from_static(b"y")).unwrap();
}

#[test]
fn an_end_with_input_never_sent_says_so() {
    let (mut s, _, attempt) = up(&Origin::Spawn);
    drop_and_reopen(&mut s, attempt);
    s.input(Bytes::from_static(b"12345")).unwrap();
    match s.ended_with("connection to impd lost".into()).as_slice() {
        [Effect::Finish { exit, .. }] => assert_eq!(
            exit.detail.as_deref(),
            Some("connection to impd lost; 5 bytes of input were not delivered")
        ),
        other => panic!("{other:?}"),
    }
    assert!(s.after(Next::ReconnectNow).is_empty(), "ends once");
}

#[test]
fn a_broker_harness_requires_the_broker_on_its_start_and_every_attach() {
    let required = |o: &Opening| match o {
        Opening::Start(m) => m.require.clone(),
        Opening::Attach(m) => m.require.clone(),
    };
    for broker in [false, true] {
        let mut s = State::new(
            StartParams {
                require_broker: broker,
                ..params()
            },
            Origin::Spawn,
            size(80, 24),
            None,
            DELAYS.to_vec(),
        );
        assert!(!s.lease_held(true));
        let (attempt, start) = opened(&s.open());
        assert!(matches!(start, Opening::Start(_)));
        let link = Rc::new(FakeLink::default());
        s.started(attempt, answer(Some(output("G1", 0, None))), link);
        let next = s
            .ended(attempt, &ConnectionEnd::Closed { code: Some(1011) }, true)
            .unwrap();
        let (_, attach) = opened(&s.after(next));
        assert!(matches!(attach, Opening::Attach(_)), "{attach:?}");
        let want = if broker {
            vec![impd_client::Requirement::Broker]
        } else {
            vec![]
        };
        assert_eq!((required(&start), required(&attach)), (want.clone(), want));
    }
}
