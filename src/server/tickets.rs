//! Single-use WebSocket tickets (`POST /v1/tickets`): a browser cannot put a header on a
//! WebSocket upgrade, and a token in the URL would land in history and logs, so the page asks
//! for a ticket with its bearer token and passes it as `?ticket=` on one upgrade instead.
//!
//! A ticket is 32 random bytes in hex, valid for the injected lifetime (30 s by default) and
//! for one upgrade. It remembers the token that asked for it, so the socket it opens closes
//! when that token is rotated out, as a socket opened with the token itself would. Tickets
//! live only in memory (a restart voids them, which costs a client one more request), at most
//! [`MAX_LIVE`] at once: expired ones are pruned whenever one is issued, and past the cap the
//! oldest goes. Which routes take a ticket is `auth.rs`'s decision; nothing here logs or
//! prints a ticket ([`Tickets`]'s `Debug` only counts them).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many tickets may be live at once. A page asks for one per socket it opens, a few at a
/// time; the cap only bounds memory against a client asking in a loop.
pub const MAX_LIVE: usize = 1024;

/// Why a ticket cannot be issued.
#[derive(Debug, thiserror::Error)]
pub enum TicketError {
    /// The OS had no randomness to give.
    #[error("no randomness for a ticket: {0}")]
    NoRandomness(String),
}

/// A freshly issued ticket.
pub struct Issued {
    /// The ticket text (64 hex digits).
    pub ticket: String,
    /// When it stops being accepted.
    pub expires: Instant,
}

/// One live ticket.
struct Live {
    /// The bearer token that asked for it.
    token: String,
    /// The principal the owner asked as (`X-Atc-As`), which the socket acts as too.
    acting_as: Option<String>,
    expires: Instant,
}

/// What a spent ticket opens a socket with: the token that asked for it, and the principal
/// it was asked as.
#[derive(Clone, PartialEq, Eq)]
pub struct Redeemed {
    /// The bearer token.
    pub token: String,
    /// The `X-Atc-As` of the ticket's request.
    pub acting_as: Option<String>,
}

impl std::fmt::Debug for Redeemed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redeemed(redacted, as {:?})", self.acting_as)
    }
}

/// The live tickets, shared by every worker.
///
/// A plain mutex fits: each critical section is a map lookup or insert (plus a prune over at
/// most [`MAX_LIVE`] entries when issuing), never held across an await, and a ticket issued on
/// one worker must be redeemable on another.
pub struct Tickets {
    ttl: Duration,
    live: Mutex<HashMap<String, Live>>,
}

impl std::fmt::Debug for Tickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.live.lock().map(|l| l.len()).unwrap_or_default();
        write!(f, "Tickets({count} live, redacted)")
    }
}

impl Tickets {
    /// An empty set whose tickets live `ttl`.
    pub fn new(ttl: Duration) -> Tickets {
        Tickets {
            ttl,
            live: Mutex::new(HashMap::new()),
        }
    }

    /// How long a ticket lives.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Issues a ticket for the holder of `token` acting as `acting_as`, valid from `now` for
    /// the lifetime.
    pub fn issue(
        &self,
        token: &str,
        acting_as: Option<&str>,
        now: Instant,
    ) -> Result<Issued, TicketError> {
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw).map_err(|e| TicketError::NoRandomness(e.to_string()))?;
        let ticket: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let expires = now + self.ttl;
        let mut live = self.lock();
        live.retain(|_, t| t.expires > now);
        while live.len() >= MAX_LIVE {
            let oldest = live
                .iter()
                .min_by_key(|(_, t)| t.expires)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => live.remove(&k),
                None => break,
            };
        }
        live.insert(
            ticket.clone(),
            Live {
                token: token.to_string(),
                acting_as: acting_as.map(str::to_string),
                expires,
            },
        );
        Ok(Issued { ticket, expires })
    }

    /// Spends `ticket`: what asked for it, if the ticket is live at `now`. A used, expired
    /// or unknown ticket answers `None`; either way the ticket is gone afterwards.
    pub fn redeem(&self, ticket: &str, now: Instant) -> Option<Redeemed> {
        let live = self.lock().remove(ticket)?;
        (live.expires > now).then_some(Redeemed {
            token: live.token,
            acting_as: live.acting_as,
        })
    }

    /// How many tickets are held (live or not yet pruned).
    pub fn held(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Live>> {
        // A panic while holding the lock cannot leave the map half-changed (every change is
        // one std call), so a poisoned lock is still a usable map.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "tttttttttttttttttttttttttttttttt";

    #[test]
    fn a_ticket_opens_once_and_names_its_token() {
        let tickets = Tickets::new(Duration::from_secs(30));
        let now = Instant::now();
        let issued = tickets.issue(TOKEN, None, now).unwrap();
        assert_eq!(issued.ticket.len(), 64);
        assert_eq!(issued.expires, now + Duration::from_secs(30));
        assert_eq!(
            tickets
                .redeem(&issued.ticket, now)
                .map(|r| r.token)
                .as_deref(),
            Some(TOKEN)
        );
        assert_eq!(tickets.redeem(&issued.ticket, now), None);
        assert_eq!(tickets.redeem("not-a-ticket", now), None);
    }

    #[test]
    fn an_expired_ticket_is_refused_and_pruned() {
        let tickets = Tickets::new(Duration::from_secs(30));
        let now = Instant::now();
        let old = tickets.issue(TOKEN, None, now).unwrap();
        let later = now + Duration::from_secs(30);
        assert_eq!(tickets.redeem(&old.ticket, later), None);
        let stale = tickets.issue(TOKEN, None, now).unwrap();
        let fresh = tickets.issue(TOKEN, None, later).unwrap();
        assert_eq!(tickets.held(), 1, "issuing prunes what expired");
        assert_eq!(tickets.redeem(&stale.ticket, later), None);
        assert!(tickets.redeem(&fresh.ticket, later).is_some());
    }

    #[test]
    fn a_ticket_remembers_the_principal_it_was_asked_as() {
        let tickets = Tickets::new(Duration::from_secs(30));
        let now = Instant::now();
        let issued = tickets.issue(TOKEN, Some("ci"), now).unwrap();
        let spent = tickets.redeem(&issued.ticket, now).unwrap();
        assert_eq!(spent.acting_as.as_deref(), Some("ci"));
        assert!(!format!("{spent:?}").contains(TOKEN));
    }

    #[test]
    fn past_the_cap_the_oldest_goes() {
        let tickets = Tickets::new(Duration::from_secs(30));
        let start = Instant::now();
        let first = tickets.issue(TOKEN, None, start).unwrap();
        for i in 1..=MAX_LIVE {
            tickets
                .issue(TOKEN, None, start + Duration::from_micros(i as u64))
                .unwrap();
        }
        assert_eq!(tickets.held(), MAX_LIVE);
        assert_eq!(tickets.redeem(&first.ticket, start), None);
    }

    #[test]
    fn nothing_prints_a_ticket_or_its_token() {
        let tickets = Tickets::new(Duration::from_secs(30));
        let issued = tickets.issue(TOKEN, Some("ci"), Instant::now()).unwrap();
        let shown = format!("{tickets:?}");
        assert!(
            !shown.contains(&issued.ticket) && !shown.contains(TOKEN),
            "{shown}"
        );
    }
}
