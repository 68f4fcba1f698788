//! The manager's side of sub-sessions (spec §3.5 steps 3 and 6, §3.7, §3.8, §4.5). The
//! manager alone knows which sessions share a host key, so it places a new sub-session under
//! its parent (the parent still listed, its host joined or not, its auth binding the same,
//! its workspace inherited) and passes what an owner did to its host on to every other
//! session there. The cwd mapping into a parent's copy is a plain function with unit tests.

use std::path::{Path, PathBuf};

use actix::prelude::*;

use super::SessionManager;
use crate::providers::imp::broker::BrokerError;
use crate::sessions::fleet::Entry;
use crate::sessions::host_key::{self, NewPlace, ParentHost};
use crate::sessions::host_messages::{
    GoWithHost, HostDestroyed, HostIdle, HostSlept, HostWoken, SleepWithHost,
};
use crate::sessions::messages::{Forget, Kill, ParentGone, ParentKilled, Revive, Spawn};
use crate::sessions::session::Session;
use crate::sessions::session_error::SessionError;
use atc_protocol::{Descriptor, ExitReason, SessionId};

impl SessionManager {
    /// The spawn's parent as listed now, at the top of its tree: the route resolved it, but
    /// it may have been forgotten since (`no_such_session`).
    pub(super) fn parent_of(&self, msg: &Spawn) -> Result<Option<Descriptor>, SessionError> {
        let Some(id) = msg.parent else {
            return Ok(None);
        };
        let listed = |id: SessionId| {
            self.sessions
                .get(&id)
                .map(|e| e.descriptor().clone())
                .ok_or_else(|| SessionError::NoSuch {
                    key: id.to_string(),
                })
        };
        let parent = listed(id)?;
        let top = match parent.parent {
            Some(up) => listed(up)?,
            None => parent,
        };
        // Spec §3.5 step 10: a tree that left the principal's reach meanwhile is missing.
        if let Some(reach) = &msg.reach {
            let fleet = self.sessions.entries().map(Entry::descriptor);
            if !crate::sessions::reach::in_reach(reach, &top, fleet) {
                return Err(SessionError::NoSuch {
                    key: id.to_string(),
                });
            }
        }
        Ok(Some(top))
    }

    /// The host key of new session `id`, placed as `msg` says under `parent` (spec §4.5).
    pub(super) fn host_key_of(
        &self,
        id: SessionId,
        msg: &Spawn,
        parent: Option<&Descriptor>,
    ) -> SessionId {
        let host_lifecycle = self
            .deps
            .providers
            .get(&msg.target)
            .map(|p| p.capabilities())
            .is_some_and(|c| c.suspend || c.destroy);
        host_key::host_key(
            NewPlace {
                id,
                target: &msg.target,
                target_identity: &msg.target_identity,
                host_lifecycle,
            },
            parent.map(|p| ParentHost {
                host_key: p.host_key,
                target: &p.locator.target_id,
                target_identity: &p.target_identity,
            }),
        )
    }

    /// Whether a spawn as `msg` says joins `parent`'s host.
    pub(super) fn joins(&self, msg: &Spawn, parent: &Descriptor) -> bool {
        self.host_key_of(SessionId::NIL, msg, Some(parent)) == parent.host_key
    }

    /// Spec §3.5 step 6: a host holds one broker binding (§6.3), so a sub-session joins its
    /// parent's host only with the auth the parent's agent is bound with (the same secrets,
    /// or none for both). The start then verifies the binding itself, never makes another.
    pub(super) fn check_same_auth(
        &self,
        agent: &str,
        parent: &Descriptor,
    ) -> Result<(), SessionError> {
        let secrets = |agent: &str| {
            self.catalog
                .get(agent)
                .and_then(|a| a.auth.as_ref())
                .map(|a| a.secrets.clone())
        };
        if secrets(agent) == secrets(&parent.agent) {
            return Ok(());
        }
        Err(BrokerError::BindingMismatch { parent: parent.id }.into())
    }

    /// A spawn without a workspace of its own, under a parent that has one on the same
    /// machine (both here, or the same host), works in the parent's copy (README,
    /// "Workspaces"). It owns no workspace: forgetting it leaves the copy alone.
    pub(super) fn inherit_workspace(&self, msg: &mut Spawn, parent: &Descriptor) {
        let Some(copy) = parent
            .workspace
            .as_ref()
            .filter(|_| msg.workspace.is_none())
        else {
            return;
        };
        let is_local = |target: &str| self.deps.providers.get(target).is_some_and(|p| !p.remote());
        let both_here = is_local(&msg.target) && is_local(&parent.locator.target_id);
        if !both_here && !self.joins(msg, parent) {
            return;
        }
        let mapped = cwd_in_copy(
            Path::new(&msg.cwd),
            Path::new(&copy.repo_url),
            Path::new(&copy.dir),
        );
        // Here the mapped place must exist in the copy (an untracked directory of the source
        // is not in it); on a remote host the harness finds out.
        let mapped = match both_here && !mapped.is_dir() {
            true => PathBuf::from(&copy.dir),
            false => mapped,
        };
        msg.cwd = mapped.display().to_string();
    }

    /// `parent` was removed (spec §3.7): its dead sub-sessions go with it, except those whose
    /// forget would destroy a host (that takes its own confirmation); the others, and any
    /// whose forget is refused (a workspace holding work), stand alone from now on.
    pub(super) fn parent_removed(&self, parent: SessionId, ctx: &mut Context<Self>) {
        let refusal = &self.deps.refusal;
        let children: Vec<(SessionId, Addr<Session>, bool)> = self
            .sessions
            .entries()
            .filter(|e| e.descriptor().parent == Some(parent))
            .map(|e| {
                let d = e.descriptor();
                let goes = !d.alive && !refusal.destroys_host(&d.locator.target_id);
                (d.id, e.addr.clone(), goes)
            })
            .collect();
        if children.is_empty() {
            return;
        }
        ctx.spawn(
            async move {
                for (id, addr, goes) in children {
                    if goes {
                        match addr.send(Forget { force: false }).await {
                            Ok(Ok(())) => continue,
                            Ok(Err(e)) => tracing::warn!(session = %id, error = %e,
                                "a removed parent's dead sub-session stays, top-level"),
                            // Gone meanwhile: nothing left to do.
                            Err(_) => continue,
                        }
                    }
                    // A notification, to a handful of sessions at most.
                    addr.do_send(ParentGone);
                }
            }
            .into_actor(self),
        );
    }

    /// The other sessions on host `host_key` than its `owner`.
    fn mates(&self, host_key: SessionId, owner: SessionId) -> Vec<(Descriptor, Addr<Session>)> {
        self.sessions
            .entries()
            .filter(|e| e.descriptor().host_key == host_key && e.descriptor().id != owner)
            .map(|e| (e.descriptor().clone(), e.addr.clone()))
            .collect()
    }
}

/// Where a sub-session's `cwd` lands in its parent's copy `copy` of `repo`: a cwd already in
/// the copy stays; one inside the source repository maps to the same place in the copy;
/// anything else is the copy's root.
fn cwd_in_copy(cwd: &Path, repo: &Path, copy: &Path) -> PathBuf {
    if cwd.starts_with(copy) {
        return cwd.to_path_buf();
    }
    match cwd.strip_prefix(repo) {
        Ok(rel) if repo.is_absolute() => copy.join(rel),
        _ => copy.to_path_buf(),
    }
}

impl Handler<ParentKilled> for SessionManager {
    type Result = ResponseFuture<()>;

    /// Every live sub-session of the killed parent is killed too (spec §3.7): on the
    /// parent's host that ends its own process only, elsewhere it is a kill like any other.
    fn handle(&mut self, msg: ParentKilled, _: &mut Self::Context) -> Self::Result {
        let live: Vec<(SessionId, Addr<Session>)> = self
            .sessions
            .entries()
            .filter(|e| e.descriptor().parent == Some(msg.parent) && e.descriptor().alive)
            .map(|e| (e.descriptor().id, e.addr.clone()))
            .collect();
        Box::pin(async move {
            let kills = live.iter().map(|(id, addr)| async move {
                match addr.send(Kill).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::warn!(session = %id, error = %e,
                        "a killed parent's sub-session could not be stopped"),
                    // The session went meanwhile: nothing left to stop.
                    Err(_) => {}
                }
            });
            futures_util::future::join_all(kills).await;
        })
    }
}

impl Handler<HostSlept> for SessionManager {
    type Result = ResponseFuture<()>;

    /// Every other live session on the host is let go as asleep with it (spec §3.7).
    fn handle(&mut self, msg: HostSlept, _: &mut Self::Context) -> Self::Result {
        let mates = self.mates(msg.host_key, msg.owner);
        Box::pin(async move {
            let asleep = mates
                .iter()
                .filter(|(d, _)| d.alive)
                .map(|(_, addr)| addr.send(SleepWithHost));
            // A mate that is gone has nothing left to mark.
            let _ = futures_util::future::join_all(asleep).await;
        })
    }
}

impl Handler<HostDestroyed> for SessionManager {
    type Result = ResponseFuture<()>;

    /// Every other session on the host is removed with it (spec §3.7).
    fn handle(&mut self, msg: HostDestroyed, _: &mut Self::Context) -> Self::Result {
        let mates = self.mates(msg.host_key, msg.owner);
        Box::pin(async move {
            let gone = mates.iter().map(|(_, addr)| addr.send(GoWithHost));
            // A mate that is gone already is what was asked.
            let _ = futures_util::future::join_all(gone).await;
        })
    }
}

impl Handler<HostIdle> for SessionManager {
    type Result = ResponseFuture<bool>;

    /// Asks every live session on the host, the owner included, whether it is idle.
    fn handle(&mut self, msg: HostIdle, _: &mut Self::Context) -> Self::Result {
        let live: Vec<Addr<Session>> = self
            .sessions
            .entries()
            .filter(|e| e.descriptor().host_key == msg.host_key && e.descriptor().alive)
            .map(|e| e.addr.clone())
            .collect();
        Box::pin(async move {
            let asked = live.iter().map(|a| a.send(crate::providers::CheckIdle));
            // A session gone meanwhile has nothing running to keep the host awake.
            futures_util::future::join_all(asked)
                .await
                .into_iter()
                .all(|idle| idle.unwrap_or(true))
        })
    }
}

impl Handler<HostWoken> for SessionManager {
    type Result = ();

    /// Every other session suspended on the host is revived, one after another in the
    /// background; a failure is logged, never the owner's (spec §3.8).
    fn handle(&mut self, msg: HostWoken, ctx: &mut Self::Context) {
        let asleep: Vec<(SessionId, Addr<Session>)> = self
            .mates(msg.host_key, msg.owner)
            .into_iter()
            .filter(|(d, _)| !d.alive && d.exit_reason == Some(ExitReason::Suspended))
            .map(|(d, addr)| (d.id, addr))
            .collect();
        if asleep.is_empty() {
            return;
        }
        ctx.spawn(
            async move {
                for (id, addr) in asleep {
                    match addr.send(Revive { size: None }).await {
                        Ok(Ok(_)) => tracing::info!(session = %id, "revived with its host"),
                        Ok(Err(e)) => tracing::warn!(session = %id, error = %e,
                            "could not revive a session with its woken host"),
                        // The session went meanwhile: nothing to revive.
                        Err(_) => {}
                    }
                }
            }
            .into_actor(self),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cwd_in_the_source_maps_to_the_same_place_in_the_copy() {
        let (repo, copy) = (Path::new("/src/app"), Path::new("/ws/app-1"));
        assert_eq!(
            cwd_in_copy(Path::new("/src/app/lib/x"), repo, copy),
            Path::new("/ws/app-1/lib/x")
        );
        assert_eq!(cwd_in_copy(Path::new("/src/app"), repo, copy), copy);
    }

    #[test]
    fn a_cwd_in_the_copy_stays_and_anything_else_is_the_copys_root() {
        let (repo, copy) = (Path::new("/src/app"), Path::new("/ws/app-1"));
        assert_eq!(
            cwd_in_copy(Path::new("/ws/app-1/docs"), repo, copy),
            Path::new("/ws/app-1/docs")
        );
        assert_eq!(cwd_in_copy(Path::new("/elsewhere"), repo, copy), copy);
        assert_eq!(
            cwd_in_copy(Path::new("/src/application"), repo, copy),
            copy,
            "a sibling that only shares a prefix is outside"
        );
        assert_eq!(
            cwd_in_copy(Path::new("/x"), Path::new("https://h/r.git"), copy),
            copy,
            "a copy of a URL has no source directory here"
        );
    }
}
