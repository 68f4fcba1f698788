//! Names the imp provider gives things on impd (spec §5.1). impd's limits are tight (imp
//! names ≤ 31 characters, session names ≤ 32, both lower-case), so every name is derived from
//! atc's ids by keeping only `[a-z0-9]` and cutting, whatever the id looks like. The exec
//! session's name is impd-client's (`impd_client::exec_session_name`): tools other than the
//! daemon find sessions on impd by it.

use impd_client::names::name_chars;

/// Prefix of imp names when the target sets no `impPrefix`.
pub const DEFAULT_IMP_PREFIX: &str = "atc-";

/// Guest directory when the target sets no `guestDir`.
pub const DEFAULT_GUEST_DIR: &str = "/tmp/atc";

/// `PATH` inside the guest.
pub const GUEST_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The imp a host key lives in: prefix + the key's name characters, cut to 20 characters.
pub fn imp_name(prefix: &str, host_key: &str) -> String {
    let key: String = name_chars(host_key).chars().take(20).collect();
    format!("{prefix}{key}")
}

/// The atc a remote session's hooks run: `<guestDir>/bin/atc`.
pub fn guest_atc(guest_dir: &str) -> String {
    format!("{}/bin/atc", guest_dir.trim_end_matches('/'))
}

/// The guest socket a session's hooks report to: `<guestDir>/run/<first 16 name characters
/// of the id>.sock`.
pub fn guest_socket(guest_dir: &str, session_id: &str) -> String {
    let id: String = name_chars(session_id).chars().take(16).collect();
    format!("{}/run/{id}.sock", guest_dir.trim_end_matches('/'))
}

/// The lease label of a daemon: per daemon, so two daemons never release each other's leases.
pub fn lease_label(daemon_id: &str) -> String {
    format!("atc-{daemon_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_impd_limits_whatever_the_id() {
        // The exec session's name is impd-client's (`names`), tested there.
        let id = "3F2504E0-4F89-41D3-9A0C-0305E82C3301";
        let imp = imp_name(DEFAULT_IMP_PREFIX, id);
        assert_eq!(imp, "atc-3f2504e04f8941d39a0c");
        assert!(imp.len() <= 31);
        assert_eq!(
            guest_socket("/tmp/atc/", id),
            "/tmp/atc/run/3f2504e04f8941d3.sock"
        );
        assert_eq!(lease_label("d1"), "atc-d1");
    }
}
