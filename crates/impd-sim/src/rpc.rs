//! `POST /rpc/<group>/<proc>`: authentication, the envelope, and dispatch to the procedures
//! (protocol §2–§8). A path that names no procedure, or `leases.*` on an impd without leases,
//! answers plain-text 404 `not found`, as an older impd does.

use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};

use super::auth::{Principal, Scope};
use super::broker::GrantStep;
use super::envelope::{date, parse_input, success_body, ImpdError};
use super::exec::unauthorized;
use super::holds::HoldPoint;
use super::imps::CreateImp;
use super::input::Fields;
use super::options::Flag;
use super::state::{ImpState, Shared, SimState};

/// Procedures impd has (those the simulator answers).
const PROCEDURES: &[&str] = &[
    "system.info",
    "tokens.whoami",
    "imps.create",
    "imps.get",
    "imps.list",
    "imps.wake",
    "imps.start",
    "imps.sleep",
    "imps.stop",
    "imps.hold",
    "imps.destroy",
    "leases.acquire",
    "leases.renew",
    "leases.release",
    "leases.list",
    "exec.ticket",
    "sessions.list",
    "sessions.kill",
    "secrets.list",
    "grants.list",
    "grants.add",
    "grants.delete",
];

fn not_found() -> HttpResponse {
    HttpResponse::NotFound()
        .content_type("text/plain; charset=utf-8")
        .body("not found")
}

/// Anything but POST under `/rpc`.
pub async fn refuse_method() -> HttpResponse {
    HttpResponse::MethodNotAllowed()
        .content_type("text/plain; charset=utf-8")
        .body("method not allowed")
}

/// `POST /rpc/{group}/{proc}`.
pub async fn route(
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
    shared: web::Data<Shared>,
) -> HttpResponse {
    let shared = shared.into_inner();
    let (group, name) = path.into_inner();
    let procedure = format!("{group}.{name}");
    let (principal, delay, unreachable, hold) = {
        let mut st = shared.lock();
        let bearer = req
            .headers()
            .get("authorization")
            .and_then(|h| h.to_str().ok());
        let Some(p) = st.auth.bearer(bearer) else {
            return unauthorized();
        };
        let known = PROCEDURES.contains(&procedure.as_str())
            && (group != "leases" || st.opts.has(Flag::Leases));
        if !known {
            return not_found();
        }
        *st.stats.rpc_calls.entry(procedure.clone()).or_default() += 1;
        let unreachable = procedure == "system.info" && st.faults.take_info_unreachable();
        let hold = st.faults.take_hold(&procedure);
        (p, st.faults.take_rpc_delay(), unreachable, hold)
    };
    if unreachable {
        shared.cut(req.peer_addr());
        // The connection is gone; whatever is answered here never leaves.
        std::future::pending::<()>().await;
    }
    if let Some(d) = delay {
        actix_rt::time::sleep(d).await;
    }
    let hold = match hold {
        Some(gate) if gate.at(HoldPoint::BeforeEffect) => {
            gate.wait().await;
            None
        }
        after => after,
    };
    let answer = match GrantStep::of(&procedure) {
        Some(step) => {
            super::grants::answer(&shared, &principal, step, &body, req.peer_addr()).await
        }
        None => respond(
            parse_input(&body).and_then(|input| call(&shared, &principal, &procedure, &input)),
        ),
    };
    // Held after the effect: the state has changed, the answer has not left.
    if let Some(gate) = hold {
        gate.wait().await;
    }
    answer
}

/// A procedure's answer as impd sends it.
pub fn respond(result: Result<Value, ImpdError>) -> HttpResponse {
    match result {
        Ok(output) => HttpResponse::Ok().json(success_body(output)),
        Err(e) => {
            let status = actix_web::http::StatusCode::from_u16(e.status)
                .unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR);
            HttpResponse::build(status).json(e.body())
        }
    }
}

fn name_of(f: &Fields) -> Result<String, ImpdError> {
    f.str("name").map_err(|e| e.rpc())
}

fn call(
    shared: &Arc<Shared>,
    p: &Principal,
    procedure: &str,
    input: &Value,
) -> Result<Value, ImpdError> {
    let now = shared.clock.now();
    let mut st = shared.lock();
    let f = Fields(input);
    match procedure {
        "system.info" => Ok(system_info(&st)),
        "tokens.whoami" => Ok(p.whoami(st.opts.has(Flag::GrantableTokens))),
        "imps.create" => {
            let req = CreateImp {
                name: f.opt_str("name").map_err(|e| e.rpc())?,
                image: f.opt_str("image").map_err(|e| e.rpc())?,
                memory_mib: f
                    .opt_int("memoryMib", 128, 1 << 20)
                    .map_err(|e| e.rpc())?
                    .map(|n| n as u64),
                vcpus: f
                    .opt_int("vcpus", 1, 32)
                    .map_err(|e| e.rpc())?
                    .map(|n| n as u64),
                disk_mib: f
                    .opt_int("diskMib", 1024, 1 << 30)
                    .map_err(|e| e.rpc())?
                    .map(|n| n as u64),
            };
            st.create(p, req, now)
        }
        "imps.get" => {
            let name = name_of(&f)?;
            p.require(Scope::Read, Some(&name))?;
            let imp = st.imp(&name)?;
            Ok(st.imp_wire(imp, p, now))
        }
        "imps.list" => Ok(Value::Array(
            st.imps
                .values()
                .filter(|i| p.covers(&i.name))
                .map(|i| st.imp_wire(i, p, now))
                .collect(),
        )),
        "imps.wake" => {
            let restart = f
                .opt_bool("restartError")
                .map_err(|e| e.rpc())?
                .unwrap_or(false);
            st.wake(p, &name_of(&f)?, restart, now)
        }
        "imps.start" => {
            let name = name_of(&f)?;
            let restart = st.imp(&name)?.state == ImpState::Error;
            st.wake(p, &name, restart, now)
        }
        "imps.sleep" => {
            let force = f.opt_bool("force").map_err(|e| e.rpc())?.unwrap_or(false);
            st.sleep_rpc(p, &name_of(&f)?, force, now)
        }
        "imps.stop" => {
            let force = f.opt_bool("force").map_err(|e| e.rpc())?.unwrap_or(false);
            st.stop_rpc(p, &name_of(&f)?, force, now)
        }
        "imps.hold" => {
            let name = name_of(&f)?;
            let seconds = f.int("seconds", 0, 86_400).map_err(|e| e.rpc())?;
            st.hold(p, &name, seconds, now)?;
            let imp = st.imp(&name)?;
            Ok(st.imp_wire(imp, p, now))
        }
        "imps.destroy" => st.destroy(p, &name_of(&f)?),
        "leases.acquire" | "leases.renew" => {
            let name = name_of(&f)?;
            let label = f.str("label").map_err(|e| e.rpc())?;
            let ttl = f
                .opt_int("ttlSeconds", i64::MIN, i64::MAX)
                .map_err(|e| e.rpc())?
                .ok_or_else(|| ImpdError::bad_request("ttlSeconds", "required"))?;
            if procedure == "leases.acquire" {
                st.lease_acquire(p, &name, &label, ttl, now)
            } else {
                st.lease_renew(p, &name, &label, ttl, now)
            }
        }
        "leases.release" => {
            let label = f.str("label").map_err(|e| e.rpc())?;
            st.lease_release(p, &name_of(&f)?, &label, now)
        }
        "leases.list" => {
            let name = f.opt_str("name").map_err(|e| e.rpc())?;
            let label = f.opt_str("label").map_err(|e| e.rpc())?;
            st.lease_list(p, name.as_deref(), label.as_deref(), now)
        }
        "exec.ticket" => {
            let name = name_of(&f)?;
            p.require(Scope::Exec, Some(&name))?;
            st.imp(&name)?;
            let (ticket, expires) = st.auth.mint_ticket(p, &name, now);
            Ok(json!({"ticket": ticket, "expiresAt": date(expires)}))
        }
        "sessions.list" => {
            let name = name_of(&f)?;
            p.require(Scope::Read, Some(&name))?;
            sessions_list(&st, &name)
        }
        "sessions.kill" => {
            let name = name_of(&f)?;
            let session = f.str("session").map_err(|e| e.rpc())?;
            p.require(Scope::Exec, Some(&name))?;
            st.ensure_running(&name, p, now)?;
            let gen = st
                .imp(&name)?
                .boot
                .as_ref()
                .and_then(|b| b.sessions.get(&session))
                .cloned()
                .ok_or_else(|| ImpdError::not_found("session", &session))?;
            gen.signal(rustix::process::Signal::HUP);
            let pid = gen.pid;
            shared.guest.spawn(async move {
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                if !gen.exited() {
                    super::process::signal_group(pid, rustix::process::Signal::KILL);
                }
            });
            Ok(json!({}))
        }
        "secrets.list" => st.secrets_list(p),
        "grants.list" => st.grants_list(p, &name_of(&f)?),
        _ => Err(ImpdError::new("NOT_FOUND", "no such procedure")),
    }
}

fn system_info(st: &SimState) -> Value {
    let awake = st
        .imps
        .values()
        .filter(|i| i.state == ImpState::Running)
        .count();
    let sessions: usize = st
        .imps
        .values()
        .filter_map(|i| i.boot.as_ref())
        .map(|b| b.sessions.len())
        .sum();
    let mut v = json!({
        "version": st.opts.version,
        "ramBudgetMib": st.opts.ram_budget_mib.unwrap_or(65536),
        "ramUsedMib": st.ram_used(),
        "ramReservedMib": 0,
        "ramCommittedMib": st.ram_used(),
        "awakeCount": awake,
        "impCount": st.imps.len(),
        "sessionCount": sessions,
        "bootStatus": "ready",
        "firecrackerVersion": "simulated",
        "guestKernel": "simulated",
    });
    if let Some(f) = &st.opts.features {
        v["features"] = f.wire();
    }
    v
}

fn sessions_list(st: &SimState, name: &str) -> Result<Value, ImpdError> {
    let imp = st.imp(name)?;
    let Some(boot) = imp.boot.as_ref() else {
        return Ok(json!([]));
    };
    Ok(Value::Array(
        boot.sessions
            .values()
            .map(|g| {
                let out = g.out();
                let mut v = json!({
                    "name": g.session,
                    "pid": g.pid.as_raw_nonzero().get(),
                    "argv": g.argv,
                    "state": if out.exit.is_some() { "exited" } else { "running" },
                    "attached": out.viewer.is_some(),
                    "startedAt": super::clock::iso(g.started_at),
                });
                if st.opts.agent_offsets {
                    v["continuity"] = json!("offsets");
                    v["executionGeneration"] = json!(g.id);
                    v["bootId"] = json!(g.boot_id);
                    v["end"] = json!(out.ring.end());
                }
                if let Some(e) = out.exit {
                    v["exit"] = json!({"code": e.code, "signal": e.signal});
                }
                v
            })
            .collect(),
    ))
}
