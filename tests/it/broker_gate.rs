//! Issue 9 item 2: the gate reads impd afresh (features, the token's identity, the secrets)
//! through the real client against the simulator, and refuses with each gate code. The
//! decision's every branch has unit tests in `src/broker/gate.rs`; this proves the reads.

use atc::providers::imp::broker::gate;
use atc::providers::imp::broker::AgentAuth;
use atc_testkit::broker::{claude_auth, identity, impd_client, sim_with_secrets};
use atc_testkit::impd_sim::{Flag, FlagState, Identity, ImpdSim, Scope};

async fn judge(sim: &ImpdSim, a: &AgentAuth, imp: &str) -> Result<Vec<String>, String> {
    let client = impd_client(sim);
    let view = gate::read(&client, "box")
        .await
        .map_err(|e| format!("read: {e}"))?;
    gate::judge(&view, "agent", a, imp, None)
        .map(|s| s.iter().map(|s| s.name.clone()).collect())
        .map_err(|e| {
            atc::server::error::Error::from(e)
                .code()
                .as_str()
                .to_string()
        })
}

#[actix_rt::test]
async fn the_gate_reads_impd_afresh_and_gives_each_code() {
    let (sim, values) = sim_with_secrets(&[("claude-oauth", "api.anthropic.com")]);
    let a = claude_auth(&["claude-oauth"]);

    // The root token reaches every imp: too broad to trust with a credential.
    assert_eq!(
        judge(&sim, &a, "atc-one").await,
        Err("auth_token_too_broad".into())
    );
    assert!(sim
        .faults()
        .set_identity(sim.token(), identity(&["claude-oauth"])));
    assert_eq!(
        judge(&sim, &a, "atc-one").await,
        Ok(vec!["claude-oauth".into()])
    );
    // Each read is fresh: a change at impd shows at the next gate.
    assert_eq!(
        judge(&sim, &a, "other").await,
        Err("auth_imp_out_of_scope".into())
    );
    assert_eq!(
        judge(&sim, &claude_auth(&["not-granted"]), "atc-one").await,
        Err("auth_secret_not_grantable".into())
    );
    assert!(sim
        .faults()
        .set_identity(sim.token(), identity(&["claude-oauth", "gone"])));
    assert_eq!(
        judge(&sim, &claude_auth(&["gone"]), "atc-one").await,
        Err("auth_secret_mismatch".into())
    );
    assert!(sim.faults().set_identity(
        sim.token(),
        Identity {
            scope: Scope::Exec,
            ..identity(&["claude-oauth"])
        }
    ));
    assert_eq!(
        judge(&sim, &a, "atc-one").await,
        Err("auth_token_scope".into())
    );
    sim.faults()
        .set_feature(Flag::SecretRebind, FlagState::Absent);
    assert_eq!(
        judge(&sim, &a, "atc-one").await,
        Err("auth_impd_too_old".into())
    );

    // impd's answers carry names and rules only.
    let client = impd_client(&sim);
    let view = gate::read(&client, "box").await.unwrap();
    assert!(
        !format!("{view:?}").contains(&values[0]),
        "a secret value reached the daemon"
    );
    sim.stop();
}
