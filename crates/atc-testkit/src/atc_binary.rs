//! Where the `atc` binary the tests run is. Cargo names it to the root crate's own tests only
//! (`CARGO_BIN_EXE_atc`, at their compile time), not to this crate nor to another crate's
//! tests; it builds it into `target/<profile>/` before running any integration test of the
//! workspace's root crate, beside the `deps/` folder test binaries run from.

use std::path::{Path, PathBuf};

/// `$ATC_BIN` when set; otherwise `target/<profile>/atc` beside the running test binary
/// (`target/<profile>/deps/<test>-<hash>`). Panics, saying how to build it, when there is none.
pub fn atc_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("ATC_BIN") {
        return PathBuf::from(bin);
    }
    let me = std::env::current_exe().expect("the test's own path");
    let bin = me
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps")
        .join("atc");
    assert!(
        bin.is_file(),
        "no daemon binary at {}: build it first (`cargo build --bin atc`) or set ATC_BIN",
        bin.display()
    );
    bin
}
