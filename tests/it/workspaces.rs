//! Workspaces (issue 34): each session in a copy of its own of a repository at a commit, made
//! before its process starts, refused with nothing left behind, and removed on forget without
//! losing work. Real repositories made by the tests, real worktrees, the daemon in-process.

use std::path::{Path, PathBuf};

use atc::config::AgentConfig;
use atc_testkit::git_repo::{git_in, TestRepo};
use atc_testkit::{id_of, test_config, TestDaemon};
use serde_json::{json, Value};

/// An agent that prints where it runs, commits a file named after its session there when
/// asked (`commit`), and waits.
fn committer() -> AgentConfig {
    AgentConfig {
        bin: "/bin/sh".into(),
        args: vec![
            "-c".into(),
            concat!(
                "echo \"pwd:$(pwd)\"; ",
                "while read line; do case $line in commit) ",
                "echo \"$ATC_SESSION_ID\" > \"$ATC_SESSION_ID.txt\"; git add -A; ",
                "git -c user.name=agent -c user.email=agent@atc.invalid -c commit.gpgsign=false ",
                "commit -qm \"work of $ATC_SESSION_ID\" && echo committed;; esac; done"
            )
            .into(),
        ],
        ..Default::default()
    }
}

async fn daemon() -> (TestDaemon, tempfile::TempDir) {
    let mut config = test_config();
    config.agents.insert("committer".into(), committer());
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    (d, tmp)
}

fn root(d: &TestDaemon) -> PathBuf {
    d.state_dir.join("workspaces")
}

/// What a refusal must leave: no directory under the workspaces root, no branch of a
/// session's in `repo`, no session listed.
async fn assert_nothing_left(d: &TestDaemon, repo: &Path) {
    let made: Vec<_> = std::fs::read_dir(root(d))
        .map(|r| r.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(made.is_empty(), "left behind: {made:?}");
    if repo.join(".git").exists() {
        let branches = git_in(repo, &["branch", "--list", "atc/*"]);
        assert_eq!(branches.trim(), "", "branches left: {branches}");
        let worktrees = git_in(repo, &["worktree", "list"]);
        assert_eq!(worktrees.lines().count(), 1, "worktrees left: {worktrees}");
    }
    let (_, sessions) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(sessions["sessions"], json!([]), "{sessions}");
}

async fn spawn_in(d: &TestDaemon, cwd: &Path, workspace: Value) -> (u16, Value) {
    d.call(
        "POST",
        "/v1/sessions",
        Some(json!({"agent": "committer", "cwd": cwd, "workspace": workspace})),
    )
    .await
}

#[actix_rt::test]
async fn a_local_repository_becomes_a_worktree_on_a_branch_of_its_own() {
    let (d, _tmp) = daemon().await;
    let repo = TestRepo::with_files(5);
    let head = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    let (status, body) = spawn_in(&d, repo.path(), json!({"path": repo.path()})).await;
    assert_eq!(status, 201, "{body}");
    let s = &body["session"];
    let ws = &s["workspace"];
    let dir = ws["dir"].as_str().unwrap().to_string();
    assert_eq!(ws["repoURL"], json!(repo.path()));
    assert_eq!(ws["sha"], json!(head));
    assert!(ws["ref"].is_null());
    assert!(ws["materializedAt"].as_i64().unwrap() > 0);
    assert!(Path::new(&dir).starts_with(root(&d)), "{dir}");
    assert_eq!(s["cwd"], json!(dir));
    assert!(Path::new(&dir).join("src/f4.txt").is_file());
    let branch = ws["branch"].as_str().unwrap();
    assert!(branch.starts_with("atc/"), "{branch}");
    assert_eq!(
        git_in(Path::new(&dir), &["branch", "--show-current"]).trim(),
        branch
    );
    d.wait_screen(&id_of(s), &format!("pwd:{dir}")).await;
    // The user's own checkout is left as it was.
    assert_eq!(repo.git(&["branch", "--show-current"]).trim(), "main");
    assert_eq!(repo.git(&["status", "--porcelain"]).trim(), "");
}

#[actix_rt::test]
async fn a_workspace_starts_at_the_ref_or_sha_asked_for_in_the_cwd_asked_for() {
    let (d, _tmp) = daemon().await;
    let repo = TestRepo::with_files(2);
    let first = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    repo.git(&["checkout", "-q", "-b", "feature"]);
    repo.write("src/feature.txt", "new\n");
    let feature = repo.commit("feature");
    repo.git(&["checkout", "-q", "main"]);

    let (status, body) = spawn_in(
        &d,
        &repo.path().join("src"),
        json!({"path": repo.path(), "ref": "feature"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let ws = &body["session"]["workspace"];
    assert_eq!(
        (&ws["sha"], &ws["ref"]),
        (&json!(feature), &json!("feature"))
    );
    let dir = PathBuf::from(ws["dir"].as_str().unwrap());
    assert!(dir.join("src/feature.txt").is_file());
    // The spawn's cwd was the repository's src/: the session starts in the copy's.
    assert_eq!(body["session"]["cwd"], json!(dir.join("src")));

    let (status, body) = spawn_in(
        &d,
        repo.path(),
        json!({"path": repo.path(), "sha": &first[..12]}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let ws = &body["session"]["workspace"];
    assert_eq!(ws["sha"], json!(first));
    assert!(!PathBuf::from(ws["dir"].as_str().unwrap())
        .join("src/feature.txt")
        .exists());
}

#[actix_rt::test]
async fn two_agents_in_one_repository_commit_on_their_own_branches() {
    let (d, _tmp) = daemon().await;
    let repo = TestRepo::with_files(3);
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let (status, body) = spawn_in(&d, repo.path(), json!({"path": repo.path()})).await;
        assert_eq!(status, 201, "{body}");
        sessions.push(body["session"].clone());
    }
    assert_ne!(
        sessions[0]["workspace"]["dir"],
        sessions[1]["workspace"]["dir"]
    );
    for s in &sessions {
        let id = id_of(s);
        d.wait_screen(&id, "pwd:").await;
        d.submit(&id, "commit").await;
        d.wait_screen(&id, "committed").await;
    }
    for s in &sessions {
        let id = id_of(s);
        let branch = s["workspace"]["branch"].as_str().unwrap();
        // Each commit is on its own session's branch in the user's repository, and only there.
        let log = repo.git(&["log", "--format=%s", branch]);
        assert!(log.contains(&format!("work of {id}")), "{branch}: {log}");
        let (status, body) = d.call("DELETE", &format!("/v1/sessions/{id}"), None).await;
        assert_eq!(status, 200, "a committed workspace is forgotten: {body}");
        assert!(!Path::new(s["workspace"]["dir"].as_str().unwrap()).exists());
        assert!(repo.git(&["log", "--format=%s", branch]).contains(&id));
    }
    assert_eq!(repo.git(&["log", "--format=%s", "main"]).trim(), "initial");
}

#[actix_rt::test]
async fn forgetting_refuses_to_lose_work_unless_forced() {
    let (d, _tmp) = daemon().await;
    let repo = TestRepo::with_files(1);
    let (_, body) = spawn_in(&d, repo.path(), json!({"path": repo.path()})).await;
    let s = &body["session"];
    let id = id_of(s);
    let dir = PathBuf::from(s["workspace"]["dir"].as_str().unwrap());
    std::fs::write(dir.join("unsaved.txt"), "work").unwrap();
    std::fs::write(dir.join("src/f0.txt"), "changed").unwrap();

    let (status, body) = d.call("DELETE", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, 409, "{body}");
    let e = &body["error"];
    assert_eq!(e["code"], "workspace_dirty");
    assert_eq!(
        (&e["data"]["changedFiles"], &e["data"]["unkeptCommits"]),
        (&json!(2), &json!(0))
    );
    assert_eq!(e["data"]["phase"], "ready");
    // Nothing ended: the session runs on in its workspace.
    assert!(dir.join("unsaved.txt").is_file());
    assert_eq!(d.session(&id).await["alive"], true);

    let (status, body) = d
        .call("DELETE", &format!("/v1/sessions/{id}?force=maybe"), None)
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("bad_args")),
        "{body}"
    );
    let (status, body) = d
        .call("DELETE", &format!("/v1/sessions/{id}?force=true"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(!dir.exists());
    // The branch stays in the repository.
    let branch = s["workspace"]["branch"].as_str().unwrap();
    assert!(!repo.git(&["branch", "--list", branch]).trim().is_empty());
}

#[actix_rt::test]
async fn every_refusal_answers_its_code_and_leaves_nothing_behind() {
    let (d, _tmp) = daemon().await;
    let cwd = std::env::temp_dir();
    let refused = |status: u16, body: &Value, code: &str| {
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (status, Some(code)),
            "{body}"
        );
    };

    let plain = tempfile::tempdir().unwrap();
    let (status, body) = spawn_in(&d, &cwd, json!({"path": plain.path()})).await;
    refused(status, &body, "not_a_git_repo");
    assert_eq!(
        (status, &body["error"]["data"]["phase"]),
        (422, &json!("resolving"))
    );
    assert_nothing_left(&d, plain.path()).await;

    let empty = TestRepo::empty();
    let (status, body) = spawn_in(&d, &cwd, json!({"path": empty.path()})).await;
    refused(status, &body, "no_commits");
    assert_nothing_left(&d, empty.path()).await;

    let repo = TestRepo::with_files(1);
    let (status, body) = spawn_in(&d, &cwd, json!({"path": repo.path(), "ref": "nope"})).await;
    refused(status, &body, "ref_not_found");
    assert_eq!(body["error"]["data"]["ref"], "nope");
    assert_nothing_left(&d, repo.path()).await;

    let lfs = TestRepo::with_files(1);
    lfs.write(
        ".gitattributes",
        "*.psd filter=lfs diff=lfs merge=lfs -text\n",
    );
    lfs.commit("lfs");
    let (status, body) = spawn_in(&d, &cwd, json!({"path": lfs.path()})).await;
    refused(status, &body, "lfs_unsupported");
    assert_nothing_left(&d, lfs.path()).await;

    let sub = TestRepo::with_files(1);
    let other = TestRepo::with_files(1);
    let gitlink = other.git(&["rev-parse", "HEAD"]).trim().to_string();
    sub.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{gitlink},vendor/lib"),
    ]);
    sub.git(&["commit", "-qm", "submodule"]);
    let (status, body) = spawn_in(&d, &cwd, json!({"path": sub.path()})).await;
    refused(status, &body, "has_submodules");
    assert_eq!(body["error"]["data"]["path"], "vendor/lib");
    assert_nothing_left(&d, sub.path()).await;

    // The shape of the field itself, before any git runs.
    for (workspace, field) in [
        (
            json!({"path": repo.path(), "ref": "main", "sha": "abcdef0"}),
            "workspace.sha",
        ),
        (json!({"path": "relative/repo"}), "workspace.path"),
        (
            json!({"path": repo.path(), "url": "https://h/r"}),
            "workspace",
        ),
        (json!({}), "workspace.path"),
        (
            json!({"path": repo.path(), "ref": "--upload-pack=x"}),
            "workspace.ref",
        ),
        (json!({"path": repo.path(), "depth": 1}), "workspace.depth"),
    ] {
        let (status, body) = spawn_in(&d, &cwd, workspace.clone()).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (400, &json!("bad_args")),
            "{workspace}: {body}"
        );
        assert_eq!(body["error"]["data"]["field"], field, "{workspace}: {body}");
    }
    // A URL with a credential in it, or one git would run a program for, before git runs.
    for (url, code) in [
        ("https://ghp_secret@github.com/o/r.git", "credential_in_url"),
        ("https://user:hunter2@h/r.git", "credential_in_url"),
        ("ext::sh -c touch% /tmp/pwned", "invalid_git_url"),
        ("-uhelp", "invalid_git_url"),
    ] {
        let (status, body) = spawn_in(&d, &cwd, json!({"url": url})).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (422, Some(code)),
            "{body}"
        );
        assert!(!body.to_string().contains("secret") && !body.to_string().contains("hunter2"));
    }
    // A URL that leads nowhere, or to no such ref.
    let nowhere = format!("file://{}/nothing-here", plain.path().display());
    let (status, body) = spawn_in(&d, &cwd, json!({"url": nowhere})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (502, &json!("clone_failed")),
        "{body}"
    );
    let url = format!("file://{}", repo.path().display());
    let (status, body) = spawn_in(&d, &cwd, json!({"url": url, "ref": "nope"})).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (422, &json!("ref_not_found")),
        "{body}"
    );
    assert_nothing_left(&d, repo.path()).await;
}

#[actix_rt::test]
async fn a_restarted_daemon_keeps_ready_workspaces_and_removes_interrupted_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = test_config();
    config.agents.insert("committer".into(), committer());
    let d = TestDaemon::start_on(tmp.path(), config.clone()).await;
    let repo = TestRepo::with_files(2);
    let (_, body) = spawn_in(&d, repo.path(), json!({"path": repo.path()})).await;
    let kept = body["session"].clone();
    d.stop().await;

    // What a daemon stopped mid-way through a spawn leaves: a row short of `ready` and a
    // worktree on a branch that never moved.
    let store = atc::store::StateStore::open(&tmp.path().join("atc.db"))
        .await
        .unwrap();
    let half = atc_protocol::SessionId::new();
    let dir = tmp.path().join("workspaces").join("half-made");
    let branch = "atc/half-made";
    let sha = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        branch,
        &dir.display().to_string(),
        &sha,
    ]);
    let row = atc::workspaces::record::Materialization {
        session_id: half,
        target: "local".into(),
        dir: dir.clone(),
        source_kind: atc::workspaces::record::SourceKind::Path,
        phase: atc::workspaces::Phase::Cloning,
        repo_url: repo.path().display().to_string(),
        sha: Some(sha),
        git_ref: None,
        branch: Some(branch.into()),
        host_key: None,
        error_code: None,
        started_at: 1,
        updated_at: 1,
        materialized_at: None,
        withheld_env: Vec::new(),
    };
    store.workspace_begin(&row).await.unwrap();
    store.close().await.unwrap();

    let d = TestDaemon::start_on(tmp.path(), config).await;
    assert!(!dir.exists(), "the half-made worktree is removed");
    assert!(repo.git(&["branch", "--list", branch]).trim().is_empty());
    assert!(!repo.git(&["worktree", "list"]).contains("half-made"));
    let id = id_of(&kept);
    let now = d.session(&id).await;
    assert_eq!(now["workspace"], kept["workspace"]);
    d.stop().await;
    let store = atc::store::StateStore::open(&tmp.path().join("atc.db"))
        .await
        .unwrap();
    let failed = store.workspace_get(half).await.unwrap().unwrap();
    assert_eq!(failed.phase, atc::workspaces::Phase::Failed);
    assert_eq!(failed.error_code.as_deref(), Some("workspace_interrupted"));
    store.close().await.unwrap();
}

#[actix_rt::test]
async fn a_keyed_spawn_makes_its_workspace_once() {
    let (d, _tmp) = daemon().await;
    let repo = TestRepo::with_files(1);
    let body =
        json!({"agent": "committer", "cwd": repo.path(), "workspace": {"path": repo.path()}});
    let (status, replayed, first) = d.keyed_spawn("ws-key", &body, false).await;
    assert_eq!((status, replayed), (201, false), "{first}");
    let (status, replayed, again) = d.keyed_spawn("ws-key", &body, false).await;
    assert_eq!((status, replayed), (200, true), "{again}");
    assert_eq!(again["session"]["id"], first["session"]["id"]);
    assert_eq!(again["session"]["workspace"], first["session"]["workspace"]);
    let made = std::fs::read_dir(root(&d)).unwrap().count();
    assert_eq!(made, 1, "one workspace for one key");
    assert_eq!(repo.git(&["branch", "--list", "atc/*"]).lines().count(), 1);
    // The workspace is part of what the key hashes: another one under it is a conflict.
    let other = json!({"agent": "committer", "cwd": repo.path(),
                       "workspace": {"path": repo.path(), "ref": "main"}});
    let (status, _, conflict) = d.keyed_spawn("ws-key", &other, false).await;
    assert_eq!(
        (status, &conflict["error"]["code"]),
        (409, &json!("idempotency_conflict"))
    );
}

#[actix_rt::test]
async fn a_plain_session_inside_another_sessions_workspace_is_refused() {
    let (d, _tmp) = daemon().await;
    let repo = TestRepo::with_files(2);
    let (_, body) = spawn_in(&d, repo.path(), json!({"path": repo.path()})).await;
    let dir = PathBuf::from(body["session"]["workspace"]["dir"].as_str().unwrap());
    for cwd in [dir.clone(), dir.join("src")] {
        let (status, answer) = d
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"agent": "cat", "cwd": cwd})),
            )
            .await;
        assert_eq!(status, 409, "{answer}");
        assert_eq!(answer["error"]["code"], "workspace_overlap");
        assert_eq!(answer["error"]["data"]["phase"], "resolving");
    }
    // The repository itself is not the workspace: a plain session there is fine, and so is a
    // second workspace of it.
    let (status, answer) = d
        .call(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "cat", "cwd": repo.path()})),
        )
        .await;
    assert_eq!(status, 201, "{answer}");
    let (status, answer) = spawn_in(&d, repo.path(), json!({"path": repo.path()})).await;
    assert_eq!(status, 201, "{answer}");
}

#[actix_rt::test]
async fn the_workspace_route_says_where_the_copy_stands() {
    let (d, _tmp) = daemon().await;
    let repo = TestRepo::with_files(2);
    let base = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    let (_, body) = spawn_in(&d, repo.path(), json!({"path": repo.path(), "ref": "main"})).await;
    let s = &body["session"];
    let id = id_of(s);
    let dir = PathBuf::from(s["workspace"]["dir"].as_str().unwrap());
    d.wait_screen(&id, "pwd:").await;
    d.submit(&id, "commit").await;
    d.wait_screen(&id, "committed").await;
    std::fs::write(dir.join("src/f0.txt"), "edited\n").unwrap();
    repo.write("upstream.txt", "moved on");
    repo.commit("main moves on");

    let (status, st) = d
        .call("GET", &format!("/v1/sessions/{id}/workspace"), None)
        .await;
    assert_eq!(status, 200, "{st}");
    assert_eq!(st["branch"], s["workspace"]["branch"]);
    assert_eq!((&st["base"], &st["ref"]), (&json!(base), &json!("main")));
    assert_eq!(
        (&st["ahead"], &st["behind"]),
        (&json!(1), &json!(1)),
        "{st}"
    );
    assert_eq!(
        st["changed"],
        json!([{"path": "src/f0.txt", "status": " M"}])
    );
    assert_eq!(st["changedTruncated"], false);
    assert_eq!(st["diffStat"]["files"], 2, "{st}");

    // A session without a workspace has nothing to say.
    let plain = id_of(&d.spawn("cat").await);
    let (status, answer) = d
        .call("GET", &format!("/v1/sessions/{plain}/workspace"), None)
        .await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (422, &json!("unsupported_operation"))
    );
    assert_eq!(answer["error"]["data"]["problem"], "no_workspace");
}

#[actix_rt::test]
async fn a_url_becomes_a_clone_whose_unpushed_work_is_kept_from_a_forget() {
    let (d, _tmp) = daemon().await;
    let origin = TestRepo::with_files(3);
    origin.git(&["branch", "feature"]);
    let url = format!("file://{}", origin.path().display());
    let cwd = std::env::temp_dir();
    let (status, body) = spawn_in(&d, &cwd, json!({"url": url, "ref": "feature"})).await;
    assert_eq!(status, 201, "{body}");
    let s = &body["session"];
    let id = id_of(s);
    let ws = &s["workspace"];
    assert_eq!(
        (&ws["repoURL"], &ws["ref"]),
        (&json!(url), &json!("feature"))
    );
    let dir = PathBuf::from(ws["dir"].as_str().unwrap());
    assert_eq!(
        s["cwd"],
        json!(dir),
        "a cwd outside the repository starts at the copy's root"
    );
    assert!(dir.join("src/f2.txt").is_file());
    let branch = ws["branch"].as_str().unwrap();
    assert_eq!(git_in(&dir, &["branch", "--show-current"]).trim(), branch);
    d.wait_screen(&id, &format!("pwd:{}", dir.display())).await;

    // A commit that was never pushed would go with the clone.
    d.submit(&id, "commit").await;
    d.wait_screen(&id, "committed").await;
    let (status, body) = d.call("DELETE", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["data"]["unkeptCommits"], 1, "{body}");
    // Pushed, it is kept elsewhere: the forget goes through.
    git_in(&dir, &["push", "-q", "origin", branch]);
    let (status, body) = d.call("DELETE", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(!dir.exists());
    assert!(origin.git(&["log", "--format=%s", branch]).contains(&id));
}

#[actix_rt::test]
async fn a_target_that_cannot_take_a_workspace_is_refused_before_any_git_runs() {
    use std::sync::Arc;
    let parsed = atc::config::Config::from_json(
        br#"{"targets": {"local": {"provider": "local-pty"}, "bare": {"provider": "bare-pty"}}}"#,
    );
    let config = atc::config::Config {
        targets: parsed.targets,
        ..test_config()
    };
    // The local PTY without `transfer`, behind the provider trait.
    let bare = atc_testkit::caps_provider::CapsProvider {
        kind: "bare-pty",
        inner: Arc::new(atc::providers::local::LocalPty {
            exit_drain: config.timings.exit_drain,
            withheld: Vec::new(),
            cgroups: None,
        }),
        adjust: |c| atc::providers::Capabilities {
            transfer: false,
            ..c
        },
    };
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_with_providers(
        tmp.path(),
        config,
        atc::daemon::ExtraProviders::default().with(Arc::new(bare)),
    )
    .await;
    // A path that is no repository: had git run, the answer would be `not_a_git_repo`.
    let plain = tempfile::tempdir().unwrap();
    let body = json!({"agent": "cat", "cwd": plain.path(), "target": "bare",
                      "workspace": {"path": plain.path()}});
    let (status, answer) = d.call("POST", "/v1/sessions", Some(body)).await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["error"]["code"], "unsupported_operation");
    assert_eq!(answer["error"]["data"]["capability"], "transfer");
    assert_nothing_left(&d, plain.path()).await;
}

#[actix_rt::test]
async fn a_workspace_is_sent_into_an_imp_and_verified_there() {
    use atc_testkit::impd_sim::{ImpdSim, SimOptions};
    let sim = ImpdSim::start(SimOptions::default());
    let config =
        atc_testkit::with_imp_target(test_config(), &sim.url(), sim.token_file(), json!({}));
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let repo = TestRepo::with_files(3);
    repo.write(".git-secret-check", "x");
    repo.commit("one more");
    let head = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    let url = format!("file://{}", repo.path().display());
    for workspace in [
        json!({"path": repo.path()}),
        json!({"url": url, "ref": "main"}),
    ] {
        let body = json!({"agent": "sh", "cwd": "/tmp", "target": "box", "workspace": workspace});
        let (status, answer) = d.call("POST", "/v1/sessions", Some(body)).await;
        assert_eq!(status, 201, "{answer}");
        let s = &answer["session"];
        let id = id_of(s);
        let ws = &s["workspace"];
        assert_eq!(ws["sha"], json!(head), "{ws}");
        assert!(
            ws["branch"].is_null(),
            "a copy in an imp has no history: {ws}"
        );
        let dir = ws["dir"].as_str().unwrap();
        assert!(dir.ends_with(&format!("/sessions/{id}/workspace")), "{dir}");
        assert_eq!(s["cwd"], json!(dir));
        // The session runs in the copy, inside its imp; the copy holds the tree and no `.git`.
        d.submit(&id, "cat src/f2.txt; ls -a | grep -c '^.git$'")
            .await;
        d.wait_screen(&id, "file 2\n0").await;
        let (status, answer) = d
            .call("GET", &format!("/v1/sessions/{id}/workspace"), None)
            .await;
        assert_eq!(
            (status, &answer["error"]["data"]["problem"]),
            (422, &json!("remote_workspace"))
        );
    }
    // Nothing of it stays on this machine: no worktree, no staging clone.
    assert_nothing_left_on_disk(&d, repo.path());
}

/// No directory under the workspaces' root, and no branch of a session's in `repo`.
fn assert_nothing_left_on_disk(d: &TestDaemon, repo: &Path) {
    let made: Vec<_> = std::fs::read_dir(root(d))
        .map(|r| r.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(made.is_empty(), "left behind: {made:?}");
    let branches = git_in(repo, &["branch", "--list", "atc/*"]);
    assert_eq!(branches.trim(), "", "branches left: {branches}");
}

#[actix_rt::test]
async fn orphans_are_listed_and_pruned_without_losing_work_unless_forced() {
    let (d, _tmp) = daemon().await;
    let repo = TestRepo::with_files(1);
    // A workspace a listed session owns is never an orphan.
    let (_, body) = spawn_in(&d, repo.path(), json!({"path": repo.path()})).await;
    let owned = body["session"]["workspace"]["dir"]
        .as_str()
        .unwrap()
        .to_string();
    // Three that no session owns: a worktree (its branch keeps its commits), a clone with a
    // commit never pushed, and a directory git never finished.
    let root = root(&d);
    let worktree = root.join("lost-worktree");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "atc/lost",
        &worktree.display().to_string(),
    ]);
    let clone = root.join("lost-clone");
    git_in(
        &root,
        &[
            "clone",
            "-q",
            &repo.path().display().to_string(),
            "lost-clone",
        ],
    );
    git_in(
        &clone,
        &["commit", "-q", "--allow-empty", "-m", "never pushed"],
    );
    let unfinished = root.join("unfinished");
    std::fs::create_dir(&unfinished).unwrap();

    let (status, list) = d.call("GET", "/v1/workspaces/orphans", None).await;
    assert_eq!(status, 200, "{list}");
    let dirs: Vec<&str> = list["orphans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["dir"].as_str().unwrap())
        .collect();
    assert!(!dirs.contains(&owned.as_str()), "{list}");
    assert_eq!(dirs.len(), 3, "{list}");

    let (status, done) = d.call("POST", "/v1/workspaces/prune", None).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["removed"].as_array().unwrap().len(), 2, "{done}");
    assert_eq!(done["kept"][0]["dir"], json!(clone), "{done}");
    assert_eq!(done["kept"][0]["unkeptCommits"], 1, "{done}");
    assert!(clone.exists() && !worktree.exists() && !unfinished.exists());
    assert!(!repo
        .git(&["branch", "--list", "atc/lost"])
        .trim()
        .is_empty());
    assert!(Path::new(&owned).exists());

    let (status, done) = d
        .call("POST", "/v1/workspaces/prune", Some(json!({"force": true})))
        .await;
    assert_eq!((status, &done["removed"]), (200, &json!([clone])), "{done}");
    assert!(!clone.exists());
    let (status, body) = d
        .call("POST", "/v1/workspaces/prune", Some(json!({"forse": true})))
        .await;
    assert_eq!(
        (status, &body["error"]["data"]["field"]),
        (400, &json!("forse"))
    );
}

/// A `program` first on a `PATH` (the daemon's, or an imp image's) that runs the real one, and
/// when its arguments hold `pause_on`, marks `mark` once the real command is done and then
/// hangs: whoever ran it is in that phase, with what the command made on disk, when the test
/// kills it. With `fail`, it exits 2 there instead, having done nothing.
fn wrapped(bin: &Path, program: &str, pause_on: &str, mark: &Path, fail: bool) {
    use std::os::unix::fs::PermissionsExt;
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", &format!("command -v {program}")])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let then = match fail {
        true => "exit 2".to_string(),
        false => format!(
            "'{}' \"$@\"; touch '{}'; exec sleep 60",
            real.trim(),
            mark.display()
        ),
    };
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in *'{pause_on}'*) {then};; esac\nexec '{real}' \"$@\"\n",
        real = real.trim(),
    );
    std::fs::create_dir_all(bin).unwrap();
    let path = bin.join(program);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `bin` first, then this machine's `PATH`.
fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Sends `body` as a keyed spawn (key `key`) to `d`, waits until the spawn is paused in
/// `phase` (`mark` exists), and SIGKILLs the daemon there. The request is answered by the
/// daemon's death, and nobody reads the answer.
async fn kill_in_phase(
    d: atc_testkit::ChildDaemon,
    body: &Value,
    key: &str,
    mark: &Path,
    phase: &str,
) {
    let (url, token, keyed, key) = (
        d.url().to_string(),
        d.token().to_string(),
        body.clone(),
        key.to_string(),
    );
    actix_rt::spawn(async move {
        let _ = atc_testkit::http_client()
            .post(format!("{url}/v1/sessions"))
            .bearer_auth(token)
            .insert_header(("Idempotency-Key", key))
            .send_json(&keyed)
            .await;
    });
    atc_testkit::wait_for(
        atc_testkit::WITHIN,
        format!("the spawn in its {phase} phase"),
        async || mark.exists().then_some(()),
    )
    .await;
    d.kill();
}

#[actix_rt::test]
async fn a_daemon_killed_in_each_phase_leaves_nothing_and_its_key_answers_outcome_unknown() {
    use atc_testkit::ChildDaemon;
    let config = json!({"agents": {"cat": {"bin": "cat"}}});
    // `ls-tree` runs while resolving (the tree checked for what a copy cannot carry),
    // `worktree add` is the cloning phase itself.
    for (phase, pause_on) in [("resolving", "ls-tree"), ("cloning", "worktree add")] {
        let tmp = tempfile::tempdir().unwrap();
        let (state, bin, mark) = (
            tmp.path().join("state"),
            tmp.path().join("bin"),
            tmp.path().join("paused"),
        );
        wrapped(&bin, "git", pause_on, &mark, false);
        let log = tmp.path().join("daemon.log");
        let mut cmd = ChildDaemon::command(&state, &config, &log);
        cmd.env("PATH", path_with(&bin));
        let d = ChildDaemon::spawn(cmd, &state, &log).await;
        let repo = TestRepo::with_files(3);
        let body = json!({"agent": "cat", "cwd": repo.path(), "workspace": {"path": repo.path()}});
        kill_in_phase(d, &body, "killed-key", &mark, phase).await;

        let d = ChildDaemon::start(&state, &config, &log).await;
        let api = d.api();
        let made: Vec<_> = std::fs::read_dir(state.join("workspaces"))
            .map(|r| r.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(made.is_empty(), "{phase}: left behind {made:?}");
        assert_eq!(
            repo.git(&["branch", "--list", "atc/*"]).trim(),
            "",
            "{phase}"
        );
        assert_eq!(
            repo.git(&["worktree", "list"]).lines().count(),
            1,
            "{phase}"
        );
        let (_, sessions) = api.call("GET", "/v1/sessions", None).await;
        assert_eq!(sessions["sessions"], json!([]), "{phase}: {sessions}");
        // The key's effect may or may not have happened as far as the daemon knows: the spec
        // answers so rather than run the spawn twice.
        let (status, _, answer) = api.keyed_spawn("killed-key", &body, false).await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (409, &json!("outcome_unknown")),
            "{phase}: {answer}"
        );
        // A fresh spawn makes its workspace as ever.
        let (status, answer) = api.call("POST", "/v1/sessions", Some(body)).await;
        assert_eq!(status, 201, "{phase}: {answer}");
        d.stop().await;
    }
}

#[actix_rt::test]
async fn a_transfer_that_fails_takes_back_the_imp_it_made() {
    use atc_testkit::impd_sim::{ImpdSim, SimOptions};
    let tmp = tempfile::tempdir().unwrap();
    let image_bin = tmp.path().join("image-bin");
    // The imp's tar refuses any archive: the unpack fails.
    wrapped(&image_bin, "tar", "-x", &tmp.path().join("never"), true);
    let sim = ImpdSim::start(SimOptions {
        image_path: Some(path_with(&image_bin)),
        ..SimOptions::default()
    });
    let config =
        atc_testkit::with_imp_target(test_config(), &sim.url(), sim.token_file(), json!({}));
    let d = TestDaemon::start_on(&tmp.path().join("state"), config).await;
    let repo = TestRepo::with_files(2);
    let body = json!({"agent": "sh", "cwd": "/tmp", "target": "box",
                      "workspace": {"path": repo.path()}});
    let (status, answer) = d.call("POST", "/v1/sessions", Some(body)).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (502, &json!("transfer_failed")),
        "{answer}"
    );
    assert_eq!(answer["error"]["data"]["phase"], "transferring");
    assert!(
        sim.imps().is_empty(),
        "the imp made for the spawn is gone: {:?}",
        sim.imps()
    );
    assert_nothing_left(&d, repo.path()).await;
}

#[actix_rt::test]
async fn a_daemon_killed_while_sending_a_workspace_in_leaves_no_row_short_of_failed() {
    use atc_testkit::impd_sim::{ImpdSim, SimOptions};
    use atc_testkit::ChildDaemon;
    // `tar -x` unpacks in the transferring phase, `find` counts in the verifying one.
    for (phase, program, pause_on) in [
        ("transferring", "tar", "-x"),
        ("verifying", "find", "! -type d"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (image_bin, mark) = (tmp.path().join("image-bin"), tmp.path().join("paused"));
        wrapped(&image_bin, program, pause_on, &mark, false);
        let sim = ImpdSim::start(SimOptions {
            image_path: Some(path_with(&image_bin)),
            ..SimOptions::default()
        });
        let config = json!({
            "agents": {"sh": {"bin": "/bin/sh"}},
            "targets": {"box": {"provider": "imp", "url": sim.url(), "tokenFile": sim.token_file()}},
            "defaultTarget": "box",
        });
        let (state, log) = (tmp.path().join("state"), tmp.path().join("daemon.log"));
        let d = ChildDaemon::start(&state, &config, &log).await;
        let repo = TestRepo::with_files(2);
        let body = json!({"agent": "sh", "cwd": "/tmp", "workspace": {"path": repo.path()}});
        kill_in_phase(d, &body, "sent-key", &mark, phase).await;

        let d = ChildDaemon::start(&state, &config, &log).await;
        let api = d.api();
        let (_, sessions) = api.call("GET", "/v1/sessions", None).await;
        assert_eq!(sessions["sessions"], json!([]), "{phase}: {sessions}");
        let (status, _, answer) = api.keyed_spawn("sent-key", &body, false).await;
        assert_eq!(
            (status, &answer["error"]["code"]),
            (409, &json!("outcome_unknown")),
            "{phase}: {answer}"
        );
        d.stop().await;
        let store = atc::store::StateStore::open(&state.join("atc.db"))
            .await
            .unwrap();
        let rows = store.workspaces_all().await.unwrap();
        store.close().await.unwrap();
        assert_eq!(rows.len(), 1, "{phase}: {rows:?}");
        assert_eq!(rows[0].phase, atc::workspaces::Phase::Failed, "{phase}");
        assert_eq!(
            rows[0].error_code.as_deref(),
            Some("workspace_interrupted"),
            "{phase}"
        );
        assert!(
            rows[0].host_key.is_some(),
            "{phase}: the row names the imp's host"
        );
        // The imp readied for the spawn went with it, half-made copy and all.
        assert!(sim.imps().is_empty(), "{phase}: {:?}", sim.imps());
    }
}
