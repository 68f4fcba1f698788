//! The atc inside an imp (spec §5.3 step 4): the `<guestDir>/bin/atc` that a remote session's
//! hooks run. A readying whose harness has hooks runs one guest script ([`script`]) that makes
//! the guest dir and says what atc the guest has; from its answer ([`Probe`]) the daemon
//! decides whether to copy its own binary in (a one-file tar, mode 755, unpacked like any
//! transfer, impd spec §10).
//!
//! With `guestATC`, the image's own atc is used when its version is the daemon's: the script
//! links `bin/atc` to it. What the image has is learned once per imp and kept by the imp's
//! [`super::host_lease::HostLease`] ([`ImageAtc`]); later readyings only re-link or check the
//! copy, and the lease actor forgets it on a cold boot. Without `guestATC` the image is never
//! asked: the binary is copied whenever `bin/atc` is not executable.
//!
//! This module owns the script, the reading of its answer and the decision; the lease actor
//! owns the cache and the turn it runs in.

use bytes::Bytes;

use super::host_error::HostError;
use super::settings::ImpSettings;
use impd_client::{ImpPortError, ImpdClient, ImpdCode, RunSpec};

/// The version this daemon is, as `atc --version` prints it after `atc `.
pub const DAEMON_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the image of one imp has on its `PATH`, learned by its first readying with `guestATC`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageAtc {
    /// An atc of the daemon's version at this path: `bin/atc` links to it.
    Matches {
        /// Where the image keeps it.
        path: String,
    },
    /// No atc, or another version (`None`: none, or one that printed no version).
    Other {
        /// What it printed after `atc `.
        version: Option<String>,
    },
}

/// What the guest script is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ask {
    /// Only make the guest dir and report on `bin/atc` (no `guestATC`, or an image already
    /// known not to match).
    Check,
    /// Also find the image's atc, and link `bin/atc` to it when it is the daemon's version.
    Probe,
    /// Link `bin/atc` to the image's atc known to match, then report on it.
    Relink(String),
}

/// The guest script: `$1` the guest dir, `$2` `1` to probe the image's atc, `$3` a path to
/// link `bin/atc` to (or empty), `$4` the daemon's version. It prints `key=value` lines:
/// `image` / `imagePath` (probe only), `executable` (`1` / `0`) and `copied`, the first line
/// `bin/atc --version` printed.
const SCRIPT: &str = r#"d=$1; probe=$2; link=$3; want=$4
mkdir -p "$d/run" "$d/bin" || exit 70
if [ "$probe" = 1 ]; then
  img=$(command -v atc 2>/dev/null) || img=
  iv=
  if [ -n "$img" ]; then iv=$("$img" --version 2>/dev/null | head -n 1); fi
  printf 'image=%s\nimagePath=%s\n' "$iv" "$img"
  if [ -n "$img" ] && [ "$iv" = "atc $want" ]; then link=$img; fi
fi
if [ -n "$link" ]; then ln -sfn "$link" "$d/bin/atc" || exit 71; fi
x=0; cv=
if [ -x "$d/bin/atc" ]; then x=1; cv=$("$d/bin/atc" --version 2>/dev/null | head -n 1); fi
printf 'executable=%s\ncopied=%s\n' "$x" "$cv"
"#;

/// The argv of the guest script for `ask`.
fn script(guest_dir: &str, ask: &Ask) -> Vec<String> {
    let (probe, link) = match ask {
        Ask::Check => ("0", ""),
        Ask::Probe => ("1", ""),
        Ask::Relink(path) => ("0", path.as_str()),
    };
    [
        "sh",
        "-c",
        SCRIPT,
        "sh",
        guest_dir.trim_end_matches('/'),
        probe,
        link,
        DAEMON_VERSION,
    ]
    .into_iter()
    .map(str::to_string)
    .collect()
}

/// The guest script's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Probe {
    /// What the image has (only when it was probed).
    image: Option<ImageAtc>,
    /// `bin/atc` is executable.
    executable: bool,
    /// The version `bin/atc` printed.
    copied: Option<String>,
}

/// The version in an `atc --version` line (`atc 0.1.0` → `0.1.0`); anything else is none.
fn version_of(line: &str) -> Option<String> {
    line.trim()
        .strip_prefix("atc ")
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
}

/// Reads the script's output. `None` when a line it always prints is missing.
fn parse(stdout: &[u8]) -> Option<Probe> {
    let text = String::from_utf8_lossy(stdout);
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
    };
    let image = value("image").map(|line| match (version_of(line), value("imagePath")) {
        (Some(v), Some(path)) if v == DAEMON_VERSION && !path.is_empty() => ImageAtc::Matches {
            path: path.to_string(),
        },
        (version, _) => ImageAtc::Other { version },
    });
    Some(Probe {
        image,
        executable: value("executable")? == "1",
        copied: version_of(value("copied")?),
    })
}

/// What a readying does about `bin/atc` once the script answered.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    /// `bin/atc` is usable as it is (linked, or a copy that is current).
    Keep,
    /// Copy the daemon's binary in.
    Copy,
}

/// Decides from the script's answer: with `guestATC` only a `bin/atc` of the daemon's version
/// will do; without it, any executable one.
fn decide(guest_atc: bool, probe: &Probe) -> Decision {
    let usable = if guest_atc {
        probe.copied.as_deref() == Some(DAEMON_VERSION)
    } else {
        probe.executable
    };
    if usable {
        Decision::Keep
    } else {
        Decision::Copy
    }
}

/// The refusal of a daemon that has no binary to copy into an imp that needs one
/// (`unsupported_operation`, `problem: no_guest_atc`); the message names both versions.
pub fn no_guest_atc(target: &str, image: Option<&ImageAtc>, copied: Option<&str>) -> HostError {
    let image_version = match image {
        Some(ImageAtc::Matches { .. }) => Some(DAEMON_VERSION),
        Some(ImageAtc::Other { version }) => version.as_deref(),
        None => None,
    };
    HostError::NoGuestAtc {
        target: target.to_string(),
        image_version: image_version.map(str::to_string),
        copied_version: copied.map(str::to_string),
    }
}

/// Why installing failed: impd's error (mapped to `host_unavailable` by the readying, with
/// what was being done), or a refusal that passes through as it is.
#[derive(Debug)]
pub enum InstallError {
    /// impd or the guest failed at this step.
    Impd(&'static str, ImpPortError),
    /// The daemon refuses (`no_guest_atc`).
    Refused(HostError),
}

/// A guest setup step that failed inside the imp (a script that exited non-zero) or on the
/// daemon's side (reading the atc binary). Not one of impd's codes but the daemon's, carried as
/// an impd error so a client sees it as `host_unavailable` with `problem: guest_setup`.
pub fn guest_setup(detail: String) -> ImpPortError {
    ImpPortError::new(ImpdCode::Other("GUEST_SETUP".into()), detail)
}

/// Makes `<guestDir>/run` and `<guestDir>/bin/atc` ready in `imp`. `known`: what the image has,
/// as a readying of this imp learned it since its last cold boot. Answers what is known now
/// (to be kept for the next readying).
pub async fn install(
    client: &ImpdClient,
    s: &ImpSettings,
    imp: &str,
    known: Option<ImageAtc>,
) -> Result<Option<ImageAtc>, InstallError> {
    let ask = match (&known, s.guest_atc) {
        (_, false) => Ask::Check,
        (None, true) => Ask::Probe,
        (Some(ImageAtc::Matches { path }), true) => Ask::Relink(path.clone()),
        (Some(ImageAtc::Other { .. }), true) => Ask::Check,
    };
    let run = RunSpec {
        name: imp.to_string(),
        argv: script(&s.guest_dir, &ask),
        cwd: None,
        env: Default::default(),
        stdin: Bytes::new(),
    };
    const SETUP: &str = "setting up the guest dir and its atc";
    let out = client
        .run(run)
        .await
        .map_err(|e| InstallError::Impd(SETUP, e))?;
    let probe = match (out.code, parse(&out.stdout)) {
        (Some(0), Some(p)) => p,
        (code, _) => {
            let e = guest_setup(format!(
                "the guest setup script exited {code:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            return Err(InstallError::Impd(SETUP, e));
        }
    };
    let mut image = probe.image.clone().or(known);
    if decide(s.guest_atc, &probe) == Decision::Keep {
        return Ok(image);
    }
    if matches!(ask, Ask::Relink(_)) {
        // The image's atc is not what it was when probed (the image changed under the imp):
        // copy now, and probe again next time.
        image = None;
    }
    let Some(binary) = s.atc_binary.clone() else {
        return Err(InstallError::Refused(no_guest_atc(
            &s.target,
            image.as_ref(),
            probe.copied.as_deref(),
        )));
    };
    const COPY: &str = "copying atc into the imp";
    let archive = tokio::task::spawn_blocking(move || one_file_tar(&binary, "atc", 0o755))
        .await
        .map_err(|e| InstallError::Impd(COPY, guest_setup(e.to_string())))?
        .map_err(|e| {
            InstallError::Impd(COPY, guest_setup(format!("reading the atc binary: {e}")))
        })?;
    let bin_dir = format!("{}/bin", s.guest_dir.trim_end_matches('/'));
    let out = client
        .unpack_tar(imp, &bin_dir, archive)
        .await
        .map_err(|e| InstallError::Impd(COPY, e))?;
    if out.code != Some(0) {
        let e = guest_setup(format!(
            "unpacking atc exited {:?}: {}",
            out.code,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
        return Err(InstallError::Impd(COPY, e));
    }
    tracing::info!(imp, target = %s.target, "atc copied into the imp");
    Ok(image)
}

/// A ustar archive holding the file at `path` as `name` with `mode`, built in one buffer
/// (the header, then the file read straight after it, then the padding and end blocks).
fn one_file_tar(path: &std::path::Path, name: &str, mode: u32) -> std::io::Result<Bytes> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut out = Vec::with_capacity(512 + len as usize + 512 + 1024);
    out.extend_from_slice(&ustar_header(name, mode, len));
    file.read_to_end(&mut out)?;
    let written = (out.len() - 512) as u64;
    if written != len {
        return Err(std::io::Error::other(format!(
            "the file changed while it was read ({len} bytes, then {written})"
        )));
    }
    let pad = (512 - (out.len() % 512)) % 512;
    out.resize(out.len() + pad + 1024, 0);
    Ok(Bytes::from(out))
}

/// The 512-byte ustar header of a regular file (owner root, mtime 0).
fn ustar_header(name: &str, mode: u32, size: u64) -> [u8; 512] {
    let mut h = [0u8; 512];
    let put = |h: &mut [u8; 512], at: usize, bytes: &[u8]| {
        h[at..at + bytes.len()].copy_from_slice(bytes);
    };
    put(&mut h, 0, name.as_bytes());
    put(&mut h, 100, format!("{mode:07o}\0").as_bytes());
    put(&mut h, 108, b"0000000\0");
    put(&mut h, 116, b"0000000\0");
    put(&mut h, 124, format!("{size:011o}\0").as_bytes());
    put(&mut h, 136, b"00000000000\0");
    h[156] = b'0';
    put(&mut h, 257, b"ustar\0");
    put(&mut h, 263, b"00");
    // The checksum is taken with its own field as spaces.
    put(&mut h, 148, b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    put(&mut h, 148, format!("{sum:06o}\0 ").as_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(image: Option<ImageAtc>, executable: bool, copied: Option<&str>) -> Probe {
        Probe {
            image,
            executable,
            copied: copied.map(str::to_string),
        }
    }

    #[test]
    fn the_answer_is_read_into_what_the_image_and_bin_atc_are() {
        let same = format!(
            "image=atc {DAEMON_VERSION}\nimagePath=/usr/bin/atc\nexecutable=1\ncopied=atc {DAEMON_VERSION}\n"
        );
        assert_eq!(
            parse(same.as_bytes()),
            Some(probe(
                Some(ImageAtc::Matches {
                    path: "/usr/bin/atc".into()
                }),
                true,
                Some(DAEMON_VERSION)
            ))
        );
        let other = "image=atc 9.9.9\nimagePath=/usr/bin/atc\nexecutable=0\ncopied=\n";
        assert_eq!(
            parse(other.as_bytes()),
            Some(probe(
                Some(ImageAtc::Other {
                    version: Some("9.9.9".into())
                }),
                false,
                None
            ))
        );
        let none = "image=\nimagePath=\nexecutable=0\ncopied=\n";
        assert_eq!(
            parse(none.as_bytes()).and_then(|p| p.image),
            Some(ImageAtc::Other { version: None })
        );
        // A check (no probe) says nothing of the image; a cut-off answer is no answer.
        assert_eq!(
            parse(b"executable=1\ncopied=garbage\n"),
            Some(probe(None, true, None))
        );
        assert_eq!(parse(b"executable=1\n"), None);
    }

    #[test]
    fn guest_atc_wants_the_daemons_version_and_plain_mode_any_executable() {
        let current = probe(None, true, Some(DAEMON_VERSION));
        let old = probe(None, true, Some("0.0.1"));
        let missing = probe(None, false, None);
        assert_eq!(decide(true, &current), Decision::Keep);
        assert_eq!(decide(true, &old), Decision::Copy);
        assert_eq!(decide(true, &missing), Decision::Copy);
        assert_eq!(decide(false, &old), Decision::Keep);
        assert_eq!(decide(false, &missing), Decision::Copy);
    }

    #[test]
    fn no_guest_atc_names_both_versions() {
        let e = no_guest_atc(
            "box",
            Some(&ImageAtc::Other {
                version: Some("9.9.9".into()),
            }),
            None,
        );
        let message = e.to_string();
        let wire = crate::server::error::Error::from(e).wire();
        assert_eq!(
            wire.code,
            crate::server::error::ErrorCode::UnsupportedOperation
        );
        assert_eq!(wire.data["problem"], "no_guest_atc");
        assert_eq!(wire.data["imageVersion"], "9.9.9");
        assert!(message.contains("atc 9.9.9"), "{message}");
        assert!(message.contains("bin/atc is none"), "{message}");
        assert!(message.contains(DAEMON_VERSION), "{message}");
    }

    #[test]
    fn the_guest_script_probes_links_and_reports() {
        let tmp = tempfile::tempdir().unwrap();
        let image_bin = tmp.path().join("image-bin");
        std::fs::create_dir_all(&image_bin).unwrap();
        let fake = image_bin.join("atc");
        std::fs::write(&fake, format!("#!/bin/sh\necho 'atc {DAEMON_VERSION}'\n")).unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let guest = tmp.path().join("guest");
        let run = |ask: &Ask| {
            let argv = script(&guest.display().to_string(), ask);
            let out = std::process::Command::new(&argv[0])
                .args(&argv[1..])
                .env("PATH", format!("{}:/usr/bin:/bin", image_bin.display()))
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            parse(&out.stdout).expect("a full answer")
        };
        let p = run(&Ask::Probe);
        assert_eq!(
            p.image,
            Some(ImageAtc::Matches {
                path: fake.display().to_string()
            })
        );
        assert_eq!(p.copied.as_deref(), Some(DAEMON_VERSION));
        assert!(guest.join("run").is_dir());
        assert_eq!(std::fs::read_link(guest.join("bin/atc")).unwrap(), fake);
        std::fs::remove_file(guest.join("bin/atc")).unwrap();
        let p = run(&Ask::Check);
        assert_eq!(p, probe(None, false, None));
    }

    #[test]
    fn the_one_file_tar_unpacks_with_its_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src-file");
        // Not a multiple of 512, so the padding is exercised.
        std::fs::write(&src, vec![7u8; 1300]).unwrap();
        let tar = one_file_tar(&src, "atc", 0o755).unwrap();
        assert_eq!(tar.len() % 512, 0);
        let dst = tmp.path().join("dst");
        std::fs::create_dir_all(&dst).unwrap();
        let mut child = std::process::Command::new("tar")
            .args(["-x", "-f", "-", "-C"])
            .arg(&dst)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), &tar).unwrap();
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
        let out = dst.join("atc");
        assert_eq!(std::fs::read(&out).unwrap(), vec![7u8; 1300]);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&out).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o755);
    }
}
