//! `atc open`: prints the URL of the daemon's browser page (`http://ADDR/`) and opens it in a
//! browser when one is configured: `$BROWSER` (the first of its `:`-separated commands, with
//! `%s` standing for the URL, else the URL appended), else `xdg-open` when it is on `PATH`.
//!
//! The URL never carries the token: the page asks for it once and keeps it in the browser's
//! session storage, so nothing a user copies or a history file keeps can sign anyone in.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::Args;

use super::output;
use atc_client::DaemonClient;

/// Arguments of `atc open`.
#[derive(Debug, Args)]
pub struct OpenArgs {
    /// Only print the URL; do not start a browser.
    #[arg(long)]
    pub no_browser: bool,
}

/// A browser to start: the program and its arguments.
#[derive(Debug, PartialEq, Eq)]
pub struct Launch {
    program: String,
    args: Vec<String>,
}

/// Prints the URL, then starts the browser if there is one. Exit code 0, or 1 when a
/// configured browser could not be started (the URL is printed either way).
pub async fn run(client: &DaemonClient, args: OpenArgs) -> anyhow::Result<i32> {
    let url = page_url(client.base_url());
    output::print(&format!("{url}\n"))?;
    if args.no_browser {
        return Ok(0);
    }
    let browser = std::env::var("BROWSER").ok();
    let Some(launch) = browser_command(browser.as_deref(), find_on_path("xdg-open"), &url) else {
        output::note(
            "no browser configured (set $BROWSER, or install xdg-open); open the URL above",
        );
        return Ok(0);
    };
    // Not waited for: a browser may run for as long as the user keeps it, and xdg-open hands
    // off and exits by itself.
    let started = Command::new(&launch.program)
        .args(&launch.args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match started {
        Ok(_child) => Ok(0),
        Err(err) => {
            output::note(&format!(
                "could not start the browser `{}` ({err}); open the URL above, or fix $BROWSER",
                launch.program
            ));
            Ok(1)
        }
    }
}

/// The page's URL for a daemon at `base_url` (`http://127.0.0.1:7767` → `.../`).
pub fn page_url(base_url: &str) -> String {
    format!("{}/", base_url.trim_end_matches('/'))
}

/// The browser to start for `url`: `$BROWSER`'s first command if it names one, else
/// `xdg_open` if it was found, else none.
pub fn browser_command(
    browser_env: Option<&str>,
    xdg_open: Option<PathBuf>,
    url: &str,
) -> Option<Launch> {
    let configured = browser_env
        .and_then(|list| list.split(':').map(str::trim).find(|c| !c.is_empty()))
        .and_then(|command| {
            let mut words = command.split_whitespace().map(str::to_string);
            let program = words.next()?;
            let mut args: Vec<String> = words.collect();
            if args.iter().any(|a| a.contains("%s")) {
                for arg in &mut args {
                    *arg = arg.replace("%s", url);
                }
            } else {
                args.push(url.to_string());
            }
            Some(Launch { program, args })
        });
    configured.or_else(|| {
        xdg_open.map(|path| Launch {
            program: path.display().to_string(),
            args: vec![url.to_string()],
        })
    })
}

/// `name` in a directory of `$PATH`, if it is a file there.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_file(candidate))
}

fn is_file(path: &Path) -> bool {
    path.metadata().is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "http://127.0.0.1:7767/";

    fn launch(program: &str, args: &[&str]) -> Option<Launch> {
        Some(Launch {
            program: program.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
        })
    }

    #[test]
    fn the_url_is_the_daemons_root() {
        assert_eq!(page_url("http://127.0.0.1:7767"), URL);
        assert_eq!(page_url("http://127.0.0.1:7767/"), URL);
    }

    #[test]
    fn browser_comes_first_then_xdg_open() {
        let xdg = Some(PathBuf::from("/usr/bin/xdg-open"));
        assert_eq!(
            browser_command(Some("firefox"), xdg.clone(), URL),
            launch("firefox", &[URL])
        );
        assert_eq!(
            browser_command(Some("chromium --new-window:firefox"), None, URL),
            launch("chromium", &["--new-window", URL])
        );
        assert_eq!(
            browser_command(Some("w3m '%s'x"), None, URL),
            launch("w3m", &[&format!("'{URL}'x")])
        );
        assert_eq!(
            browser_command(Some(" : "), xdg.clone(), URL),
            launch("/usr/bin/xdg-open", &[URL])
        );
        assert_eq!(
            browser_command(None, xdg, URL),
            launch("/usr/bin/xdg-open", &[URL])
        );
        assert_eq!(browser_command(None, None, URL), None);
    }
}
