//! The room HTTP connections that have not shown the token may take: at most
//! `limits.tokenlessConnections` from one peer address, and at most a quarter of the
//! descriptor table in all. A connection counts as tokenless from its accept until a request
//! on it is admitted with the token (or a WebSocket with a ticket); from then on it is the
//! owner's and never counted. When a new connection finds its peer's room, or the whole room,
//! full, the oldest tokenless connection there is closed to make room: a client that holds
//! connections open without a token can only crowd out its own kind, never the owner, who
//! shows the token on every request. On loopback the owner and an attacker share one address,
//! which is why the cap is on tokenless connections and not on the address.
//!
//! A connection accepted but not yet read has had no chance to show the token: under a flood
//! of connects a worker may accept dozens before it first reads any of them, and the owner's
//! request, sent whole right after its connect, would be closed unread. So the oldest
//! connection that has been read goes first; one not yet read goes only when every other
//! tokenless connection there is unread too.
//!
//! The descriptor budget, with the session cap's: live sessions take at most half the table
//! (two descriptors each), tokenless connections a quarter (one each: the connection's own
//! socket, see `conn_socket`), and the last quarter is the owner's reserve (the listener, the
//! store, the owner's connections).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use super::conn_socket::ConnSocket;

/// The descriptors tokenless connections may hold when the descriptor limit is unlimited (or
/// unreadable): a quarter of the table the daemon reserves at start at most.
const UNLIMITED_BUDGET: usize = 16_384 / 4;

/// How many tokenless connections may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// From one peer address.
    pub per_peer: usize,
    /// From all peers together.
    pub total: usize,
}

impl Caps {
    /// `per_peer` as configured, and a quarter of a descriptor table of `nofile` slots
    /// (`None`: unlimited) in all; never below one, so a connection can always be accepted.
    pub fn new(per_peer: usize, nofile: Option<u64>) -> Caps {
        let total = nofile.map_or(UNLIMITED_BUDGET, |n| {
            usize::try_from(n / 4).unwrap_or(UNLIMITED_BUDGET)
        });
        Caps {
            per_peer: per_peer.max(1),
            total: total.max(1),
        }
    }

    /// [`Caps::new`] under this process's soft `RLIMIT_NOFILE`.
    pub fn for_this_process(per_peer: usize) -> Caps {
        let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        Caps::new(per_peer, soft)
    }
}

/// The connections of every worker. Connection bookkeeping, not domain state: it is touched
/// at a connection's accept, when it first shows the token and at its end, from each worker's
/// thread, for a few map operations under a plain mutex never held across an await. No actor
/// owns connections, and a message round trip per accept would only add latency.
#[derive(Debug)]
pub struct ConnRegistry {
    caps: Caps,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// The id the next connection gets; ids only grow, so a smaller id is an older connection.
    next: u64,
    /// Tokenless connections, oldest first.
    tokenless: BTreeMap<u64, Entry>,
    /// The same connections by peer address, oldest first.
    by_peer: HashMap<Option<IpAddr>, BTreeSet<u64>>,
    /// Tokenless connections closed to make room, since start.
    evicted: u64,
}

#[derive(Debug)]
struct Entry {
    peer: Option<IpAddr>,
    socket: ConnSocket,
    chance: Chance,
}

/// Whether a tokenless connection has had its chance to show the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chance {
    /// Accepted, not read yet.
    NotYet,
    /// Read at least once: what it sent so far showed no token.
    Had,
}

impl Table {
    /// The one of `ids` (oldest first) to close to make room: the oldest that has had its
    /// chance, else the oldest.
    fn victim<'a>(&self, mut ids: impl Iterator<Item = &'a u64> + Clone) -> Option<u64> {
        let had = |id: &&u64| {
            self.tokenless
                .get(id)
                .is_some_and(|e| e.chance == Chance::Had)
        };
        ids.clone().find(had).or_else(|| ids.next()).copied()
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.tokenless.remove(&id)?;
        if let Some(ids) = self.by_peer.get_mut(&entry.peer) {
            ids.remove(&id);
            if ids.is_empty() {
                self.by_peer.remove(&entry.peer);
            }
        }
        Some(entry)
    }

    fn evict(&mut self, id: u64) {
        if let Some(entry) = self.remove(id) {
            entry.socket.close();
            self.evicted += 1;
            tracing::debug!(peer = ?entry.peer, "tokenless connection closed to make room");
            // One line each time the count doubles: an operator learns of a flood without
            // the log becoming one.
            if self.evicted.is_power_of_two() {
                tracing::warn!(peer = ?entry.peer, evicted = self.evicted,
                    "tokenless connections closed to make room for newer ones");
            }
        }
    }
}

impl ConnRegistry {
    /// A registry with these caps.
    pub fn new(caps: Caps) -> Arc<ConnRegistry> {
        Arc::new(ConnRegistry {
            caps,
            table: Mutex::new(Table::default()),
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // Every update leaves the maps consistent before anything that could panic, so a
        // poisoned lock holds a usable table.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a connection just accepted from `peer` as tokenless, closing the oldest
    /// tokenless connection of the same peer, or of all, when there is no room for it.
    /// `socket` is how it is closed in its turn. It stays counted until the answer shows the
    /// token or is dropped.
    pub fn admit(self: &Arc<Self>, peer: Option<IpAddr>, socket: ConnSocket) -> Registration {
        // 192.0.2.1 and ::ffff:192.0.2.1 are one peer.
        let peer = peer.map(|ip| ip.to_canonical());
        let mut t = self.table();
        let id = t.next;
        t.next += 1;
        while let Some(victim) = t
            .by_peer
            .get(&peer)
            .filter(|ids| ids.len() >= self.caps.per_peer)
            .and_then(|ids| t.victim(ids.iter()))
        {
            t.evict(victim);
        }
        while t.tokenless.len() >= self.caps.total {
            let Some(victim) = t.victim(t.tokenless.keys()) else {
                break;
            };
            t.evict(victim);
        }
        t.tokenless.insert(
            id,
            Entry {
                peer,
                socket,
                chance: Chance::NotYet,
            },
        );
        t.by_peer.entry(peer).or_default().insert(id);
        Registration {
            id,
            registry: self.clone(),
        }
    }

    /// Tokenless connections open now, and closed to make room since start.
    #[cfg(test)]
    pub fn counts(&self) -> (usize, u64) {
        let t = self.table();
        (t.tokenless.len(), t.evicted)
    }
}

/// One accepted connection's place in the registry, held by the connection's stream: it
/// leaves the registry when the connection's socket is dropped.
#[derive(Debug)]
pub struct Registration {
    id: u64,
    registry: Arc<ConnRegistry>,
}

impl Registration {
    /// The connection is being read for the first time: from now on it may be closed to make
    /// room before connections that have not been read yet.
    pub fn first_read(&self) {
        if let Some(entry) = self.registry.table().tokenless.get_mut(&self.id) {
            entry.chance = Chance::Had;
        }
    }

    /// The handle the auth middleware marks the connection with, kept in its data.
    pub fn mark(&self) -> ConnMark {
        ConnMark {
            id: self.id,
            registry: self.registry.clone(),
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.table().remove(self.id);
    }
}

/// Marks one connection as the owner's, from its data (`req.conn_data`).
#[derive(Debug, Clone)]
pub struct ConnMark {
    id: u64,
    registry: Arc<ConnRegistry>,
}

impl ConnMark {
    /// A request on this connection was admitted with the token (or a ticket): it is no
    /// longer counted or closed as tokenless. Once is enough; later calls change nothing.
    pub fn token_shown(&self) {
        self.registry.table().remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::conn_socket::Ending;
    use std::task::Waker;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    /// A connection from `peer`, read once.
    fn open(reg: &Arc<ConnRegistry>, peer: &str) -> (Registration, ConnSocket) {
        let socket = ConnSocket::new();
        let registration = reg.admit(ip(peer), socket.clone());
        registration.first_read();
        (registration, socket)
    }

    fn ending(s: &ConnSocket) -> Ending {
        s.watch(Waker::noop())
    }

    #[test]
    fn a_full_peer_loses_its_oldest_tokenless_connection_and_no_other() {
        let reg = ConnRegistry::new(Caps {
            per_peer: 2,
            total: 10,
        });
        let (_a, a) = open(&reg, "127.0.0.1");
        let (_b, b) = open(&reg, "::ffff:127.0.0.1");
        let (_other, other) = open(&reg, "10.0.0.1");
        let (_c, c) = open(&reg, "127.0.0.1");
        assert_eq!(ending(&a), Ending::Closed, "the oldest of the full peer");
        assert_eq!(ending(&b), Ending::Open);
        assert_eq!(ending(&c), Ending::Open);
        assert_eq!(ending(&other), Ending::Open);
        assert_eq!(reg.counts(), (3, 1));
    }

    #[test]
    fn a_connection_that_showed_the_token_is_neither_counted_nor_closed() {
        let reg = ConnRegistry::new(Caps {
            per_peer: 1,
            total: 10,
        });
        let (owner_reg, owner) = open(&reg, "127.0.0.1");
        owner_reg.mark().token_shown();
        let (_x, x) = open(&reg, "127.0.0.1");
        let (_y, _) = open(&reg, "127.0.0.1");
        assert_eq!(ending(&owner), Ending::Open);
        assert_eq!(ending(&x), Ending::Closed);
        assert_eq!(reg.counts(), (1, 1));
        // Marking again, or after the connection is gone, changes nothing.
        let mark = owner_reg.mark();
        drop(owner_reg);
        mark.token_shown();
        assert_eq!(reg.counts(), (1, 1));
    }

    #[test]
    fn the_whole_room_is_shared_oldest_out_and_a_closed_connection_leaves_it() {
        let reg = ConnRegistry::new(Caps {
            per_peer: 5,
            total: 2,
        });
        let (first_reg, first) = open(&reg, "10.0.0.1");
        let (_second, second) = open(&reg, "10.0.0.2");
        drop(first_reg);
        assert_eq!(reg.counts(), (1, 0));
        let (_third, _) = open(&reg, "10.0.0.3");
        assert_eq!(ending(&first), Ending::Open, "it had left already");
        let (_fourth, _) = open(&reg, "10.0.0.4");
        assert_eq!(ending(&second), Ending::Closed);
        assert_eq!(reg.counts(), (2, 1));
    }

    #[test]
    fn a_connection_not_read_yet_goes_last() {
        let reg = ConnRegistry::new(Caps {
            per_peer: 2,
            total: 10,
        });
        let unread = |reg: &Arc<ConnRegistry>| {
            let s = ConnSocket::new();
            (reg.admit(ip("127.0.0.1"), s.clone()), s)
        };
        let (_u, u) = unread(&reg);
        let (_a, a) = open(&reg, "127.0.0.1");
        let (_b, _) = open(&reg, "127.0.0.1");
        assert_eq!(ending(&u), Ending::Open, "older, but never read");
        assert_eq!(ending(&a), Ending::Closed);
        // With only unread connections there, the oldest goes all the same.
        let reg = ConnRegistry::new(Caps {
            per_peer: 2,
            total: 10,
        });
        let (_first, first) = unread(&reg);
        let (_second, second) = unread(&reg);
        let (_third, _) = unread(&reg);
        assert_eq!(ending(&first), Ending::Closed);
        assert_eq!(ending(&second), Ending::Open);
    }

    #[test]
    fn the_budget_is_a_quarter_of_the_descriptor_table() {
        assert_eq!(Caps::new(64, Some(1024)).total, 256);
        assert_eq!(Caps::new(64, None).total, UNLIMITED_BUDGET);
        assert_eq!(
            Caps::new(0, Some(2)),
            Caps {
                per_peer: 1,
                total: 1
            }
        );
    }
}
