//! Reassembly of fragmented WebSocket messages (RFC 6455 §5.4), shared by every socket atc
//! reads: its own attach and events sockets (`server::ws_transport`), its connections to impd
//! (`impd-client`'s `ws_link`), and the impd simulator the tests run. actix-http's codec hands out a
//! fragmented message as continuation items; this collects them, bounded, into one message.

use actix_http::ws::Item;
use bytes::{Bytes, BytesMut};

/// A whole message made of fragments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Whole {
    /// A text message (not checked for UTF-8 here).
    Text(Bytes),
    /// A binary message.
    Binary(Bytes),
}

/// Why a fragment was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FragmentError {
    /// A continuation came without a first fragment.
    NotStarted,
    /// The message grew past the limit; what was collected is dropped.
    TooBig,
}

/// The fragments of the message in progress on one connection.
#[derive(Debug)]
pub struct Fragments {
    /// Text or binary, and its bytes so far.
    partial: Option<(bool, BytesMut)>,
    max: usize,
}

impl Fragments {
    /// Messages over `max` bytes are refused.
    pub fn new(max: usize) -> Fragments {
        Fragments { partial: None, max }
    }

    /// Adds one continuation item; the whole message once its last fragment arrived.
    pub fn push(&mut self, item: Item) -> Result<Option<Whole>, FragmentError> {
        let (first, chunk, last) = match item {
            Item::FirstText(b) => (Some(true), b, false),
            Item::FirstBinary(b) => (Some(false), b, false),
            Item::Continue(b) => (None, b, false),
            Item::Last(b) => (None, b, true),
        };
        if let Some(is_text) = first {
            self.partial = Some((is_text, BytesMut::new()));
        }
        let Some((is_text, acc)) = self.partial.as_mut() else {
            return Err(FragmentError::NotStarted);
        };
        if acc.len() + chunk.len() > self.max {
            self.partial = None;
            return Err(FragmentError::TooBig);
        }
        acc.extend_from_slice(&chunk);
        if !last {
            return Ok(None);
        }
        let is_text = *is_text;
        let whole = acc.split().freeze();
        self.partial = None;
        Ok(Some(if is_text {
            Whole::Text(whole)
        } else {
            Whole::Binary(whole)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn fragments_join_into_one_bounded_message() {
        let mut f = Fragments::new(8);
        assert_eq!(f.push(Item::FirstText(b("ab"))), Ok(None));
        assert_eq!(f.push(Item::Continue(b("cd"))), Ok(None));
        assert_eq!(
            f.push(Item::Last(b("e"))),
            Ok(Some(Whole::Text(b("abcde"))))
        );
        assert_eq!(f.push(Item::Last(b("x"))), Err(FragmentError::NotStarted));
        assert_eq!(f.push(Item::FirstBinary(b("12345"))), Ok(None));
        assert_eq!(
            f.push(Item::Continue(b("6789"))),
            Err(FragmentError::TooBig)
        );
        assert_eq!(
            f.push(Item::Continue(b("x"))),
            Err(FragmentError::NotStarted)
        );
        assert_eq!(f.push(Item::FirstBinary(b("1"))), Ok(None));
        assert_eq!(f.push(Item::Last(b("2"))), Ok(Some(Whole::Binary(b("12")))));
    }
}
