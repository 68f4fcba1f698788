//! `GET /v1/principals`: the principals config declares, each with its granted targets and
//! where its token file is. Never a token: the file is for the daemon's user to read or
//! rewrite (a rewrite takes effect at the next SIGHUP). The files themselves are the
//! daemon's business (`daemon::principal_files`), which names the dir in [`AppState`].

use std::path::Path;

use actix_web::{web, HttpResponse};

use super::AppState;
use crate::config::principals::Principals;
use atc_protocol::responses::{PrincipalEntry, PrincipalList};

/// `GET /v1/principals`.
pub(super) async fn list(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok().json(listing(&state.principals, &state.principals_dir))
}

/// The listing of `principals`, whose files are named for their ids in `dir`.
fn listing(principals: &Principals, dir: &Path) -> PrincipalList {
    PrincipalList {
        principals: principals
            .ids()
            .map(|id| PrincipalEntry {
                id: id.to_string(),
                targets: principals.targets_of(id).unwrap_or_default().to_vec(),
                token_file: dir.join(id).display().to_string(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_principal_is_listed_with_its_targets_and_its_file() {
        let config = crate::config::Config::from_json(
            br#"{"principals": {"ci": {"targets": ["local", "box"]}, "bot": {"targets": []}}}"#,
        );
        let list = listing(&config.principals, Path::new("/s/principals"));
        let ids: Vec<&str> = list.principals.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["bot", "ci"]);
        assert_eq!(list.principals[1].targets, ["local", "box"]);
        assert_eq!(list.principals[1].token_file, "/s/principals/ci");
        let none = listing(&Principals::default(), Path::new("/s/principals"));
        assert!(none.principals.is_empty());
    }
}
