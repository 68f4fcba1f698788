//! `GET /metrics` over HTTP: on the main listener behind the token like every other route,
//! and on the optional metrics-only listener (`--metrics-listen`), which serves that one path
//! to anyone who can reach it and answers everything else `unknown_method`. Both ask one
//! [`Scraper`], which gathers what is read at scrape time and hands it to
//! [`crate::metrics::scrape::render`].

use std::net::TcpListener;
use std::sync::Arc;

use actix::Addr;
use actix_web::dev::Server;
use actix_web::{web, App, HttpResponse, HttpServer};

use super::reporter::ReporterStats;
use super::AppState;
use crate::metrics::scrape::{render, SessionCounts, Snapshot, CONTENT_TYPE};
use crate::metrics::Metrics;
use crate::providers::targets::Targets;
use crate::server::error::Error;
use crate::sessions::manager::SessionManager;
use crate::sessions::messages::CountSessions;

/// What a scrape reads from.
#[derive(Clone)]
pub struct Scraper {
    /// Lists the fleet.
    pub manager: Addr<SessionManager>,
    /// Reporter lines.
    pub reporter: Arc<ReporterStats>,
    /// The counted families.
    pub metrics: Metrics,
    /// Configured targets, each listed even with no session.
    pub targets: Arc<Targets>,
    /// Local sessions' cgroups, for the fleet's usage; `None` without cgroups.
    pub cgroups: Option<Arc<crate::providers::local::cgroup::SessionCgroups>>,
}

impl Scraper {
    /// The scrape's text.
    pub async fn scrape(&self) -> Result<String, Error> {
        use std::sync::atomic::Ordering;
        let mut sessions: SessionCounts = self.manager.send(CountSessions).await.map_err(|e| {
            tracing::error!(error = %e, "session manager gone during a scrape");
            Error::Internal
        })?;
        for t in self.targets.list() {
            sessions.include_target(&t.id);
        }
        // Two small /proc reads and the fleet's cgroup files, off the executor all the same.
        let cgroups = self.cgroups.clone();
        let (process, sessions_usage) = web::block(move || {
            (
                crate::metrics::process::read(),
                cgroups.and_then(|c| c.fleet_usage()),
            )
        })
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not read /proc/self for a scrape");
            Default::default()
        });
        let snapshot = Snapshot {
            sessions,
            reporter_accepted: self.reporter.accepted.load(Ordering::Relaxed),
            reporter_dropped: self.reporter.dropped.load(Ordering::Relaxed),
            process,
            sessions_usage,
        };
        render(&self.metrics, &snapshot).map_err(|e| {
            tracing::error!(error = %e, "could not encode the metrics");
            Error::Internal
        })
    }
}

fn answer(text: String) -> HttpResponse {
    HttpResponse::Ok().content_type(CONTENT_TYPE).body(text)
}

/// `GET /metrics` on the main listener.
pub async fn metrics(state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    let scraper = Scraper {
        manager: state.manager()?.clone(),
        reporter: state.reporter.clone(),
        metrics: state.metrics.clone(),
        targets: state.targets.clone(),
        cgroups: state
            .providers
            .distinct()
            .iter()
            .find_map(|p| p.session_cgroups().cloned()),
    };
    Ok(answer(scraper.scrape().await?))
}

async fn metrics_only(scraper: web::Data<Scraper>) -> Result<HttpResponse, Error> {
    Ok(answer(scraper.scrape().await?))
}

/// Starts the metrics-only server on `listener` (one worker: a scrape is a few reads).
pub fn serve_metrics_only(
    listener: TcpListener,
    scraper: Scraper,
    tls: Option<std::sync::Arc<rustls::ServerConfig>>,
) -> std::io::Result<Server> {
    let server = HttpServer::new(move || {
        App::new()
            // As on the main listener: no answer here is for a browser to sniff.
            .wrap(
                actix_web::middleware::DefaultHeaders::new()
                    .add((actix_web::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff")),
            )
            .app_data(web::Data::new(scraper.clone()))
            .route("/metrics", web::get().to(metrics_only))
            .default_service(web::to(super::routes::not_found))
    })
    .workers(1)
    .disable_signals()
    .shutdown_timeout(2);
    // With the daemon's TLS, this listener serves HTTPS too (actix-web's rustls acceptor:
    // this one is a plain HttpServer, unlike the main listener's guarded pipeline).
    let server = match tls {
        Some(config) => server.listen_rustls_0_23(listener, (*config).clone())?,
        None => server.listen(listener)?,
    }
    .run();
    Ok(server)
}
