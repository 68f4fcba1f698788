//! What a workspace costs against making the same worktree by hand (issue 34):
//!
//! ```text
//! cargo run --release --example workspace_cost [-- --files 1000,10000 --rounds 5]
//! ```
//!
//! For each repository size it makes a repository of that many small files in one commit,
//! starts a daemon in this process, and then, alternating, round after round:
//!
//! * by hand: `git worktree add -b <branch> <dir> HEAD`, what a user would type;
//! * a spawn of `cat` with `workspace: {path}` through the HTTP API, and the same spawn
//!   without a workspace. Their difference is what the workspace adds to a spawn: the checks
//!   (the commit resolved, submodules and Git LFS looked for), the phases written to the
//!   store, and the worktree itself.
//!
//! It prints the median of each and the ratio of the workspace's share to the hand-made
//! worktree. Every session is forgotten (and its workspace removed) between rounds, untimed.
//!
//! Then, on an imp target of the impd simulator in this process, the same spawn with and
//! without a workspace sent in (archived here, unpacked in the imp, counted there), against
//! `git archive | tar -x` of the same tree by hand on this machine: what the transfer adds
//! over the copy itself.

use std::path::Path;
use std::time::{Duration, Instant};

use atc_testkit::git_repo::{git_in, TestRepo};
use atc_testkit::{id_of, test_config, TestDaemon};
use clap::Parser;
use serde_json::json;

/// Workspace materialization against `git worktree add` by hand.
#[derive(Parser, Debug)]
struct Args {
    /// Repository sizes, in files.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    files: Vec<usize>,
    /// Rounds of each measurement per size.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    actix_rt::System::new().block_on(run(args))
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn run(args: Args) -> anyhow::Result<()> {
    let state = tempfile::tempdir()?;
    let sim = atc_testkit::impd_sim::ImpdSim::start(atc_testkit::impd_sim::SimOptions::default());
    let config = atc_testkit::with_imp_target(
        test_config(),
        &sim.url(),
        sim.token_file(),
        serde_json::json!({}),
    );
    let d = TestDaemon::start_on(state.path(), config).await;
    table(&d, &args, "by hand", "local", by_hand).await?;
    println!();
    table(&d, &args, "archive | tar", "box", archive_by_hand).await?;
    d.stop().await;
    Ok(())
}

/// `git archive HEAD | tar -x` into a fresh directory, timed, then removed untimed.
fn archive_by_hand(repo: &Path, root: &Path, round: usize) -> Duration {
    let dir = root.join(format!("unpacked-{round}"));
    std::fs::create_dir_all(&dir).expect("a directory");
    let began = Instant::now();
    let status = std::process::Command::new("sh")
        .args([
            "-c",
            "git -C \"$1\" archive --format=tar HEAD | tar -x -f - -C \"$2\"",
            "sh",
        ])
        .arg(repo)
        .arg(&dir)
        .status()
        .expect("sh runs");
    let took = began.elapsed();
    assert!(status.success(), "archive | tar failed");
    std::fs::remove_dir_all(&dir).expect("removing the unpacked tree");
    took
}

/// One table: for each size, `hand` (what a user would do, timed) against spawns on `target`
/// with and without a workspace, medians and the ratio of the workspace's share to `hand`.
async fn table(
    d: &TestDaemon,
    args: &Args,
    hand_label: &str,
    target: &str,
    hand: fn(&Path, &Path, usize) -> Duration,
) -> anyhow::Result<()> {
    let spawned = if target == "local" { "spawn" } else { "imp" };
    println!(
        "{:>8}  {:>14}  {:>14}  {:>14}  {:>14}  {:>8}",
        "files",
        hand_label,
        format!("{spawned} + ws"),
        format!("{spawned} alone"),
        "ws share",
        "ratio"
    );
    for &files in &args.files {
        let repo = TestRepo::with_files(files);
        let scratch = tempfile::tempdir()?;
        let (mut by_hand, mut with, mut without) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..args.rounds {
            by_hand.push(hand(repo.path(), scratch.path(), round));
            with.push(spawn(d, repo.path(), true, target).await?);
            without.push(spawn(d, repo.path(), false, target).await?);
        }
        let (by_hand, with, without) = (median(by_hand), median(with), median(without));
        let share = with.saturating_sub(without);
        println!(
            "{files:>8}  {:>11.1} ms  {:>11.1} ms  {:>11.1} ms  {:>11.1} ms  {:>7.2}×",
            ms(by_hand),
            ms(with),
            ms(without),
            ms(share),
            share.as_secs_f64() / by_hand.as_secs_f64()
        );
    }
    Ok(())
}

/// One worktree made by hand, timed, then removed untimed.
fn by_hand(repo: &Path, root: &Path, round: usize) -> Duration {
    let dir = root.join(format!("hand-{round}"));
    let (branch, path) = (format!("hand-{round}"), dir.display().to_string());
    let began = Instant::now();
    git_in(
        repo,
        &["worktree", "add", "-q", "-b", &branch, &path, "HEAD"],
    );
    let took = began.elapsed();
    git_in(repo, &["worktree", "remove", "--force", &path]);
    git_in(repo, &["branch", "-D", &branch]);
    took
}

/// One spawn of `cat` in `repo` on `target`, with or without a workspace of it, timed; then
/// forgotten (on an imp, its imp destroyed).
async fn spawn(
    d: &TestDaemon,
    repo: &Path,
    workspace: bool,
    target: &str,
) -> anyhow::Result<Duration> {
    let remote = target != "local";
    let cwd = if remote { Path::new("/tmp") } else { repo };
    let mut body = json!({"agent": "cat", "cwd": cwd, "target": target});
    if workspace {
        body["workspace"] = json!({"path": repo});
    }
    let began = Instant::now();
    let (status, answer) = d.call("POST", "/v1/sessions", Some(body)).await;
    let took = began.elapsed();
    anyhow::ensure!(status == 201, "spawn failed: {answer}");
    let id = id_of(&answer["session"]);
    let forget = format!("/v1/sessions/{id}?force=true");
    let (status, answer) = d.call("DELETE", &forget, None).await;
    anyhow::ensure!(status == 200, "forget failed: {answer}");
    if let Some(token) = answer["confirmToken"].as_str() {
        let (status, answer) = d
            .call(
                "DELETE",
                &format!("/v1/sessions/{id}?confirm={token}"),
                None,
            )
            .await;
        anyhow::ensure!(status == 200, "destroying forget failed: {answer}");
    }
    Ok(took)
}
