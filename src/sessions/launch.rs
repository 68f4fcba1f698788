//! Everything a start of a session's harness (spawn or revive) needs besides the agent's
//! configured argv: the session record file, atc's environment variables, Claude's settings
//! file and Codex's notify program (each running the provider's guest atc on a remote host,
//! else the daemon's own),
//! and the argv shape of the agent's kind ([`crate::agents::launch`]).
//!
//! Files that cannot be written are logged and left out: they inform and connect the agent,
//! and must not stop a session from starting. (A Claude session without its settings file
//! runs without atc's hooks; its attention state then only follows exits.)

use crate::agents::agent_session_id::AgentSessionId;
use crate::agents::launch::{shaped_args, StartExtras};
use crate::agents::AgentKind;
use crate::agents::LaunchPlan;
use crate::config::attention::AttentionMode;

use super::session::{SessionDeps, SessionRecord};
use crate::clock::now_ms;

/// Readies `plan` for one start of `record`'s harness; `resume` is the agent's own session id
/// when this start resumes it. Sets `ATC_SESSION_RECORD`, `ATC_SOCKET` and `ATC_REPORT_KEY`
/// (`ATC_SESSION_ID` is set by the provider).
pub fn prepare(
    record: &SessionRecord,
    deps: &SessionDeps,
    plan: &mut LaunchPlan,
    resume: Option<&AgentSessionId>,
) {
    let session = serde_json::json!({
        "id": record.id,
        "name": record.name,
        "agent": record.agent,
        "cwd": record.cwd,
        "args": record.args,
        "createdAt": record.created_at,
    });
    let contents = super::record_file::contents(session, &deps.daemon_id, now_ms());
    match super::record_file::write(&deps.state_dir, &record.id, &contents) {
        Ok(path) => {
            plan.env
                .insert("ATC_SESSION_RECORD".into(), path.display().to_string());
        }
        Err(e) => {
            tracing::warn!(session = %record.id, error = %e, "could not write the session record")
        }
    }
    plan.env.insert(
        "ATC_SOCKET".into(),
        deps.reporter_socket.display().to_string(),
    );
    plan.env.insert(
        super::report_key::ENV.into(),
        deps.report_keys.key_for(record.id),
    );
    let agent = deps.catalog.get(&record.agent);
    let kind = agent.and_then(|a| a.kind);
    // A remote host's hooks run the atc installed inside it, never one found on its PATH.
    let provider = deps.providers.get(&record.target);
    let guest_atc = provider.and_then(|p| p.guest_atc());
    let remote = provider.is_some_and(|p| p.remote());
    // Codex's notify runs where Codex runs: wired only where an atc is known to be there, and
    // not for an agent whose attention follows nothing.
    let attends = agent.is_some_and(|a| a.attention != AttentionMode::None);
    let wire_notify = kind == Some(AgentKind::Codex) && attends && (!remote || guest_atc.is_some());
    let atc = guest_atc.unwrap_or_else(|| deps.atc_program.clone());
    let notify = wire_notify.then_some(atc.as_path());
    let settings = (kind == Some(AgentKind::Claude))
        .then(|| {
            let contents = crate::agents::claude_settings::settings(
                &atc,
                &super::status_file::path(&deps.state_dir),
                agent.and_then(|a| a.settings.as_ref()),
            );
            crate::agents::claude_settings::write(&deps.state_dir, &record.id, &contents)
                .map_err(|e| {
                    tracing::warn!(session = %record.id, error = %e, "could not write the Claude settings file; the agent runs without atc's hooks")
                })
                .ok()
        })
        .flatten();
    plan.hooks = settings.is_some();
    plan.args = shaped_args(
        kind,
        &plan.args,
        StartExtras {
            settings: settings.as_deref(),
            resume,
            notify,
        },
    );
}

/// The part of a spawn that blocks its thread, run on the daemon's blocking threads
/// ([`super::blocking_threads`]) so the sessions' thread keeps serving everything else meanwhile: the
/// session's record and settings files (creating a file took a third of that thread's time in a
/// spawn storm, docs/performance-log.md, "Spawns, 2026-12-02"), and the provider's launch of
/// the process (a local fork and exec). `deps` come back with the spec, for the session to be
/// started with.
pub(super) async fn off_thread(
    record: SessionRecord,
    plan: LaunchPlan,
    deps: SessionDeps,
) -> Result<
    (SessionRecord, crate::providers::StartSpec, SessionDeps),
    super::session_error::SessionError,
> {
    let queued = std::time::Instant::now();
    let job = move || {
        let waited_here = queued.elapsed();
        let mut spec = super::session::Session::spawn_spec(&record, plan, &deps);
        if let Some(launch) = deps
            .providers
            .get(&record.target)
            .and_then(|p| p.launcher(&spec))
        {
            let launched = launch()?;
            // A launch waits twice: here for a blocking thread, then for a launcher.
            deps.metrics
                .process_launched(waited_here + launched.times.waited, launched.times.ran);
            spec.launched = Some(launched);
        }
        Ok((record, spec, deps))
    };
    match super::blocking_threads::run(job).await {
        Ok(planned) => planned,
        Err(e) => {
            // A panic in the launch; a child that had started went with its `Child`.
            tracing::error!(error = %e, "a process launch did not finish");
            Err(super::session_error::SessionError::Internal)
        }
    }
}
