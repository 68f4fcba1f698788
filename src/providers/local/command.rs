//! Commands run to completion on this machine, without a terminal: `local-pty`'s
//! `runCommand` and `transferArchive` (spec §4.3).
//!
//! The command gets the daemon's environment less its credential variables, its stdin is fed
//! from memory and closed, and
//! stdout and stderr are collected whole. `transferArchive` is `tar -x` fed the archive on
//! stdin, with `TAR_OPTIONS` removed so a user's tar defaults cannot change what lands where.

use std::path::PathBuf;
use std::process::Stdio;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;

use crate::providers::{ProviderError, RunOutput, RunRequest};

/// Runs `req` to completion, without the daemon's `withheld` variables.
pub async fn run(req: RunRequest, withheld: Vec<String>) -> Result<RunOutput, ProviderError> {
    let names: Vec<&str> = withheld.iter().map(String::as_str).collect();
    run_with(req, &names).await
}

/// Unpacks `archive` (a tar, optionally compressed in a way tar detects) into `dir`, without
/// the daemon's `withheld` variables.
pub async fn unpack(
    archive: Bytes,
    dir: PathBuf,
    withheld: Vec<String>,
) -> Result<(), ProviderError> {
    if !dir.is_dir() {
        return Err(ProviderError::BadCwd(dir.display().to_string()));
    }
    let req = RunRequest {
        argv: vec!["tar".into(), "-x".into(), "-f".into(), "-".into()],
        cwd: dir,
        stdin: archive,
        host_key: None,
    };
    let mut names: Vec<&str> = withheld.iter().map(String::as_str).collect();
    names.push("TAR_OPTIONS");
    let out = run_with(req, &names).await?;
    if out.success() {
        return Ok(());
    }
    Err(ProviderError::command_failed(
        "unpacking the archive",
        out.code,
        &out.stderr,
    ))
}

async fn run_with(req: RunRequest, withheld: &[&str]) -> Result<RunOutput, ProviderError> {
    let Some((program, args)) = req.argv.split_first() else {
        return Err(ProviderError::Os(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "empty argv",
        )));
    };
    if !req.cwd.is_dir() {
        return Err(ProviderError::BadCwd(req.cwd.display().to_string()));
    }
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(&req.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for name in withheld {
        cmd.env_remove(name);
    }
    // Only the three pipes may reach the command.
    super::child_fds::close_on_exec_beyond_stdio()?;
    let mut child = cmd.spawn()?;
    // Feed stdin while output is collected, so a command that writes before it has read all
    // its input cannot deadlock against us.
    let stdin = child.stdin.take();
    let input = req.stdin;
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A command that exits without reading all of stdin closes the pipe; that is its
            // business, and its exit status tells the story.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        }
    };
    let (_, out) = tokio::join!(feed, child.wait_with_output());
    let out = out?;
    Ok(RunOutput {
        code: out.status.code(),
        stdout: Bytes::from(out.stdout),
        stderr: Bytes::from(out.stderr),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(argv: &[&str], cwd: &std::path::Path, stdin: &[u8]) -> RunRequest {
        RunRequest {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: cwd.to_path_buf(),
            stdin: Bytes::copy_from_slice(stdin),
            host_key: None,
        }
    }

    /// [`run`] with nothing withheld.
    async fn run_plain(r: RunRequest) -> Result<RunOutput, ProviderError> {
        run(r, Vec::new()).await
    }

    #[actix_rt::test]
    async fn a_withheld_variable_does_not_reach_the_command() {
        // Set for this process only, under a name no other test reads.
        std::env::set_var("ATC_TEST_WITHHELD_FROM_COMMANDS", "secret-value");
        let dir = tempfile::tempdir().unwrap();
        let script = &["sh", "-c", "echo ${ATC_TEST_WITHHELD_FROM_COMMANDS:-none}"];
        let out = run(
            req(script, dir.path(), b""),
            vec!["ATC_TEST_WITHHELD_FROM_COMMANDS".into()],
        )
        .await
        .unwrap();
        assert_eq!(&out.stdout[..], b"none\n");
        let out = run_plain(req(script, dir.path(), b"")).await.unwrap();
        assert_eq!(&out.stdout[..], b"secret-value\n");
    }

    #[actix_rt::test]
    async fn a_command_runs_to_completion_with_its_stdin_and_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        // More than a pipe buffer each way: feeding and collecting must overlap.
        let input = vec![b'x'; 256 * 1024];
        let out = run_plain(req(&["cat"], dir.path(), &input)).await.unwrap();
        assert!(out.success());
        assert_eq!(out.stdout.len(), input.len());
        let out = run_plain(req(
            &["sh", "-c", "pwd; echo oops >&2; exit 3"],
            dir.path(),
            b"",
        ))
        .await
        .unwrap();
        assert_eq!(out.code, Some(3));
        let pwd = String::from_utf8_lossy(&out.stdout);
        assert!(
            pwd.trim_end()
                .ends_with(&*dir.path().file_name().unwrap().to_string_lossy()),
            "{pwd}"
        );
        assert_eq!(&out.stderr[..], b"oops\n");
        assert!(matches!(
            run_plain(req(&["definitely-not-a-program-atc"], dir.path(), b"")).await,
            Err(ProviderError::Os(_))
        ));
        assert!(matches!(
            run_plain(req(&[], dir.path(), b"")).await,
            Err(ProviderError::Os(_))
        ));
    }

    /// A tar of `files` made by the system tar from a scratch dir.
    async fn tar_of(files: &[(&str, &str)]) -> Bytes {
        let src = tempfile::tempdir().unwrap();
        for (name, body) in files {
            let path = src.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
        let mut argv = vec!["tar", "-c", "-f", "-"];
        argv.extend(files.iter().map(|(n, _)| *n));
        let out = run_plain(req(&argv, src.path(), b"")).await.unwrap();
        assert!(out.success(), "{:?}", out.stderr);
        out.stdout
    }

    #[actix_rt::test]
    async fn an_archive_unpacks_into_the_directory_and_tar_options_are_ignored() {
        let archive = tar_of(&[("a.txt", "alpha"), ("sub/b.txt", "beta")]).await;
        let dest = tempfile::tempdir().unwrap();
        // With TAR_OPTIONS honoured this would unpack nothing (--to-stdout) and fail the
        // checks below. Set for this process only: the test binary's other tests do not use it.
        std::env::set_var("TAR_OPTIONS", "--to-stdout");
        let done = unpack(archive.clone(), dest.path().to_path_buf(), Vec::new()).await;
        std::env::remove_var("TAR_OPTIONS");
        done.unwrap();
        assert_eq!(
            std::fs::read_to_string(dest.path().join("a.txt")).unwrap(),
            "alpha"
        );
        assert_eq!(
            std::fs::read_to_string(dest.path().join("sub/b.txt")).unwrap(),
            "beta"
        );
        let err = unpack(
            Bytes::from_static(b"not a tar at all"),
            dest.path().into(),
            Vec::new(),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, ProviderError::CommandFailed { .. }), "{err}");
        let missing = dest.path().join("missing");
        assert!(matches!(
            unpack(archive, missing, Vec::new()).await,
            Err(ProviderError::BadCwd(_))
        ));
    }
}
