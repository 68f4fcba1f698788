//! The browser page: `GET /` and its files under `/assets/`, all compiled into the binary
//! (`assets/` in the repository; the xterm.js files in `assets/vendor/` come from npm through
//! `contrib/refresh-xterm.sh`). Serving needs no build step, no network and no file system.
//!
//! Every answer carries the page's security headers: a Content-Security-Policy that lets the
//! page load only its own files and talk only to this origin, and no framing, sniffing or
//! referrer. The page holds no data of its own, so it is public (`route_table::is_page`); it
//! asks the user for the token and calls the API with it.
//!
//! The page installs as a web app: a manifest and a service worker (`assets/sw.js`), served
//! like every other file. The worker lives under `/assets/` but answers for the whole origin
//! (`Service-Worker-Allowed: /`), so it can keep the page at `/` for offline use.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};

use super::route_table::PAGE_ASSETS;
use crate::protocol::RequestError;
use crate::server::error::Error;

/// The page's Content-Security-Policy. Scripts, connections, fonts and everything else come
/// only from this origin. Styles are the one relaxation, because xterm.js needs it: its DOM
/// renderer writes the theme and the cell size into `<style>` elements it creates
/// (`style-src-elem`), and puts a `style` attribute on cells drawn in 24-bit colour or with
/// contrast correction (`style-src-attr`). Stylesheets still load only from `'self'`, and
/// no inline script runs. The service worker and the manifest come from this origin too
/// (`worker-src`, `manifest-src`; `default-src 'none'` would refuse them).
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     style-src-elem 'self' 'unsafe-inline'; style-src-attr 'unsafe-inline'; \
     connect-src 'self'; img-src 'self' data:; font-src 'self'; worker-src 'self'; \
     manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The service worker's path under `/assets/`: it alone gets `Service-Worker-Allowed`.
const SERVICE_WORKER: &str = "sw.js";

/// One embedded file.
struct Asset {
    /// Its path under `/assets/` (or `index.html`, served at `/`).
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $content_type:expr) => {
        Asset {
            path: $path,
            content_type: $content_type,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/", $path)),
        }
    };
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";
const MANIFEST: &str = "application/manifest+json";
const SVG: &str = "image/svg+xml";
const PNG: &str = "image/png";

/// The page at `/`.
const INDEX: Asset = asset!("index.html", HTML);

/// Everything under `/assets/`.
const ASSETS: &[Asset] = &[
    asset!("page.css", CSS),
    asset!("js/main.js", JS),
    asset!("js/api.js", JS),
    asset!("js/fleet.js", JS),
    asset!("js/terminal.js", JS),
    asset!("js/spawn.js", JS),
    asset!("js/permissions.js", JS),
    asset!("js/cards.js", JS),
    asset!("js/keys.js", JS),
    asset!("js/notify.js", JS),
    asset!("sw.js", JS),
    asset!("manifest.webmanifest", MANIFEST),
    asset!("icons/icon.svg", SVG),
    asset!("icons/icon-192.png", PNG),
    asset!("icons/icon-512.png", PNG),
    asset!("vendor/VERSIONS", TEXT),
    asset!("vendor/xterm/xterm.mjs", JS),
    asset!("vendor/xterm/xterm.css", CSS),
    asset!("vendor/xterm/LICENSE", TEXT),
    asset!("vendor/addon-fit/addon-fit.mjs", JS),
    asset!("vendor/addon-fit/LICENSE", TEXT),
    asset!("vendor/addon-web-links/addon-web-links.mjs", JS),
    asset!("vendor/addon-web-links/LICENSE", TEXT),
    asset!("vendor/addon-unicode11/addon-unicode11.mjs", JS),
    asset!("vendor/addon-unicode11/LICENSE", TEXT),
];

/// Registers `/` and `/assets/...` (GET only; another method falls through to the API's
/// `unknown_method`).
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(index)).route(
        &format!("{PAGE_ASSETS}{{file:.+}}"),
        web::get().to(asset_file),
    );
}

async fn index() -> HttpResponse {
    serve(&INDEX)
}

async fn asset_file(req: HttpRequest) -> Result<HttpResponse, Error> {
    let wanted = req.path().strip_prefix(PAGE_ASSETS).unwrap_or_default();
    match ASSETS.iter().find(|a| a.path == wanted) {
        Some(asset) => Ok(serve(asset)),
        None => Err(RequestError::NoRoute {
            method: req.method().to_string(),
            path: req.path().to_string(),
        }
        .into()),
    }
}

fn serve(asset: &Asset) -> HttpResponse {
    let mut response = HttpResponse::Ok();
    if asset.path == SERVICE_WORKER {
        // Registered with scope `/`, so it keeps the page at `/` too.
        response.insert_header(("Service-Worker-Allowed", "/"));
    }
    response
        .content_type(asset.content_type)
        .insert_header((header::CONTENT_SECURITY_POLICY, CSP))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        // A new daemon binary may bring new files under the same names: revalidate each time.
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(asset.body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_listed_once_and_the_page_names_only_listed_files() {
        for (i, a) in ASSETS.iter().enumerate() {
            assert!(!a.body.is_empty(), "{} is empty", a.path);
            assert!(
                ASSETS[i + 1..].iter().all(|b| b.path != a.path),
                "{} listed twice",
                a.path
            );
        }
        let html = std::str::from_utf8(INDEX.body).expect("the page is UTF-8");
        for reference in html.split(PAGE_ASSETS).skip(1) {
            let path: String = reference
                .chars()
                .take_while(|c| !matches!(c, '"' | '\'' | ' ' | '>'))
                .collect();
            assert!(
                ASSETS.iter().any(|a| a.path == path),
                "index.html names /assets/{path}, which is not embedded"
            );
        }
    }

    /// The quoted paths in the service worker's `SHELL` list.
    fn shell_list() -> Vec<String> {
        let sw = ASSETS
            .iter()
            .find(|a| a.path == SERVICE_WORKER)
            .expect("the service worker is embedded");
        let text = std::str::from_utf8(sw.body).expect("sw.js is UTF-8");
        let list = text
            .split("const SHELL = [")
            .nth(1)
            .and_then(|rest| rest.split("];").next())
            .expect("sw.js has a SHELL list");
        list.split(',')
            .map(|item| item.trim().trim_matches('\'').to_string())
            .filter(|item| !item.is_empty())
            .collect()
    }

    #[test]
    fn the_service_worker_keeps_every_file_the_page_loads_and_only_embedded_ones() {
        let shell = shell_list();
        assert!(shell.iter().any(|p| p == "/"), "the page itself: {shell:?}");
        for path in shell.iter().filter(|p| *p != "/") {
            let file = path.strip_prefix(PAGE_ASSETS).unwrap_or(path);
            assert!(
                ASSETS.iter().any(|a| a.path == file),
                "sw.js keeps {path}, which is not embedded"
            );
            assert_ne!(file, SERVICE_WORKER, "the worker does not keep itself");
        }
        // Every script, stylesheet, icon and the manifest: the page must load offline whole.
        for asset in ASSETS {
            let needed = asset.content_type != TEXT && asset.path != SERVICE_WORKER;
            let kept = shell
                .iter()
                .any(|p| p == &format!("{PAGE_ASSETS}{}", asset.path));
            assert_eq!(needed, kept, "{} kept: {kept}", asset.path);
        }
    }

    #[test]
    fn the_policy_keeps_scripts_and_connections_to_this_origin() {
        for directive in [
            "default-src 'none'",
            "script-src 'self'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'none'",
            "worker-src 'self'",
            "manifest-src 'self'",
        ] {
            assert!(CSP.contains(directive), "{directive}");
        }
        assert!(!CSP.contains("unsafe-eval"));
        let script = CSP
            .split(';')
            .find(|d| d.trim().starts_with("script-src"))
            .expect("a script-src");
        assert!(!script.contains("unsafe-inline"), "{script}");
    }
}
