//! The daemon process's own resident memory and open descriptors, read from `/proc/self` at
//! scrape time. Blocking reads: callers run [`read`] off the executor.

use std::path::Path;

/// What `/proc/self` said; a figure it could not give is `None` (and left out of the scrape).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessStats {
    /// Resident set size, in bytes.
    pub rss_bytes: Option<u64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
}

/// Reads this process's figures.
pub fn read() -> ProcessStats {
    read_from(Path::new("/proc/self"))
}

fn read_from(proc_dir: &Path) -> ProcessStats {
    let rss_bytes = std::fs::read_to_string(proc_dir.join("status"))
        .ok()
        .and_then(|s| rss_of_status(&s));
    // The directory's own listing holds one descriptor while it is read; it is counted,
    // as every fd exporter that reads this directory does.
    let open_fds = std::fs::read_dir(proc_dir.join("fd"))
        .ok()
        .map(|d| d.filter(Result::is_ok).count() as u64);
    ProcessStats {
        rss_bytes,
        open_fds,
    }
}

/// `VmRSS:` of a `/proc/<pid>/status` text, in bytes (the kernel writes it in kB).
fn rss_of_status(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kb: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_is_read_from_the_status_line_in_bytes() {
        let status = "Name:\tatc\nVmPeak:\t  9999 kB\nVmRSS:\t   1234 kB\nThreads:\t4\n";
        assert_eq!(rss_of_status(status), Some(1234 * 1024));
        assert_eq!(rss_of_status("Name:\tatc\n"), None);
        assert_eq!(rss_of_status("VmRSS:\tlots\n"), None);
    }

    #[test]
    fn this_process_has_some_memory_and_descriptors() {
        let s = read();
        assert!(s.rss_bytes.is_some_and(|b| b > 0), "{s:?}");
        // stdin, stdout and stderr at least, in a test harness.
        assert!(s.open_fds.is_some_and(|n| n >= 3), "{s:?}");
    }
}
