//! Issue 9 items 3 and 4: one host's broker binding, driven through its actor against the
//! impd simulator and a real SQLite store. Create takes back exactly its own effects when a
//! step fails (checked at the simulator, not only in the answer), verify gives each binding
//! code, revoke is retryable, and the launch tickets hold their order and are released
//! exactly once.

use atc::providers::imp::broker::binding_store::BindingStore;
use atc::server::error::WireForm;

use actix::Actor;
use atc::providers::imp::broker::binder::{HostContext, Launcher};
use atc::providers::imp::broker::host_binding::{
    Admit, AdmitKind, Counts, Create, ForgetBegin, HostBinding, MarkReady, Rebind, Revoke, Verify,
};
use atc::store::StateStore;
use atc_protocol::responses::{AuthBindingState, AuthGrantState};
use atc_testkit::broker::{bindable_sim, boom, claude_auth, grants_of, impd_client};
use atc_testkit::impd_sim::{GrantFault, GrantStep, ImpdSim, SecretKind};

const IMP: &str = "atc-host1";

struct World {
    sim: ImpdSim,
    store: StateStore,
    _dir: tempfile::TempDir,
    /// Secret values, which must appear nowhere in the daemon's world.
    values: Vec<String>,
}

async fn world() -> World {
    let (sim, values) = bindable_sim(&[("alpha", "a.example"), ("beta", "b.example")]);
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::open(&dir.path().join("state.db"))
        .await
        .unwrap();
    World {
        sim,
        store,
        _dir: dir,
        values,
    }
}

fn context(w: &World) -> HostContext {
    HostContext {
        store: std::sync::Arc::new(w.store.clone()),
        client: impd_client(&w.sim),
        target: "box".into(),
        target_identity: "imp:reach-v1:0000000000000000".into(),
        host_key: "host1".into(),
        imp: IMP.into(),
        image: None,
        memory_mib: None,
    }
}

fn launcher(secrets: &[&str]) -> Launcher {
    Launcher {
        agent: "claude-broker".into(),
        auth: claude_auth(secrets),
    }
}

/// The refusal of a verify of `secrets` on `host`.
async fn refused_verify(
    host: &actix::Addr<HostBinding>,
    secrets: &[&str],
) -> atc::providers::ProviderError {
    host.send(Verify(launcher(secrets)))
        .await
        .unwrap()
        .expect_err("the verify passed")
}

fn code(e: &impl WireForm) -> String {
    e.code().as_str().to_string()
}

fn imps(w: &World) -> Vec<String> {
    w.sim.imps().into_iter().map(|i| i.name).collect()
}

fn grants(w: &World) -> Vec<String> {
    grants_of(&w.sim, IMP)
}

#[actix_rt::test]
async fn a_create_binds_verify_passes_and_each_binding_code_is_given() {
    let w = world().await;
    let host = HostBinding::new(context(&w)).start();
    let b = host
        .send(Create(launcher(&["alpha", "beta"])))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.state, AuthBindingState::Provisioning);
    assert_eq!(
        (imps(&w), grants(&w)),
        (vec![IMP.to_string()], vec!["alpha".into(), "beta".into()])
    );
    // Not ready until the harness started: a verify is blocked.
    let e = refused_verify(&host, &["alpha", "beta"]).await;
    assert_eq!(code(&e), "auth_blocked");
    host.send(MarkReady).await.unwrap().unwrap();
    host.send(Verify(launcher(&["alpha", "beta"])))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(grants(&w).len(), 2, "verify never grants again");

    // The agent's secrets changed: rebind required.
    let e = refused_verify(&host, &["alpha"]).await;
    assert_eq!(code(&e), "auth_rebind_required");
    // A grant gone at impd, then one too many.
    assert!(w.sim.faults().ungrant(IMP, "beta"));
    let e = refused_verify(&host, &["alpha", "beta"]).await;
    assert_eq!(
        (code(&e), e.wire().data["missing"].clone()),
        ("auth_grant_missing".into(), serde_json::json!(["beta"]))
    );
    assert!(w.sim.faults().grant(IMP, "beta"));
    w.sim
        .faults()
        .add_secret("gamma", SecretKind::Custom, &["c.example"]);
    assert!(w.sim.faults().grant(IMP, "gamma"));
    let e = refused_verify(&host, &["alpha", "beta"]).await;
    assert_eq!(
        (code(&e), e.wire().data["extra"].clone()),
        ("auth_grants_mismatch".into(), serde_json::json!(["gamma"]))
    );
    assert!(w.sim.faults().ungrant(IMP, "gamma"));
    // Another imp under the same name (destroyed and made again behind the binding's back).
    let client = context(&w).client;
    client.imps_destroy(IMP).await.unwrap();
    client
        .imps_create(impd_client::CreateImp {
            name: IMP.into(),
            image: None,
            memory_mib: None,
        })
        .await
        .unwrap();
    for s in ["alpha", "beta"] {
        assert!(w.sim.faults().grant(IMP, s));
    }
    let e = refused_verify(&host, &["alpha", "beta"]).await;
    assert_eq!(code(&e), "auth_runtime_mismatch");
    // A forget destroys only the imp the binding created: this one is refused, and blocked.
    let e = host.send(ForgetBegin).await.unwrap().unwrap_err();
    assert_eq!(code(&e), "auth_runtime_mismatch");
    let state = w.store.binding_get("host1").await.unwrap().unwrap().state;
    assert_eq!(
        state,
        AuthBindingState::Revoked,
        "a forget blocks the binding first"
    );
    // Nothing the daemon keeps holds a value.
    let rows = format!(
        "{:?}{:?}",
        w.store.binding_get("host1").await,
        w.store.grants_of("host1").await
    );
    for v in &w.values {
        assert!(
            !rows.contains(v.as_str()),
            "a secret value reached the store"
        );
    }
    w.sim.stop();
}

#[actix_rt::test]
async fn a_create_onto_an_existing_imp_is_refused_and_leaves_it_alone() {
    let w = world().await;
    let client = context(&w).client;
    client
        .imps_create(impd_client::CreateImp {
            name: IMP.into(),
            image: None,
            memory_mib: None,
        })
        .await
        .unwrap();
    let host = HostBinding::new(context(&w)).start();
    let e = host
        .send(Create(launcher(&["alpha"])))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(code(&e), "auth_runtime_exists");
    assert_eq!(imps(&w), [IMP], "the imp that was there stays");
    assert!(grants(&w).is_empty());
    assert_eq!(w.store.binding_get("host1").await.unwrap(), None);
    w.sim.stop();
}

#[actix_rt::test]
async fn a_failed_create_takes_back_exactly_its_own_effects() {
    // The imp cannot be created: nothing stays.
    let w = world().await;
    w.sim.faults().refuse_ram_next(1);
    let host = HostBinding::new(context(&w)).start();
    let e = host
        .send(Create(launcher(&["alpha", "beta"])))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(code(&e), "host_unavailable", "{e}");
    assert!(!e.effect_remains());
    assert!(imps(&w).is_empty(), "{:?}", imps(&w));
    assert_eq!(w.store.binding_get("host1").await.unwrap(), None);
    w.sim.stop();

    // The second grant fails: the first grant and the imp go again.
    for fault in [
        GrantFault::Fail {
            code: "FORBIDDEN",
            message: "no".into(),
            data: None,
        },
        GrantFault::LoseAnswer,
    ] {
        let w = world().await;
        w.sim
            .faults()
            .fail_next_grant(GrantStep::Add, Some("beta"), fault);
        let host = HostBinding::new(context(&w)).start();
        let e = host
            .send(Create(launcher(&["alpha", "beta"])))
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(code(&e), "host_unavailable", "{e}");
        assert!(!e.effect_remains());
        assert!(imps(&w).is_empty(), "the imp stayed: {:?}", imps(&w));
        assert!(
            w.sim.grants().values().all(|g| g.is_empty()),
            "{:?}",
            w.sim.grants()
        );
        assert_eq!(w.store.binding_get("host1").await.unwrap(), None);
        w.sim.stop();
    }

    // The take-back itself cannot be confirmed: rollback_pending, and the effect may remain.
    let w = world().await;
    w.sim
        .faults()
        .fail_next_grant(GrantStep::Add, Some("beta"), boom());
    w.sim
        .faults()
        .fail_next_grant(GrantStep::Delete, Some("alpha"), boom());
    let host = HostBinding::new(context(&w)).start();
    let e = host
        .send(Create(launcher(&["alpha", "beta"])))
        .await
        .unwrap()
        .unwrap_err();
    assert!(e.effect_remains(), "{e}");
    let b = w.store.binding_get("host1").await.unwrap().unwrap();
    assert_eq!(b.state, AuthBindingState::RollbackPending);
    assert_eq!(
        imps(&w),
        [IMP],
        "nothing was destroyed past an unconfirmed grant"
    );
    w.sim.stop();
}

#[actix_rt::test]
async fn a_revoke_blocks_launches_and_is_retried_until_confirmed() {
    let w = world().await;
    let host = HostBinding::new(context(&w)).start();
    let b = host
        .send(Create(launcher(&["alpha", "beta"])))
        .await
        .unwrap()
        .unwrap();
    host.send(MarkReady).await.unwrap().unwrap();

    w.sim
        .faults()
        .fail_next_grant(GrantStep::Delete, Some("beta"), boom());
    let e = host.send(Revoke).await.unwrap().unwrap_err();
    assert_eq!(code(&e), "auth_revocation_pending");
    let state = w.store.binding_get("host1").await.unwrap().unwrap().state;
    assert_eq!(state, AuthBindingState::RevocationPending);
    assert_eq!(grants(&w), ["beta"]);
    // Retried: the grant already gone counts as revoked.
    host.send(Revoke).await.unwrap().unwrap();
    assert!(grants(&w).is_empty());
    let e = host
        .send(Admit {
            kind: AdmitKind::Start,
            hash: b.hash.clone(),
            creating: None,
        })
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        (code(&e), e.wire().data["state"].clone()),
        ("auth_blocked".into(), serde_json::json!("revoked"))
    );
    w.sim.stop();
}

#[actix_rt::test]
async fn tickets_keep_the_order_of_revokes_and_are_released_exactly_once() {
    let w = world().await;
    let host = HostBinding::new(context(&w)).start();
    let b = host
        .send(Create(launcher(&["alpha"])))
        .await
        .unwrap()
        .unwrap();
    host.send(MarkReady).await.unwrap().unwrap();
    let admit = |kind| Admit {
        kind,
        hash: b.hash.clone(),
        creating: None,
    };

    // Admitted, checked, released; then dropped without a release; then a stale hash.
    let t = host.send(admit(AdmitKind::Start)).await.unwrap().unwrap();
    t.check().await.unwrap();
    t.release();
    drop(host.send(admit(AdmitKind::Attach)).await.unwrap().unwrap());
    let e = host
        .send(Admit {
            kind: AdmitKind::Start,
            hash: "stale".into(),
            creating: None,
        })
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(code(&e), "auth_rebind_required");

    // A revoke sent during the admission runs after the hand-over: the ticket is given,
    // and its last-moment check then refuses.
    let admitted = host.send(admit(AdmitKind::Attach));
    let revoked = host.send(Revoke);
    let t = admitted
        .await
        .unwrap()
        .expect("admitted before the revoke ran");
    revoked.await.unwrap().unwrap();
    let e = t.check().await.unwrap_err();
    assert_eq!(code(&e), "auth_blocked");
    drop(t);

    // A revoke queued before the admission wins.
    let w2 = world().await;
    let host2 = HostBinding::new(context(&w2)).start();
    let b2 = host2
        .send(Create(launcher(&["alpha"])))
        .await
        .unwrap()
        .unwrap();
    host2.send(MarkReady).await.unwrap().unwrap();
    let revoked = host2.send(Revoke);
    let admitted = host2.send(Admit {
        kind: AdmitKind::Start,
        hash: b2.hash.clone(),
        creating: None,
    });
    revoked.await.unwrap().unwrap();
    assert_eq!(code(&admitted.await.unwrap().unwrap_err()), "auth_blocked");

    // Three tickets out, three back, each once.
    let mut c = host.send(Counts).await.unwrap();
    atc_testkit::poll(atc_testkit::WITHIN, async || {
        c = host.send(Counts).await.unwrap();
        (c.released == 3).then_some(())
    })
    .await;
    assert_eq!((c.issued, c.released, c.outstanding()), (3, 3, 0));
    assert_eq!(host2.send(Counts).await.unwrap().issued, 0);
    w.sim.stop();
    w2.sim.stop();
}

#[actix_rt::test]
async fn a_rebind_is_refused_while_provisioning_and_keeps_its_record_when_a_removal_is_unconfirmed()
{
    let w = world().await;
    let host = HostBinding::new(context(&w)).start();
    host.send(Create(launcher(&["alpha"])))
        .await
        .unwrap()
        .unwrap();
    // Not ready yet: a create in flight is not rebound.
    let e = host
        .send(Rebind(launcher(&["alpha", "beta"])))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        (code(&e), e.wire().data["state"].clone()),
        ("auth_blocked".into(), serde_json::json!("provisioning"))
    );
    host.send(MarkReady).await.unwrap().unwrap();

    // beta's grant lands but its answer is lost, and the take-back cannot remove it: the
    // rebind stays recorded for start-up reconciliation, blocked, and says so.
    w.sim
        .faults()
        .fail_next_grant(GrantStep::Add, Some("beta"), GrantFault::LoseAnswer);
    w.sim
        .faults()
        .fail_next_grant(GrantStep::Delete, Some("beta"), boom());
    let e = host
        .send(Rebind(launcher(&["alpha", "beta"])))
        .await
        .unwrap()
        .unwrap_err();
    assert!(e.effect_remains(), "{e}");
    let b = w.store.binding_get("host1").await.unwrap().unwrap();
    assert_eq!((b.state, b.revision), (AuthBindingState::RebindFailed, 1));
    let pending = b.pending_rebind.expect("the rebind stays recorded");
    let beta = w
        .store
        .grants_of("host1")
        .await
        .unwrap()
        .into_iter()
        .find(|g| g.secret == "beta")
        .expect("beta's row stays");
    assert_eq!(
        (beta.state, beta.attempt_id),
        (AuthGrantState::RevocationPending, pending.attempt_id)
    );
    assert_eq!(grants(&w), ["alpha", "beta"]);
    // Blocked meanwhile: no launch, and no second rebind over the first.
    let e = host
        .send(Rebind(launcher(&["alpha", "beta"])))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(code(&e), "auth_blocked");
    w.sim.stop();
}
