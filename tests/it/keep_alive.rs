//! The sockets' keep-alive: pings on beats every socket shares, and the drop of a client that
//! stopped answering, which leaves its session running.

use std::time::Duration;

use atc_testkit::{id_of, test_config, Frame, TestDaemon, WITHIN};

/// A daemon whose sockets are pinged every `ping` and dropped after `timeout` of silence, and
/// its state dir.
async fn daemon_with(ping: Duration, timeout: Duration) -> (TestDaemon, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = test_config();
    config.timings.ws_ping = ping;
    config.timings.ws_timeout = timeout;
    (TestDaemon::start_on(dir.path(), config).await, dir)
}

#[actix_rt::test]
async fn a_socket_opened_between_beats_is_pinged_on_the_same_beats_as_the_others() {
    let period = Duration::from_millis(400);
    let (d, _dir) = daemon_with(period, Duration::from_secs(30)).await;
    let id = id_of(&d.spawn("cat").await);

    let (mut first, _, _) = d.attach(&id, "cols=80&rows=24").await;
    first
        .next_ping_unanswered(WITHIN)
        .await
        .expect("a first ping");
    // Open the second socket half a period after a beat: had it a timer of its own, its pings
    // would fall half a period away from the first socket's. The sleep is that offset.
    tokio::time::sleep(period / 2).await;
    let (mut second, _, _) = d.attach(&id, "cols=80&rows=24").await;

    let (a, b) = tokio::join!(
        first.next_ping_unanswered(WITHIN),
        second.next_ping_unanswered(WITHIN)
    );
    let (a, b) = (
        a.expect("the first socket's next ping"),
        b.expect("the second's"),
    );
    let apart = if a > b { a - b } else { b - a };
    assert!(
        apart < period / 4,
        "pings {apart:?} apart on a {period:?} beat"
    );
    d.stop().await;
}

#[actix_rt::test]
async fn a_client_that_stops_answering_is_dropped_and_one_that_answers_and_the_session_stay() {
    let ping = Duration::from_millis(100);
    let timeout = Duration::from_millis(400);
    let (d, _dir) = daemon_with(ping, timeout).await;
    let id = id_of(&d.spawn("cat").await);

    let (mut silent, _, _) = d.attach(&id, "cols=80&rows=24").await;
    let (mut answering, _, _) = d.attach(&id, "cols=80&rows=24").await;

    // The answering client pongs every ping it reads, and reads all along: it is not closed
    // over several timeouts, though it may hear of the other client's leaving meanwhile.
    let watch_answering = async {
        let until = tokio::time::Instant::now() + timeout * 5;
        loop {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            match answering.next_within(left).await {
                None => return Ok(()),
                Some(Frame::Close) => return Err(answering.seen.clone()),
                Some(_) => continue,
            }
        }
    };
    let (dropped, stayed) = tokio::join!(silent.closed_unanswered_within(WITHIN), watch_answering);
    assert!(dropped, "a client silent for {timeout:?} is dropped");
    if let Err(seen) = stayed {
        panic!("an answering client was closed; seen: {seen:?}");
    }
    answering.send_binary(b"still here\n").await;
    answering.read_until(b"still here").await;
    assert_eq!(d.session(&id).await["alive"], true);
    d.stop().await;
}
