//! `atc spawn`: starts a session and prints its id on stdout, so scripts can chain
//! `id=$(atc spawn ...)`; with `--attach` it attaches this terminal to the new session
//! instead (the id goes to stderr, since stdout becomes the session's terminal). The working directory defaults to the current one, made absolute
//! (the daemon requires an absolute path); the size is this terminal's, or 80x24 when stdout
//! is not a terminal. Options the user did not give are left out of the request so the
//! daemon's own defaults apply.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::Value;

use super::{attach, output, terminal};
use atc_client::atc_protocol::requests::SpawnRequest;
use atc_client::atc_protocol::workspace::WorkspaceRequest;
use atc_client::atc_protocol::AttachMode;
use atc_client::{routes, session, DaemonClient, SessionLabels};

/// Arguments of `atc spawn`.
#[derive(Debug, Args)]
pub struct SpawnArgs {
    /// Agent to run, e.g. `claude` or `shell` (default: the daemon's default agent).
    #[arg(long)]
    pub agent: Option<String>,
    /// Where to run it, a target name from the daemon's config (default: local).
    #[arg(long)]
    pub target: Option<String>,
    /// Working directory (default: the current directory).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// Session name (default: the daemon picks one from the directory name).
    #[arg(long)]
    pub name: Option<String>,
    /// Model override passed to the agent.
    #[arg(long)]
    pub model: Option<String>,
    /// Effort override passed to the agent, e.g. `high`.
    #[arg(long)]
    pub effort: Option<String>,
    /// Work in a copy of its own of this repository: a local repository (a git worktree on a
    /// branch of its own) or a URL to clone, optionally at a ref or commit (`PATH@REF`).
    #[arg(long, value_name = "PATH[@REF]")]
    pub workspace: Option<String>,
    /// Limit the session's memory to this many MiB (only lower than config allows).
    #[arg(long, value_name = "MIB")]
    pub memory_mib: Option<u64>,
    /// Limit the session to this many processes and threads at once.
    #[arg(long, value_name = "N")]
    pub pids: Option<u32>,
    /// Limit the session's CPU, in percent of one core (200 is two cores).
    #[arg(long, value_name = "PERCENT")]
    pub cpu_percent: Option<u32>,
    /// Make it a sub-session of this session (id or name). It joins the parent's host when
    /// it runs on the parent's target (give `--target` unless that is the default one).
    #[arg(long, value_name = "ID")]
    pub parent: Option<String>,
    /// Attach this terminal to the new session at once (Ctrl-\ detaches).
    #[arg(long)]
    pub attach: bool,
}

/// Spawns the session and prints its id. Warnings from the daemon go to stderr.
pub async fn run(client: &DaemonClient, args: SpawnArgs) -> anyhow::Result<i32> {
    let cwd = absolute_cwd(args.cwd.as_deref())?;
    let size = terminal::stdout_size().unwrap_or(terminal::FALLBACK_SIZE);
    let body = serde_json::to_value(spawn_body(&args, &cwd, size))?;
    let answer = client.post_json(routes::SESSIONS, &body).await?;
    for warning in warnings(&answer) {
        output::note(&format!("warning: {warning}"));
    }
    let created = session::parse_one(answer)?;
    if args.attach {
        output::note(&format!("spawned {} ({})", created.label(), created.id));
        return attach::attach_to(client, created, AttachMode::Interactive).await;
    }
    output::print(&format!("{}\n", created.id))?;
    Ok(0)
}

/// The directory to spawn in as an absolute UTF-8 string (JSON cannot carry other paths).
fn absolute_cwd(given: Option<&Path>) -> anyhow::Result<String> {
    let path = match given {
        Some(path) => path.to_path_buf(),
        None => std::env::current_dir().map_err(|err| {
            anyhow::anyhow!("cannot read the current directory ({err}); pass --cwd DIR")
        })?,
    };
    let absolute = std::path::absolute(&path)
        .map_err(|err| anyhow::anyhow!("cannot make {} absolute: {err}", path.display()))?;
    absolute.to_str().map(str::to_string).ok_or_else(|| {
        anyhow::anyhow!(
            "the directory {} is not valid UTF-8, which the daemon cannot accept; \
             pass --cwd with a UTF-8 path",
            absolute.display()
        )
    })
}

/// The `POST /v1/sessions` body: `cwd` and the size always, everything else only when given.
pub fn spawn_body(args: &SpawnArgs, cwd: &str, size: terminal::TermSize) -> SpawnRequest {
    SpawnRequest {
        cwd: cwd.to_string(),
        cols: Some(size.cols),
        rows: Some(size.rows),
        agent: args.agent.clone(),
        target: args.target.clone(),
        name: args.name.clone(),
        model: args.model.clone(),
        effort: args.effort.clone(),
        workspace: args.workspace.as_deref().map(workspace_arg),
        limits: Some(atc_client::atc_protocol::SessionLimits {
            memory_mib: args.memory_mib,
            pids: args.pids,
            cpu_percent: args.cpu_percent,
        })
        .filter(|l| !l.is_empty()),
        parent: args.parent.clone(),
    }
}

/// `--workspace PATH[@REF]` or `URL[@REF]`: a path is made absolute, and its ref is what
/// follows the last `@` when what comes before it is a directory (a path may hold an `@` of
/// its own). A URL (`scheme://…` or `user@host:path`) takes a ref after an `@` that follows its
/// last `/`. A ref of 7 to 40 hex digits is sent as a `sha`.
pub fn workspace_arg(text: &str) -> WorkspaceRequest {
    let is_url = text.contains("://")
        || text
            .split_once(':')
            .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/'));
    let (source, git_ref) = match text.rsplit_once('@') {
        Some((before, r))
            if is_url && !r.is_empty() && !r.contains('/') && before.contains('/') =>
        {
            (before, Some(r))
        }
        Some((path, r)) if !is_url && !r.is_empty() && Path::new(path).is_dir() => (path, Some(r)),
        _ => (text, None),
    };
    let is_sha = |r: &str| (7..=40).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_hexdigit());
    let (path, url) = match is_url {
        true => (None, Some(source.to_string())),
        false => (
            Some(
                std::path::absolute(source)
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| source.to_string()),
            ),
            None,
        ),
    };
    WorkspaceRequest {
        path,
        url,
        git_ref: git_ref.filter(|r| !is_sha(r)).map(str::to_string),
        sha: git_ref.filter(|r| is_sha(r)).map(str::to_string),
    }
}

/// The spawn answer's `warnings`, as text whether the daemon sends strings or objects with a
/// `message`.
fn warnings(answer: &Value) -> Vec<String> {
    let Some(list) = answer.get("warnings").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .map(|w| match w {
            Value::String(text) => text.clone(),
            other => other
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| other.to_string(), str::to_string),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args() -> SpawnArgs {
        SpawnArgs {
            agent: None,
            target: None,
            cwd: None,
            name: None,
            model: None,
            effort: None,
            workspace: None,
            memory_mib: None,
            pids: None,
            cpu_percent: None,
            parent: None,
            attach: false,
        }
    }

    #[test]
    fn a_workspace_is_a_path_with_an_optional_ref_or_sha() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let ask = workspace_arg(&format!("{d}@feature/x"));
        assert_eq!(ask.path.as_deref(), Some(d.as_str()));
        assert_eq!(ask.git_ref.as_deref(), Some("feature/x"));
        let ask = workspace_arg(&format!("{d}@abcdef0"));
        assert_eq!((ask.git_ref, ask.sha.as_deref()), (None, Some("abcdef0")));
        // No directory before the `@`: it is part of the path.
        let ask = workspace_arg("/nowhere/a@b");
        assert_eq!(
            (ask.path.as_deref(), ask.git_ref),
            (Some("/nowhere/a@b"), None)
        );
        assert!(workspace_arg("rel").path.unwrap().starts_with('/'));
        // URLs, with or without a ref after their last `/`.
        let ask = workspace_arg("https://h/o/r.git@main");
        assert_eq!(
            (ask.url.as_deref(), ask.git_ref.as_deref()),
            (Some("https://h/o/r.git"), Some("main"))
        );
        let ask = workspace_arg("git@github.com:o/r.git");
        assert_eq!(
            (ask.url.as_deref(), ask.git_ref, ask.path),
            (Some("git@github.com:o/r.git"), None, None)
        );
        let ask = workspace_arg("git@github.com:o/r.git@abcdef01");
        assert_eq!(
            (ask.url.as_deref(), ask.sha.as_deref()),
            (Some("git@github.com:o/r.git"), Some("abcdef01"))
        );
    }

    #[test]
    fn body_leaves_out_what_was_not_given() {
        let body = spawn_body(
            &args(),
            "/w",
            terminal::TermSize {
                cols: 100,
                rows: 30,
            },
        );
        assert_eq!(
            serde_json::to_value(body).unwrap(),
            json!({"cwd": "/w", "cols": 100, "rows": 30})
        );
    }

    #[test]
    fn body_passes_given_options_through() {
        let given = SpawnArgs {
            agent: Some("claude".into()),
            target: Some("box".into()),
            name: Some("n".into()),
            model: Some("opus".into()),
            effort: Some("high".into()),
            memory_mib: Some(512),
            cpu_percent: Some(50),
            ..args()
        };
        let body = spawn_body(&given, "/w", terminal::FALLBACK_SIZE);
        assert_eq!(
            serde_json::to_value(body).unwrap(),
            json!({"cwd": "/w", "cols": 80, "rows": 24, "agent": "claude", "target": "box",
                   "name": "n", "model": "opus", "effort": "high",
                   "limits": {"memoryMiB": 512, "cpuPercent": 50}})
        );
    }

    #[test]
    fn relative_cwd_is_made_absolute() -> anyhow::Result<()> {
        let cwd = absolute_cwd(Some(Path::new("some/dir")))?;
        assert!(Path::new(&cwd).is_absolute());
        assert!(cwd.ends_with("some/dir"));
        Ok(())
    }

    #[test]
    fn warnings_accept_strings_and_objects() {
        let answer = json!({"warnings": ["a", {"code": "x", "message": "b"}]});
        assert_eq!(warnings(&answer), vec!["a".to_string(), "b".to_string()]);
        assert!(warnings(&json!({})).is_empty());
    }
}
