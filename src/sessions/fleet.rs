//! `Fleet`: the manager's table of sessions, each with its address and the descriptor it last
//! reported, in spawn order, and the body of `GET /v1/sessions` kept serialized beside them.
//!
//! A listing is the hot read at scale (thousands of sessions, asked by every client that shows
//! a list), so it must not rebuild a JSON tree per session per call: each descriptor is
//! serialized once after it changes, and the whole body once after any entry changes; an
//! unchanged fleet answers with the same bytes. The invariant that keeps this exact: a
//! descriptor is changed only through [`Fleet::update`], and every change (insert, update,
//! remove) drops the cached JSON it touches, so the next listing carries every field exactly as
//! fresh as the descriptor the manager holds.

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};

use atc_protocol::{Descriptor, SessionId};

/// One session: where to reach it and what it last reported.
pub struct Entry<A> {
    /// The session's actor.
    pub addr: A,
    descriptor: Descriptor,
    /// `descriptor` as JSON; `None` from each change until the next listing needs it.
    json: Option<Bytes>,
}

impl<A> Entry<A> {
    /// The session as it last reported itself.
    pub fn descriptor(&self) -> &Descriptor {
        &self.descriptor
    }

    fn json(&mut self) -> &[u8] {
        let descriptor = &self.descriptor;
        self.json.get_or_insert_with(|| {
            // Every field of a Descriptor is a string, number, bool, enum or a struct of
            // those, with no map keyed by anything but strings: serializing it cannot fail.
            serde_json::to_vec(descriptor)
                .expect("a Descriptor always serializes")
                .into()
        })
    }
}

/// The sessions the manager supervises, oldest first.
pub struct Fleet<A> {
    sessions: HashMap<SessionId, Entry<A>>,
    /// Spawn order, so lists are stable (oldest first).
    order: Vec<SessionId>,
    /// The listing body as of the last listing; `None` once any entry changed since.
    body: Option<Bytes>,
}

impl<A> Default for Fleet<A> {
    fn default() -> Self {
        Fleet {
            sessions: HashMap::new(),
            order: Vec::new(),
            body: None,
        }
    }
}

impl<A> Fleet<A> {
    /// Adds a session, or replaces the entry of one already there (keeping its place).
    pub fn insert(&mut self, addr: A, descriptor: Descriptor) {
        let id = descriptor.id;
        let entry = Entry {
            addr,
            descriptor,
            json: None,
        };
        if self.sessions.insert(id, entry).is_none() {
            self.order.push(id);
        }
        self.body = None;
    }

    /// Changes the descriptor of `id`, if it is listed.
    pub fn update(&mut self, id: &SessionId, change: impl FnOnce(&mut Descriptor)) {
        if let Some(e) = self.sessions.get_mut(id) {
            change(&mut e.descriptor);
            e.json = None;
            self.body = None;
        }
    }

    /// Drops a session.
    pub fn remove(&mut self, id: &SessionId) {
        if self.sessions.remove(id).is_some() {
            self.order.retain(|o| o != id);
            self.body = None;
        }
    }

    /// The entry of `id`.
    pub fn get(&self, id: &SessionId) -> Option<&Entry<A>> {
        self.sessions.get(id)
    }

    /// Every entry, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &Entry<A>> {
        self.sessions.values()
    }

    /// Every entry, oldest first.
    pub fn in_order(&self) -> impl Iterator<Item = &Entry<A>> {
        self.order.iter().filter_map(|id| self.sessions.get(id))
    }

    /// How many sessions there are.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The body of `GET /v1/sessions`: `{"sessions": [descriptor, ...]}`, oldest first.
    /// Unchanged since the last call, it is the same bytes (a reference count, no copy);
    /// otherwise only the entries that changed are serialized again.
    pub fn listing(&mut self) -> Bytes {
        if let Some(body) = &self.body {
            return body.clone();
        }
        const HEAD: &[u8] = b"{\"sessions\":[";
        const TAIL: &[u8] = b"]}";
        let mut parts: Vec<&[u8]> = Vec::with_capacity(self.order.len());
        // Serialize what changed first (it needs each entry mutably), then copy once into a
        // body sized exactly.
        for id in &self.order {
            if let Some(e) = self.sessions.get_mut(id) {
                e.json();
            }
        }
        for id in &self.order {
            if let Some(json) = self.sessions.get(id).and_then(|e| e.json.as_deref()) {
                parts.push(json);
            }
        }
        let len = HEAD.len()
            + TAIL.len()
            + parts.iter().map(|p| p.len()).sum::<usize>()
            + parts.len().saturating_sub(1);
        let mut body = BytesMut::with_capacity(len);
        body.put_slice(HEAD);
        for (i, json) in parts.iter().enumerate() {
            if i > 0 {
                body.put_u8(b',');
            }
            body.put_slice(json);
        }
        body.put_slice(TAIL);
        debug_assert_eq!(body.len(), len);
        let body = body.freeze();
        self.body = Some(body.clone());
        body
    }

    /// [`Fleet::listing`] with each session in `usage` carrying its `usage` field. Usage
    /// changes on every read, so it is never cached: it goes into a copy of the body, each
    /// figure spliced before its descriptor's closing brace (a descriptor serializes as an
    /// object without `usage`, which is skipped while `None`).
    pub fn listing_with(&mut self, usage: &HashMap<SessionId, atc_protocol::Usage>) -> Bytes {
        if usage.is_empty() {
            return self.listing();
        }
        self.listing_of(usage, |_| true)
    }

    /// The listing of the sessions `keep` keeps (a principal's, which sees only its reach),
    /// with their usage as [`Fleet::listing_with`] splices it; built for the call, never
    /// cached.
    pub fn listing_of(
        &mut self,
        usage: &HashMap<SessionId, atc_protocol::Usage>,
        keep: impl Fn(&Descriptor) -> bool,
    ) -> Bytes {
        let mut body = BytesMut::with_capacity(64 * self.order.len() + 64);
        body.put_slice(b"{\"sessions\":[");
        let mut first = true;
        for id in &self.order {
            let Some(e) = self.sessions.get_mut(id) else {
                continue;
            };
            if !keep(&e.descriptor) {
                continue;
            }
            if !std::mem::take(&mut first) {
                body.put_u8(b',');
            }
            let json = e.json();
            match (usage.get(id), json.split_last()) {
                (Some(u), Some((b'}', head))) => {
                    body.put_slice(head);
                    body.put_slice(b",\"usage\":");
                    // A Usage is four numbers: serializing it cannot fail.
                    body.put_slice(&serde_json::to_vec(u).expect("a Usage always serializes"));
                    body.put_u8(b'}');
                }
                _ => body.put_slice(json),
            }
        }
        body.put_slice(b"]}");
        body.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atc_protocol::SessionState;
    use serde_json::Value;

    #[test]
    fn usage_is_spliced_into_its_own_sessions_only_and_never_cached() {
        let mut fleet: Fleet<()> = Fleet::default();
        fleet.insert((), session(1, "a"));
        fleet.insert((), session(2, "b"));
        let plain = fleet.listing();
        let usage = atc_protocol::Usage {
            memory_bytes: 4096,
            memory_peak_bytes: 8192,
            cpu_seconds: 1.5,
            pids: 2,
        };
        let with = fleet.listing_with(&HashMap::from([(session(2, "b").id, usage)]));
        let list: atc_protocol::responses::SessionList = serde_json::from_slice(&with).unwrap();
        assert_eq!(list.sessions[0].usage, None);
        assert_eq!(list.sessions[1].usage, Some(usage));
        assert_eq!(list.sessions[1].name, "b");
        assert_eq!(fleet.listing(), plain, "the cached body has no usage");
        assert_eq!(fleet.listing_with(&HashMap::new()), plain);
    }

    fn session(n: u128, name: &str) -> Descriptor {
        Descriptor {
            id: SessionId::from(uuid::Uuid::from_u128(n)),
            name: name.into(),
            ..Descriptor::default()
        }
    }

    fn listed(fleet: &mut Fleet<()>) -> Vec<Descriptor> {
        let body: Value = serde_json::from_slice(&fleet.listing()).expect("listing is JSON");
        serde_json::from_value(body["sessions"].clone()).expect("descriptors")
    }

    #[test]
    fn an_empty_fleet_lists_an_empty_array() {
        let mut fleet = Fleet::<()>::default();
        assert_eq!(&fleet.listing()[..], br#"{"sessions":[]}"#);
    }

    #[test]
    fn the_listing_is_every_descriptor_oldest_first() {
        let mut fleet = Fleet::default();
        for (n, name) in [(3, "c"), (1, "a"), (2, "b")] {
            fleet.insert((), session(n, name));
        }
        let names: Vec<String> = listed(&mut fleet).into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["c", "a", "b"]);
        // Each entry is the descriptor's own serialization.
        let one = session(3, "c");
        let body = fleet.listing();
        let expected = serde_json::to_string(&one).expect("serializes");
        let text = std::str::from_utf8(&body).expect("utf-8");
        assert!(
            text.starts_with(&format!("{{\"sessions\":[{expected},")),
            "{text}"
        );
    }

    #[test]
    fn every_change_shows_in_the_next_listing() {
        let mut fleet = Fleet::default();
        fleet.insert((), session(1, "a"));
        fleet.insert((), session(2, "b"));
        let before = fleet.listing();
        // Unchanged: the same bytes, not a rebuild.
        assert_eq!(fleet.listing().as_ptr(), before.as_ptr());

        fleet.update(&SessionId::from(uuid::Uuid::from_u128(2)), |d| {
            d.state = SessionState::NeedsYou;
            d.unread = true;
            d.alive = false;
        });
        let after = listed(&mut fleet);
        assert_eq!(after[1].state, SessionState::NeedsYou);
        assert!(after[1].unread);
        assert!(!after[1].alive);
        assert_eq!(after[0], session(1, "a"));

        // A replaced entry keeps its place and lists its new descriptor.
        fleet.insert((), session(1, "renamed"));
        let names: Vec<String> = listed(&mut fleet).into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["renamed", "b"]);

        fleet.remove(&SessionId::from(uuid::Uuid::from_u128(1)));
        let ids: Vec<SessionId> = listed(&mut fleet).into_iter().map(|d| d.id).collect();
        assert_eq!(ids, [SessionId::from(uuid::Uuid::from_u128(2))]);
        assert_eq!(fleet.len(), 1);
    }

    #[test]
    fn changes_to_unknown_sessions_are_ignored() {
        let mut fleet = Fleet::default();
        fleet.insert((), session(1, "a"));
        let before = fleet.listing();
        fleet.update(&SessionId::from(uuid::Uuid::from_u128(9)), |d| {
            d.name = "x".into()
        });
        fleet.remove(&SessionId::from(uuid::Uuid::from_u128(9)));
        assert_eq!(fleet.listing().as_ptr(), before.as_ptr());
    }
}
