//! How client commands write to the user: results on stdout (what scripts read), notes and
//! confirmations on stderr. A closed stdout pipe (`atc ls | head -1`) is a normal way for a
//! reader to stop, so it ends the command quietly instead of as an error or a panic (which
//! `println!` would do).

use std::io::Write;

/// Writes a command's result to stdout. A reader that went away is not an error.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(err) => Err(anyhow::anyhow!("cannot write to stdout: {err}")),
    }
}

/// Writes one line for a person to stderr. Failure is ignored: stderr is where failures would
/// be reported, so there is nowhere left to say it.
pub fn note(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{line}");
}
