//! Hostile uploads: a body past the cap (declared, and chunked with no length), a flood of
//! headers, one huge header, a head trickled a byte a second and a body trickled the same way.
//! Each must be cut off (answered or closed) within its deadline, while a well-behaved client
//! keeps listing sessions; its latency during the attacks is the figure.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::raw::{self, Trickle};

/// What the attacks found.
#[derive(Debug, Default)]
pub struct Cutoffs {
    /// Checks that were cut off in time.
    pub passed: u64,
    /// Checks run.
    pub tried: u64,
    /// Each check that was not, described.
    pub failures: Vec<String>,
    /// The well-behaved client's latencies meanwhile.
    pub latencies: Vec<Duration>,
    /// Its requests that failed.
    pub client_failures: u64,
}

/// Runs the attacks against `addr` (the slow ones `slow` connections at once), with the
/// well-behaved client asking `GET /v1/sessions` with `token` all the while.
pub async fn run(addr: &str, token: &str, cap: usize, slow: usize) -> Cutoffs {
    let stop = Rc::new(RefCell::new(false));
    let samples = Rc::new(RefCell::new((Vec::new(), 0u64)));
    let client = {
        let (stop, samples, addr) = (stop.clone(), samples.clone(), addr.to_string());
        let bearer = format!("Bearer {token}");
        actix_rt::spawn(async move {
            while !*stop.borrow() {
                let req = raw::request(
                    "GET",
                    "/v1/sessions",
                    &addr,
                    &[("Authorization", &bearer)],
                    None,
                );
                let t = Instant::now();
                let got = raw::exchange(&addr, &req, Duration::from_secs(10)).await;
                {
                    let mut s = samples.borrow_mut();
                    match got {
                        Ok(a) if a.status == 200 => s.0.push(t.elapsed()),
                        _ => s.1 += 1,
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let mut out = Cutoffs::default();
    let bearer = format!("Bearer {token}");

    // A declared body past the cap: refused from the head.
    let over = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {bearer}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        cap + 1
    );
    check(
        &mut out,
        "a declared body past the cap",
        Duration::from_secs(5),
        answered(
            addr,
            over.as_bytes(),
            &[],
            Duration::from_secs(5),
            Some(413),
        ),
    )
    .await;

    // A chunked body that grows past the cap: stopped at it.
    let chunked = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {bearer}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let chunk = {
        let data = vec![b' '; 64 * 1024];
        let mut c = format!("{:x}\r\n", data.len()).into_bytes();
        c.extend_from_slice(&data);
        c.extend_from_slice(b"\r\n");
        c
    };
    let chunks = vec![chunk; cap / (64 * 1024) + 4];
    check(
        &mut out,
        "a chunked body past the cap",
        Duration::from_secs(10),
        answered(
            addr,
            chunked.as_bytes(),
            &chunks,
            Duration::from_secs(10),
            None,
        ),
    )
    .await;

    // Many headers, and one huge one.
    let mut flood =
        format!("GET /v1/sessions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {bearer}\r\n");
    for i in 0..5000 {
        flood.push_str(&format!("X-Flood-{i}: {i}\r\n"));
    }
    flood.push_str("\r\n");
    check(
        &mut out,
        "a flood of 5000 headers",
        Duration::from_secs(5),
        answered(addr, flood.as_bytes(), &[], Duration::from_secs(5), None),
    )
    .await;
    let huge = format!(
        "GET /v1/sessions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {bearer}\r\nX-Huge: {}\r\n\r\n",
        "h".repeat(512 * 1024)
    );
    check(
        &mut out,
        "one 512 KiB header",
        Duration::from_secs(5),
        answered(addr, huge.as_bytes(), &[], Duration::from_secs(5), None),
    )
    .await;

    // Slow-loris: `slow` heads and `slow` bodies at a byte a second, all at once.
    let head_prefix = format!("GET /v1/sessions HTTP/1.1\r\nHost: {addr}\r\n");
    let body_prefix = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {bearer}\r\n\
         Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n"
    );
    let deadline = Duration::from_secs(20);
    let mut slow_tasks = Vec::new();
    for i in 0..slow {
        let (addr, head, body) = (addr.to_string(), head_prefix.clone(), body_prefix.clone());
        slow_tasks.push(actix_rt::spawn(async move {
            let (what, prefix, drip) = if i % 2 == 0 {
                (
                    "a head trickled a byte a second",
                    head,
                    &b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaa"[..],
                )
            } else {
                (
                    "a body trickled a byte a second",
                    body,
                    &b"{\"agent\":\"cat\",\"cwd\":\"/tmp\"    "[..],
                )
            };
            let got = raw::trickle(
                &addr,
                prefix.as_bytes(),
                drip,
                Duration::from_secs(1),
                deadline,
            )
            .await;
            (what, got)
        }));
    }
    for t in slow_tasks {
        out.tried += 1;
        match t.await {
            Ok((_, Trickle::CutOff(after))) if after <= deadline => out.passed += 1,
            Ok((what, got)) => out
                .failures
                .push(format!("{what}: {got:?} after {deadline:?}")),
            Err(e) => out
                .failures
                .push(format!("a slow connection's task failed: {e}")),
        }
    }

    *stop.borrow_mut() = true;
    // The client's last request is bounded by its own 10 s timeout.
    let _ = client.await;
    let (lat, failed) = samples.take();
    out.latencies = lat;
    out.client_failures = failed;
    out
}

async fn check(
    out: &mut Cutoffs,
    what: &str,
    within: Duration,
    attack: impl std::future::Future<Output = Result<Duration, String>>,
) {
    out.tried += 1;
    match attack.await {
        Ok(after) if after <= within => out.passed += 1,
        Ok(after) => out
            .failures
            .push(format!("{what}: cut off only after {after:?}")),
        Err(e) => out.failures.push(format!("{what}: {e}")),
    }
}

/// Sends `head`, then `more` pieces while the daemon lets it, and waits for an answer or a
/// close; returns how long that took. `want` is the status it must answer with, if any.
async fn answered(
    addr: &str,
    head: &[u8],
    more: &[Vec<u8>],
    within: Duration,
    want: Option<u16>,
) -> Result<Duration, String> {
    let started = Instant::now();
    let mut conn = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let (mut rd, mut wr) = conn.split();
    let write = async {
        // A write refused midway is the daemon cutting us off, which the read sees.
        if wr.write_all(head).await.is_err() {
            return;
        }
        for piece in more {
            if wr.write_all(piece).await.is_err() {
                return;
            }
        }
        std::future::pending::<()>().await
    };
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return got,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if got.windows(4).any(|w| w == b"\r\n\r\n") {
                        return got;
                    }
                }
            }
        }
    };
    let got = tokio::time::timeout(within * 2, async {
        tokio::select! {
            got = read => got,
            () = write => Vec::new(),
        }
    })
    .await
    .map_err(|_| format!("neither answered nor closed within {:?}", within * 2))?;
    let after = started.elapsed();
    if let Some(want) = want {
        let text = String::from_utf8_lossy(&got);
        let status = text.split(' ').nth(1).and_then(|s| s.parse::<u16>().ok());
        if status != Some(want) {
            return Err(format!("answered {status:?}, not {want}: {text:?}"));
        }
    }
    Ok(after)
}
