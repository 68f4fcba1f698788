//! Starting and stopping the daemon: the order of spec §1.3 and §1.4.
//!
//! [`Daemon::start`] takes the state dir's lock, opens the store, loads the fleet, ends what a
//! daemon killed without a stop left running in its sessions ([`survivors`]), binds the
//! listener, starts the actors and the HTTP server, then writes `daemon.json`. It returns a
//! [`DaemonHandle`], which tests use directly (the daemon runs in-process on port 0) and
//! `main.rs` drives until a signal or `POST /v1/daemon/quit`; SIGHUP re-reads the token file.

pub mod cgroups;
pub mod command;
pub mod exposure;
pub mod fd_table;
pub mod json_log;
pub mod principal_files;
pub mod session_cap;
pub mod state_dir;
pub mod survivors;
pub mod systemd;
pub mod tls;
pub mod token_file;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use actix::{Actor, Addr};
use actix_web::dev::ServerHandle;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::{mpsc, oneshot};

use crate::agents::AgentCatalog;
use crate::config::Config;
use crate::ledger::idempotency_ledger::IdempotencyLedger;
use crate::permissions::registry::PermissionRegistry;
use crate::providers::local::LocalPty;
use crate::server::tokens::{TokenFileError, TokenPublisher, TokenSet, TokenSets, TokenState};
use crate::server::{self, AppState};
use crate::sessions::manager::{ManagerParts, SessionManager};
use crate::sessions::messages::ShutdownAll;
use crate::sessions::session::SessionDeps;
use crate::store::StateStore;
use principal_files::PrincipalSets;
use state_dir::{DaemonInfo, StateDir};

/// How long a starting daemon waits for a stopping one to release the lock (spec §1.3).
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// What to start a daemon with.
pub struct DaemonOptions {
    /// The state dir.
    pub state_dir: PathBuf,
    /// Checked configuration.
    pub config: Config,
    /// Overrides config `listen`.
    pub listen: Option<SocketAddr>,
    /// A listener already bound (tests bind port 0); wins over `listen`.
    pub listener: Option<TcpListener>,
    /// Permit a non-loopback listen address (with TLS or `insecure_plaintext`).
    pub allow_remote: bool,
    /// Permit a non-loopback listen address in plain HTTP (logged at every start).
    pub insecure_plaintext: bool,
    /// Serve HTTPS with this certificate and key.
    pub tls: Option<tls::TlsFiles>,
    /// HTTP worker threads.
    pub workers: usize,
    /// Where the reporter socket goes; `None`: see [`reporter_socket_path`].
    pub runtime_dir: Option<PathBuf>,
    /// The `atc` program agents' hooks run, and the binary copied into imps as their
    /// `<guestDir>/bin/atc`; `None`: this process's own executable. (Tests run the daemon
    /// inside a test binary, so they name the real `atc`; a path that is no file leaves the
    /// daemon with no binary to copy.)
    pub atc_program: Option<PathBuf>,
    /// Codex's home, where its session names are read; `None`: `$CODEX_HOME`, else
    /// `~/.codex` (see [`crate::agents::names::codex_home_from_env`]). Tests pass their own.
    pub codex_home: Option<PathBuf>,
    /// The metrics-only listener (`GET /metrics` without a token); `None`: config
    /// `metricsListen`, and none when that is absent too.
    pub metrics_listen: Option<MetricsListen>,
}

/// Where the metrics-only listener is.
#[derive(Debug)]
pub enum MetricsListen {
    /// Bind this address (a non-loopback one is held to the main one's rule, see
    /// [`exposure`]).
    Addr(SocketAddr),
    /// A listener already bound (tests bind port 0).
    Bound(TcpListener),
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Lock, token or daemon.json trouble.
    #[error(transparent)]
    StateDir(#[from] state_dir::StateDirError),
    /// The store could not be opened or migrated.
    #[error("could not open the state database: {0}")]
    Store(#[from] crate::store::StoreError),
    /// Bind failure.
    #[error("could not listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// A non-loopback address without `--allow-remote`.
    #[error("refusing to listen on non-loopback address {0}: the daemon types into shells; pass --allow-remote if you really mean it")]
    RemoteRefused(SocketAddr),
    /// A non-loopback address with `--allow-remote` but without TLS or `--insecure-plaintext`.
    #[error("refusing to listen on non-loopback address {0} in plain HTTP: the bearer token would cross the network in clear text; serve HTTPS with --tls-cert and --tls-key, or pass --insecure-plaintext if the network itself is private (see README, \"Reaching the daemon from a phone\")")]
    PlaintextRefused(SocketAddr),
    /// The TLS certificate or key cannot be served with.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The OS gave no randomness for the reporter socket's keys.
    #[error("could not draw the reporter socket's secret: {0}")]
    Random(std::io::Error),
}

/// The reporter socket's path. Spec §1.1 puts sockets in `$XDG_RUNTIME_DIR` (inferred from an
/// old version); a fixed name there would let two daemons with different state dirs, or a
/// test run beside a real daemon, take each other's socket. So the socket lives in the state
/// dir, which the lock makes ours, unless that path is too long for a unix socket address;
/// then it goes to the runtime dir under a name derived from the state dir.
pub fn reporter_socket_path(
    state_dir: &std::path::Path,
    runtime_dir: Option<&std::path::Path>,
) -> PathBuf {
    if let Some(dir) = runtime_dir {
        return dir.join("atc.sock");
    }
    let in_state = state_dir.join("atc.sock");
    if in_state.as_os_str().len() < 100 {
        return in_state;
    }
    let tag = &crate::protocol::canonical::sha256_hex(&serde_json::Value::String(
        state_dir.display().to_string(),
    ))[..12];
    std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("atc-{tag}.sock"))
}

/// A running daemon.
pub struct DaemonHandle {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its bearer token at start (the current one, when the file holds two).
    pub token: String,
    /// Its state dir.
    pub state_dir: PathBuf,
    /// Its stable id.
    pub daemon_id: uuid::Uuid,
    /// Where the metrics-only listener listens, if there is one.
    pub metrics_addr: Option<SocketAddr>,
    server: ServerHandle,
    metrics_server: Option<ServerHandle>,
    manager: Addr<SessionManager>,
    store: StateStore,
    dir: StateDir,
    quit_rx: mpsc::UnboundedReceiver<()>,
    screen_arbiter: actix::Arbiter,
    /// Set by the worker that binds the reporter socket; removed again on a clean stop.
    reporter_socket: Arc<std::sync::OnceLock<crate::server::reporter::BoundSocket>>,
    /// Where a reload publishes the token files' new content.
    tokens: TokenPublisher,
    /// The configured principals, whose token files a reload re-reads with the owner's.
    principal_ids: Vec<String>,
    /// The thread the manager and the sessions run on.
    sessions_arbiter: actix::ArbiterHandle,
    /// Where systemd hears from us, once [`DaemonHandle::notify_systemd`] was called.
    systemd: Option<Arc<systemd::NotifySocket>>,
    /// The local sessions' cgroups, swept once every session has ended at a stop.
    session_cgroups: Option<Arc<crate::providers::local::cgroup::SessionCgroups>>,
}

/// What a reload read: the owner's token file, and each configured principal's.
type TokenRead = (Result<TokenSet, TokenFileError>, PrincipalSets);

/// The daemon.
pub struct Daemon;

/// Providers brought by whoever starts the daemon, by provider kind: a target whose
/// `provider` names one of these kinds is served by it rather than by a built-in one. Tests
/// use it to put a double behind [`crate::providers::ExecutionProvider`]; `atc` itself
/// brings none.
#[derive(Clone, Default)]
pub struct ExtraProviders {
    by_kind: std::collections::HashMap<String, Arc<dyn crate::providers::ExecutionProvider>>,
}

impl ExtraProviders {
    /// Serves targets whose `provider` is `provider.kind()` with `provider`.
    pub fn with(mut self, provider: Arc<dyn crate::providers::ExecutionProvider>) -> Self {
        self.by_kind.insert(provider.kind().to_string(), provider);
        self
    }
}

impl Daemon {
    /// Starts a daemon on the current actix system.
    pub async fn start(opts: DaemonOptions) -> Result<DaemonHandle, StartError> {
        Daemon::start_with_providers(opts, ExtraProviders::default()).await
    }

    /// Starts a daemon whose targets may also be served by `extra` providers.
    pub async fn start_with_providers(
        opts: DaemonOptions,
        extra: ExtraProviders,
    ) -> Result<DaemonHandle, StartError> {
        let dir_path = opts.state_dir.clone();
        let dir = tokio::task::spawn_blocking(move || StateDir::take(&dir_path, LOCK_WAIT))
            .await
            .map_err(|e| {
                StartError::StateDir(state_dir::StateDirError::Io {
                    dir: opts.state_dir.display().to_string(),
                    source: std::io::Error::other(e.to_string()),
                })
            })??;
        let token_set = dir.tokens()?;
        let token = token_set.current().to_string();
        let principal_ids: Vec<String> = opts.config.principals.ids().map(String::from).collect();
        let principal_sets = principal_files::prepare(dir.path(), opts.config.principals.ids());
        let token_sets = TokenSets::new(token_set, principal_sets);
        principal_files::log_unusable(dir.path(), token_sets.principals());
        let (token_publisher, tokens) =
            crate::server::tokens::Tokens::new(TokenState::Valid(token_sets));
        let metrics = crate::metrics::Metrics::new();
        let store = StateStore::open_counted(&dir.db_path(), metrics.clone()).await?;
        let daemon_id = store.daemon_id().await?;
        let rows = store.load_fleet().await?;
        // Before anything is restored, re-attached or served: what a daemon killed without a
        // stop left running in its sessions' groups ends now (see `survivors`).
        survivors::end(&rows, opts.config.timings.kill_grace).await;
        // Spec §7.5, before serving: claims a dead daemon left in progress become
        // outcome_unknown (or completed, when their session row exists); old keys go.
        let (unknown, completed) = store.idempotency_reconcile(crate::clock::now_ms()).await?;
        if unknown + completed > 0 {
            tracing::warn!(
                unknown,
                completed,
                "idempotency keys left in progress by the last daemon reconciled"
            );
        }
        crate::ledger::idempotency_ledger::sweep(&store, opts.config.timings.idempotency_retention)
            .await;
        let mut config = opts.config;
        let cap = session_cap::SessionCap::resolve(
            config.limits.max_sessions,
            session_cap::HostLimits::read(),
        );
        cap.log();
        // From here on the limits hold the number worked to, which `GET /v1/daemon` shows.
        config.limits.max_sessions = Some(cap.sessions);
        let slots = crate::sessions::live_slots::LiveSlots::new(cap.sessions);
        for p in &config.problems {
            tracing::error!(scope = %p.scope, problem = p.problem, detail = %p.detail,
                path = ?p.path, "config problem; running on defaults for this part");
        }

        let exposure = exposure::Exposure {
            allow_remote: opts.allow_remote,
            insecure_plaintext: opts.insecure_plaintext,
            // `--tls-cert`/`--tls-key` win over config's pair, as `--listen` over `listen`.
            tls: opts
                .tls
                .as_ref()
                .or(config.tls.as_ref())
                .map(tls::load)
                .transpose()?,
        };
        exposure.log_start();
        let (listener, addr) = exposure::bind_main(
            &exposure,
            opts.listener,
            opts.listen.unwrap_or(config.listen),
        )?;
        let metrics_listener = exposure::bind_metrics(
            &exposure,
            opts.metrics_listen
                .or(config.metrics_listen.map(MetricsListen::Addr)),
        )?;

        let catalog =
            Arc::new(AgentCatalog::new(&config.agents).with_invalid(config.invalid_agents()));
        // Each target's options are its provider kind's to check, once, here.
        let targets = Arc::new(crate::providers::targets::Targets::settle(&config.targets));
        // No local process, git included, inherits a target's credential.
        let withheld = targets.credential_vars();
        let session_limits = Arc::new(crate::config::session_limits::LimitsPolicy::of(&config));
        let session_cgroups =
            cgroups::take(config.cgroup_root.as_deref(), dir.path(), &session_limits);
        let local: Arc<dyn crate::providers::ExecutionProvider> = Arc::new(LocalPty {
            exit_drain: config.timings.exit_drain,
            withheld: withheld.clone(),
            cgroups: session_cgroups.clone(),
        });
        let atc_program = opts
            .atc_program
            .clone()
            .or_else(|| std::env::current_exe().ok())
            .unwrap_or_else(|| PathBuf::from("atc"));
        let daemon_id_text = daemon_id.to_string();
        let bridges = Arc::new(crate::providers::imp::bridge::Bridges::default());
        // Imp targets keep their hosts' broker bindings in the daemon's store (spec §6.3).
        let bindings: crate::providers::imp::broker::binding_store::SharedBindingStore =
            Arc::new(store.clone());
        let build = crate::providers::registry::BuildContext {
            daemon_id: &daemon_id_text,
            timings: &config.timings,
            atc_program: &atc_program,
            bridges: &bridges,
            bindings: &bindings,
            metrics: &metrics,
        };
        let providers = crate::providers::registry::Providers::build(&targets, local, |t| {
            match extra.by_kind.get(&t.provider) {
                Some(p) => Some(p.clone()),
                None => crate::providers::registry::build_remote(t, &build),
            }
        });
        let state_providers = providers.clone();
        // Spec §6.3, before serving and before any session is restored or re-attached:
        // bindings the last daemon left mid-change are settled, each by its host's actor. A
        // listed session owns its host's unfinished create only once its process ran there.
        let listed_hosts: std::collections::BTreeSet<String> = rows
            .iter()
            .filter_map(crate::store::FleetRow::host_in_use)
            .collect();
        crate::providers::imp::broker::startup::reconcile_bindings(
            &store,
            &providers,
            &listed_hosts,
        )
        .await;
        let (deps_store, deps_catalog) = (store.clone(), catalog.clone());
        let (limits, timings) = (config.limits.clone(), config.timings.clone());
        let dir_path_for_deps = dir.path().to_path_buf();
        // Spec §1.3 step 3, before serving: workspaces a stopped daemon left half made are
        // failed as `workspace_interrupted` and removed; the ready ones join their sessions.
        let workspaces = crate::sessions::workspace_step::Workspaces {
            store: store.clone(),
            git: crate::workspaces::git::Git::new(withheld),
            root: crate::sessions::workspace_step::root(dir.path()),
        };
        workspaces.sweep_interrupted(&providers).await?;
        let ready_workspaces = workspaces.ready_infos().await?;
        let reporter_socket = reporter_socket_path(dir.path(), opts.runtime_dir.as_deref());
        let codex_home = opts.codex_home.or_else(|| {
            crate::agents::names::codex_home_from_env(
                std::env::var_os("CODEX_HOME"),
                std::env::var_os("HOME"),
            )
        });
        let reporter_stats = Arc::new(crate::server::reporter::ReporterStats::default());
        let (serve_socket, serve_stats) = (reporter_socket.clone(), reporter_stats.clone());
        // Drawn at each start: a key dies with the run, as the processes it was given to do.
        let report_keys =
            crate::sessions::report_key::ReportKeys::generate().map_err(StartError::Random)?;
        let serve_keys = report_keys.clone();
        let bound_socket = Arc::new(std::sync::OnceLock::new());
        let worker_bound_socket = bound_socket.clone();
        let (scrape_targets, scrape_reporter) = (targets.clone(), reporter_stats.clone());
        let refusal = crate::providers::refusal::Refusal::new(targets.clone(), providers.clone());
        let deps_refusal = refusal.clone();
        for p in targets.problems() {
            tracing::error!(scope = ?p.scope, target = ?p.target, problem = %p.problem,
                detail = %p.detail, "target configuration problem");
        }
        // Screen models are parsed on a thread of their own, beside the sessions' thread.
        let screen_arbiter = actix::Arbiter::new();
        let screen_handle = screen_arbiter.handle();
        let (quit_tx, quit_rx) = mpsc::unbounded_channel();
        // Each principal's grants judged against the targets as configured now; without a
        // `principals` key any `X-Atc-As` reaches `local` only (spec §2.5).
        let reaches = Arc::new(crate::server::caller::Reaches::new(
            &config.principals,
            &targets,
        ));
        let state = AppState {
            // Filled in on the worker thread, below.
            manager: None,
            permissions: None,
            ledger: None,
            store: store.clone(),
            catalog,
            tokens,
            tickets: Arc::new(crate::server::tickets::Tickets::new(
                config.timings.ticket_ttl,
            )),
            daemon_id,
            limits: config.limits.clone(),
            timings: config.timings.clone(),
            allowed_origins: config.allowed_origins.clone(),
            listen: addr,
            state_dir: dir.path().to_path_buf(),
            config_problems: config.problems.clone(),
            quit: quit_tx,
            targets,
            refusal,
            providers: state_providers,
            reporter: reporter_stats,
            metrics: metrics.clone(),
            session_limits,
            spawn_queue: crate::sessions::admission::SpawnQueue::new(config.limits.spawn_queue),
            reaches,
            principals: Arc::new(config.principals.clone()),
            // Absolute, so a client started elsewhere can open the files it is shown.
            principals_dir: std::path::absolute(principal_files::dir_of(dir.path()))
                .unwrap_or_else(|_| principal_files::dir_of(dir.path())),
        };
        // The session manager, and with it every session and harness, lives on the HTTP
        // worker's thread: a keystroke then goes from socket to PTY and its echo back without
        // crossing threads (measured: each hop costs tens of microseconds here). The worker
        // factory runs on that thread, so it starts the manager the first time it runs and
        // hands the address back. The mutexes are a one-time handoff at start, not shared
        // domain state.
        let permission_timeout = config.timings.permission_timeout;
        let activity = config.activity;
        let (deps_metrics, registry_metrics) = (metrics.clone(), metrics.clone());
        let parts = Arc::new(std::sync::Mutex::new(Some(
            move |me: Addr<SessionManager>, permissions| ManagerParts {
                deps: SessionDeps {
                    store: deps_store,
                    providers,
                    catalog: deps_catalog.clone(),
                    manager: me.clone().recipient(),
                    hosts: crate::sessions::host_messages::HostMates {
                        slept: me.clone().recipient(),
                        destroyed: me.clone().recipient(),
                        woken: me.clone().recipient(),
                        idle: me.clone().recipient(),
                    },
                    children: me.clone().recipient(),
                    names: me.recipient(),
                    limits,
                    timings,
                    screen_arbiter: screen_handle,
                    state_dir: dir_path_for_deps,
                    daemon_id,
                    refusal: deps_refusal,
                    reporter_socket: reporter_socket.clone(),
                    report_keys,
                    codex_home,
                    permissions,
                    atc_program: atc_program.clone(),
                    metrics: deps_metrics.clone(),
                    // Started here, on the sessions' thread, as the manager is.
                    activity: crate::sessions::activity_sweep::ActivityWatch::start(activity),
                    slots,
                    workspaces,
                },
                catalog: deps_catalog,
                rows,
                workspaces: ready_workspaces,
            },
        )));
        let started = Arc::new(std::sync::OnceLock::<(
            Addr<SessionManager>,
            Addr<IdempotencyLedger>,
            Addr<PermissionRegistry>,
        )>::new());
        let (ledger_store, ledger_timings) = (store.clone(), config.timings.clone());
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let ready_tx = Arc::new(std::sync::Mutex::new(Some(ready_tx)));
        let make_state = move || {
            let (manager, ledger, permissions) = started
                .get_or_init(|| {
                    let build = parts
                        .lock()
                        .ok()
                        .and_then(|mut p| p.take())
                        .expect("the manager is built once, by the first worker");
                    let mut registry = None;
                    let manager = SessionManager::start_with(|me| {
                        // The registry broadcasts through the manager, which fans events out.
                        let r = PermissionRegistry::new(
                            permission_timeout,
                            me.clone().recipient(),
                            registry_metrics.clone(),
                        )
                        .start();
                        registry = Some(r.clone());
                        build(me, r)
                    });
                    let permissions = registry.expect("start_with runs its builder at once");
                    // The reporter listens on this thread too, next to the sessions it feeds.
                    match crate::server::reporter::serve(
                        &serve_socket,
                        manager.clone(),
                        serve_stats.clone(),
                        serve_keys.clone(),
                    ) {
                        Ok(bound) => {
                            tracing::info!(socket = %bound.path().display(),
                                "reporter socket listening");
                            // The first worker binds, once (inside `get_or_init`); nothing
                            // else sets it, so it cannot be taken already.
                            let _ = worker_bound_socket.set(bound);
                        }
                        Err(e) => tracing::error!(socket = %serve_socket.display(), error = %e,
                            "could not bind the reporter socket; hook reports will not arrive"),
                    }
                    let ledger = IdempotencyLedger::new(
                        crate::ledger::key_lock::SpawnRunner {
                            spawn: manager.clone().recipient(),
                            lookup: manager.clone().recipient(),
                        },
                        ledger_store.clone(),
                        ledger_timings.idempotency_retention,
                        ledger_timings.idempotency_sweep,
                    )
                    .start();
                    (manager, ledger, permissions)
                })
                .clone();
            if let Some(tx) = ready_tx.lock().ok().and_then(|mut t| t.take()) {
                // The receiver waits in Daemon::start below.
                let _ = tx.send((manager.clone(), actix::Arbiter::current()));
            }
            AppState {
                manager: Some(manager),
                permissions: Some(permissions),
                ledger: Some(ledger),
                ..state.clone()
            }
        };
        let server = server::serve(
            listener,
            make_state,
            opts.workers.max(1),
            exposure.tls.clone(),
        )
        .map_err(|source| StartError::Bind { addr, source })?;
        let server_handle = server.handle();
        actix_rt::spawn(server);
        let (manager, sessions_arbiter) = ready_rx.await.map_err(|_| StartError::Bind {
            addr,
            source: std::io::Error::other("the HTTP worker did not start"),
        })?;
        // The sessions' actors make nearly every queued write; see `move_writer`.
        store.move_writer(&sessions_arbiter).await?;
        // Before the first spawn, which would otherwise wait for them.
        crate::providers::local::launcher::prestart();
        crate::sessions::blocking_threads::prestart();
        let (metrics_addr, metrics_server) = match metrics_listener {
            Some((listener, metrics_addr)) => {
                let scraper = crate::server::metrics_http::Scraper {
                    manager: manager.clone(),
                    reporter: scrape_reporter,
                    metrics,
                    targets: scrape_targets,
                    cgroups: session_cgroups.clone(),
                };
                let server = crate::server::metrics_http::serve_metrics_only(
                    listener,
                    scraper,
                    exposure.tls.clone(),
                )
                .map_err(|source| StartError::Bind {
                    addr: metrics_addr,
                    source,
                })?;
                let handle = server.handle();
                actix_rt::spawn(server);
                tracing::info!(addr = %metrics_addr, "metrics listening (no token)");
                (Some(metrics_addr), Some(handle))
            }
            None => (None, None),
        };

        dir.write_info(&DaemonInfo {
            pid: std::process::id(),
            listen: addr.to_string(),
            url: format!("{}://{addr}", exposure.scheme()),
            version: env!("CARGO_PKG_VERSION").to_string(),
            // Absolute, so a client started in another directory finds it.
            tls_cert: opts.tls.as_ref().or(config.tls.as_ref()).map(|t| {
                std::path::absolute(&t.cert)
                    .unwrap_or_else(|_| t.cert.clone())
                    .display()
                    .to_string()
            }),
        })?;
        tracing::info!(%addr, state_dir = %dir.path().display(),
            token_file = %dir.token_path().display(), "atc daemon listening");

        Ok(DaemonHandle {
            addr,
            token,
            state_dir: dir.path().to_path_buf(),
            daemon_id,
            metrics_addr,
            server: server_handle,
            metrics_server,
            manager,
            store,
            dir,
            quit_rx,
            screen_arbiter,
            reporter_socket: bound_socket,
            tokens: token_publisher,
            principal_ids,
            sessions_arbiter,
            systemd: None,
            session_cgroups,
        })
    }
}

/// The signals the daemon answers: SIGTERM and SIGINT stop it, SIGHUP re-reads the token
/// file. Installed before [`Daemon::start`] so that a SIGHUP sent as soon as `daemon.json`
/// appears reloads instead of killing the process (the default action).
pub struct DaemonSignals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl DaemonSignals {
    /// Installs the handlers; needs a running tokio runtime. They stay for the process's life.
    pub fn install() -> std::io::Result<DaemonSignals> {
        Ok(DaemonSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }
}

impl DaemonHandle {
    /// Tells systemd the daemon is ready, and from now on the fleet's counts and (with a
    /// `watchdog` timeout) that it is alive; [`DaemonHandle::stop`] tells it the daemon stops.
    /// The notifier runs beside the sessions, see [`systemd::SystemdNotifier`].
    pub fn notify_systemd(&mut self, socket: systemd::NotifySocket, watchdog: Option<Duration>) {
        let socket = Arc::new(socket);
        // First, so that whatever the notifier sends comes after it.
        socket.send_logged(systemd::Notice::Ready);
        let (notifier_socket, manager) = (socket.clone(), self.manager.clone());
        let timings = systemd::NotifyTimings::for_watchdog(watchdog);
        let notifier =
            systemd::SystemdNotifier::start_in_arbiter(&self.sessions_arbiter, move |_| {
                systemd::SystemdNotifier::new(notifier_socket, manager.recipient(), timings)
            });
        self.manager
            .do_send(crate::sessions::messages::ObserveFleetStatus(
                notifier.recipient(),
            ));
        if let Some(w) = watchdog {
            tracing::info!(timeout_ms = w.as_millis() as u64, "systemd watchdog on");
        }
        self.systemd = Some(socket);
    }

    /// Serves until SIGTERM, SIGINT or `POST /v1/daemon/quit`, then stops; each SIGHUP
    /// reloads the token file. Without `signals` (they could not be installed) only quit stops it.
    ///
    /// A reload runs beside this loop, never in it: whatever sits at the token file's path, a
    /// stop is answered at once. A SIGHUP during a reload asks for one more after it.
    pub async fn run_until_stopped(mut self, signals: Option<DaemonSignals>) {
        let Some(mut signals) = signals else {
            self.quit_rx.recv().await;
            return self.stop().await;
        };
        let mut reload: Option<oneshot::Receiver<TokenRead>> = None;
        let mut again = false;
        loop {
            tokio::select! {
                _ = signals.term.recv() => {
                    tracing::info!("SIGTERM: shutting down");
                    break;
                }
                _ = signals.int.recv() => {
                    tracing::info!("SIGINT: shutting down");
                    break;
                }
                _ = signals.hup.recv() => {
                    tracing::info!("SIGHUP: re-reading the token files");
                    match reload {
                        Some(_) => again = true,
                        None => reload = Some(self.read_tokens_aside()),
                    }
                }
                read = async { reload.as_mut().expect("guarded by the branch's condition").await },
                    if reload.is_some() =>
                {
                    reload = None;
                    self.publish_tokens(read.unwrap_or_else(|_| {
                        let reason = "the read ended without an answer".to_string();
                        (Err(TokenFileError::Unreadable { reason }), PrincipalSets::new())
                    }));
                    if std::mem::take(&mut again) {
                        reload = Some(self.read_tokens_aside());
                    }
                }
                _ = self.quit_rx.recv() => {
                    tracing::info!("quit requested: shutting down");
                    break;
                }
            }
        }
        self.stop().await;
    }

    /// Reads the owner's token file and every configured principal's on a thread of its own
    /// and answers through the receiver. Not the runtime's blocking pool: a read that never
    /// returns (a file on a hung network mount) would hold up the runtime's shutdown, and with
    /// it the daemon's exit.
    fn read_tokens_aside(&self) -> oneshot::Receiver<TokenRead> {
        let (tx, rx) = oneshot::channel();
        let (dir, path) = (self.dir.path().to_path_buf(), self.dir.token_path());
        let ids = self.principal_ids.clone();
        let spawned = std::thread::Builder::new()
            .name("atc-token-read".into())
            .spawn(move || {
                let read = (
                    state_dir::read_tokens(&dir, &path),
                    principal_files::reread(&dir, &ids),
                );
                // The loop stopped waiting only if the daemon is stopping.
                let _ = tx.send(read);
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "could not start a thread to re-read the token file");
        }
        rx
    }

    /// Makes what a read of the token files found the accepted sets, in one step: sockets
    /// opened on a token that is gone are closed. An owner's file it cannot use fails
    /// everything closed (nothing is accepted until a later reload reads a good one); a
    /// principal's fails only that principal. The log says why, never what a file holds.
    fn publish_tokens(&self, (owner, principals): TokenRead) {
        let path = self.dir.token_path();
        let state = match owner {
            Ok(set) => {
                let sets = TokenSets::new(set, principals);
                principal_files::log_unusable(self.dir.path(), sets.principals());
                let usable = sets.principals().values().filter(|p| p.is_ok()).count();
                tracing::info!(file = %path.display(), tokens = sets.owner().len(),
                    principals = sets.principals().len(), usable, "token file reloaded");
                TokenState::Valid(sets)
            }
            Err(problem) => {
                principal_files::log_unusable(self.dir.path(), &principals);
                tracing::error!(file = %path.display(), %problem,
                    "token file unusable: every request but health is refused until a good file is in place and the daemon gets SIGHUP");
                TokenState::Invalid(problem)
            }
        };
        self.tokens.publish(state);
    }

    /// Graceful stop: stop accepting, hang up every local harness and record its exit, close
    /// client sockets, flush and close the store, remove the reporter socket (when it is still
    /// ours) and `daemon.json`, release the lock.
    pub async fn stop(self) {
        if let Some(socket) = &self.systemd {
            socket.send_logged(systemd::Notice::Stopping);
        }
        self.server.pause().await;
        if let Err(e) = self.manager.send(ShutdownAll).await {
            tracing::error!(error = %e, "session manager gone before shutdown");
        }
        // What outlived its session's hangup (a helper that left its process group, such as
        // Codex's `app-server`) ends with the daemon, not after it.
        if let Some(cgroups) = self.session_cgroups.clone() {
            let swept = tokio::task::spawn_blocking(move || cgroups.release()).await;
            if let Ok(n @ 1..) = swept {
                tracing::info!(cgroups = n, "ended what was left in sessions' cgroups");
            }
        }
        // The writer runs on the sessions' thread, which stops with the server: it comes back
        // here to write what the server's last requests queued, and to close.
        if let Err(e) = self.store.move_writer(&actix::Arbiter::current()).await {
            tracing::error!(error = %e, "the store's writer did not come back before the stop");
        }
        self.server.stop(true).await;
        if let Some(metrics) = &self.metrics_server {
            metrics.stop(true).await;
        }
        if let Err(e) = self.store.close().await {
            tracing::error!(error = %e, "closing the store failed");
        }
        self.screen_arbiter.stop();
        if let Some(socket) = self.reporter_socket.get() {
            socket.remove_if_ours();
        }
        self.dir.remove_info();
        tracing::info!("atc daemon stopped");
    }
}
