//! Measures what a local start costs while the process holds many descriptors, started on
//! the calling thread against started on a launcher thread (`providers/local/launcher.rs`):
//!
//! ```text
//! cargo run --release --example launch_cost [-- <descriptors held> <starts>]
//! ```
//!
//! It opens `/dev/null` the given number of times (default 8,000: a daemon with about 3,600
//! sessions holds that many), then starts `true` on a fresh PTY and waits for it, `starts`
//! times (default 300) each way, alternating the two ways twice. For each round it prints the
//! wall time of one start and wait, and the CPU the children used (`getrusage` of the reaped
//! children: the copy and close of the descriptor table happen in the child before its exec).

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use atc::providers::local::launch::launch_here;
use atc::providers::local::launcher::Launchers;
use atc::providers::local::pty_spawn::Plan;
use atc_protocol::TermSize;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let held: usize = args.next().map_or(Ok(8_000), |a| a.parse())?;
    let starts: u32 = args.next().map_or(Ok(300), |a| a.parse())?;
    let _held: Vec<OwnedFd> = (0..held)
        .map(|_| std::fs::File::open("/dev/null").map(OwnedFd::from))
        .collect::<Result<_, _>>()
        .context("opening the descriptors to hold (raise `ulimit -n`)")?;
    let plan = Plan {
        program: "true".into(),
        args: Vec::new(),
        cwd: "/".into(),
        env: Vec::new(),
        withheld: Vec::new(),
        cgroup: None,
    };
    let launchers = Launchers::start(1)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    println!("{held} descriptors held, {starts} starts a round");
    for round in 1..=2 {
        for on_launcher in [false, true] {
            let cpu_before = children_cpu();
            let began = Instant::now();
            for _ in 0..starts {
                let mut launched = if on_launcher {
                    launchers.launch(&plan, TermSize::DEFAULT)?
                } else {
                    launch_here(&plan, TermSize::DEFAULT)?
                };
                runtime.block_on(launched.child.wait())?;
            }
            let per = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(starts);
            println!(
                "round {round}, {:<16} {:>7.1} µs a start and wait, children's CPU {:>6.1} µs a start",
                if on_launcher { "launcher thread:" } else { "calling thread:" },
                per(began.elapsed()),
                per(children_cpu() - cpu_before),
            );
        }
    }
    Ok(())
}

/// User and system CPU of every child reaped so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage writes one rusage into the zeroed value it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}
