//! One line of `/proc/<pid>/stat` (proc(5)), read for the fields the daemon uses: a process
//! group leader's identity (`group_leader`) and a process tree's CPU
//! (`sessions::process_cpu`). The command name (field 2) is in parentheses and may hold
//! spaces and parentheses itself, so the fields are counted from the last `)`.

/// The fields of a stat line the daemon reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Field 4: the parent's pid.
    pub ppid: i32,
    /// Field 6: the session id.
    pub session: i32,
    /// Fields 14–17: `utime + stime + cutime + cstime`, in clock ticks; the last two are the
    /// time of the children it reaped.
    pub cpu_ticks: u64,
    /// Field 22: the start time in clock ticks since boot.
    pub start_ticks: u64,
}

/// The last field [`Stat`] reads.
const LAST: usize = 22;

impl Stat {
    /// Parses a stat line; `None` when it is cut short or a field is not a number.
    pub fn parse(line: &str) -> Option<Stat> {
        let rest = line.get(line.rfind(')')? + 1..)?;
        // fields[0] is field 3 (the state), the first after the name.
        let mut fields = [""; LAST - 2];
        let mut read = 0;
        for (slot, field) in fields.iter_mut().zip(rest.split_whitespace()) {
            *slot = field;
            read += 1;
        }
        if read < fields.len() {
            return None;
        }
        let field = |n: usize| fields[n - 3];
        let mut cpu_ticks = 0u64;
        for n in 14..=17 {
            // cutime and cstime are signed in the kernel's format; never negative in practice.
            let ticks = field(n).parse::<i64>().ok()?.max(0);
            cpu_ticks = cpu_ticks.saturating_add(ticks.unsigned_abs());
        }
        Some(Stat {
            ppid: field(4).parse().ok()?,
            session: field(6).parse().ok()?,
            cpu_ticks,
            start_ticks: field(LAST).parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_past_a_name_with_spaces_and_parentheses() {
        let line = "4242 (a (b) c) S 77 4242 4243 34816 4242 4194560 100 0 0 0 11 22 33 44 20 0 \
                    1 0 987654 2400000 200 18446744073709551615 1 1 0 0 0 0 0 4 65536 0 0 0 17 1";
        assert_eq!(
            Stat::parse(line),
            Some(Stat {
                ppid: 77,
                session: 4243,
                cpu_ticks: 110,
                start_ticks: 987654
            })
        );
    }

    #[test]
    fn a_line_cut_short_or_not_numbers_is_nothing() {
        assert_eq!(Stat::parse(""), None);
        assert_eq!(Stat::parse("garbage"), None);
        assert_eq!(Stat::parse("4242 (truncated"), None);
        assert_eq!(Stat::parse("1 (x) S 0 1 1"), None);
        let line = "1 (x) S 0 1 1 0 -1 0 0 0 0 0 x 0 0 0 20 0 1 0 5";
        assert_eq!(Stat::parse(line), None, "utime is not a number");
        let line = "1 (x) S 0 1 1 0 -1 0 0 0 0 0 1 2 -3 4 20 0 1 0 5";
        assert_eq!(
            Stat::parse(line).map(|s| (s.cpu_ticks, s.start_ticks)),
            Some((7, 5)),
            "a negative child time counts as none"
        );
    }
}
