//! `grants.add` and `grants.delete` over RPC, with the faults a test queued for them: a refusal
//! with no effect, or the effect followed by a lost or late answer (protocol §7). What a grant
//! step does to the state is `broker`'s; this file only decides when and whether it answers.

use std::sync::Arc;

use actix_web::HttpResponse;
use serde_json::Value;

use super::auth::Principal;
use super::broker::{GrantFault, GrantStep};
use super::envelope::{parse_input, ImpdError};
use super::input::Fields;
use super::rpc::respond;
use super::state::Shared;

/// Answers one grant step.
pub async fn answer(
    shared: &Arc<Shared>,
    p: &Principal,
    step: GrantStep,
    body: &[u8],
    peer: Option<std::net::SocketAddr>,
) -> HttpResponse {
    let (result, after) = {
        let mut st = shared.lock();
        let parsed = parse_input(body).and_then(|input| {
            let f = Fields(&input);
            let name = f.str("name").map_err(|e| e.rpc())?;
            let secret = f.str("secret").map_err(|e| e.rpc())?;
            Ok((name, secret))
        });
        match parsed {
            Err(e) => (Err(e), None),
            Ok((name, secret)) => match st.broker.take_grant_fault(step, &secret) {
                Some(GrantFault::Fail {
                    code,
                    message,
                    data,
                }) => {
                    let mut e = ImpdError::new(code, message);
                    e.data = data;
                    (Err(e), None)
                }
                after => {
                    let result: Result<Value, ImpdError> = match step {
                        GrantStep::Add => st.grant_add(p, &name, &secret),
                        GrantStep::Delete => st.grant_delete(p, &name, &secret),
                    };
                    (result, after)
                }
            },
        }
    };
    match after {
        Some(GrantFault::LoseAnswer) => {
            shared.cut(peer);
            // The connection is gone; whatever is answered here never leaves.
            std::future::pending::<()>().await;
        }
        Some(GrantFault::AnswerAfter(d)) => actix_rt::time::sleep(d).await,
        Some(GrantFault::Fail { .. }) | None => {}
    }
    respond(result)
}
