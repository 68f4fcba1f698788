//! The header of each WebSocket frame a client sends, checked before any of its payload is
//! read (RFC 6455 §5.2), and the ways a client can break the protocol, each with its close code.
//!
//! actix-http's parser compares a frame's length with the message cap only once the whole frame
//! has arrived, so a client that declared 4 GiB made us buffer everything it sent behind the
//! header. [`check`] looks at the header alone, so a frame over the cap is refused before one
//! byte of its payload is kept. It checks the rest of what a header can get wrong on the way;
//! what only the payload shows (continuation order, a close frame's body, UTF-8) is left to the
//! codec and to `ws_transport`.

use actix_http::ws::{CloseCode, ProtocolError};

/// Control frames carry at most this many payload bytes (RFC 6455 §5.5).
const MAX_CONTROL_PAYLOAD: u64 = 125;

/// How a client broke the WebSocket protocol. The socket answers with [`Violation::close_code`]
/// and ends the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// An RSV bit is set, and we negotiate no extension that defines one.
    #[error("a reserved bit is set")]
    ReservedBits,
    /// An opcode RFC 6455 reserves (0x3 to 0x7, 0xB to 0xF).
    #[error("reserved opcode {0:#x}")]
    ReservedOpcode(u8),
    /// A client frame without a mask (RFC 6455 §5.1).
    #[error("a client frame is not masked")]
    Unmasked,
    /// A control frame without FIN: control frames cannot be fragmented.
    #[error("a control frame is fragmented")]
    FragmentedControl,
    /// A control frame longer than 125 bytes.
    #[error("a control frame declares {0} bytes (at most 125)")]
    ControlTooLong(u64),
    /// A 64-bit length with its top bit set.
    #[error("a frame length has its top bit set")]
    BadLength,
    /// A continuation without a message in progress, or a new message inside one.
    #[error("continuation frames out of order")]
    BadContinuation,
    /// A close frame whose body is not a valid code and UTF-8 reason.
    #[error("a malformed close frame")]
    BadClose,
    /// A text message that is not UTF-8 (RFC 6455 §8.1).
    #[error("a text message is not UTF-8")]
    InvalidUtf8,
    /// A message longer than the socket's cap, known from a frame header or from fragments.
    #[error("a message of at least {declared} bytes, over the {cap}-byte cap")]
    TooBig {
        /// The length declared, or collected so far.
        declared: u64,
        /// The socket's cap.
        cap: usize,
    },
}

impl Violation {
    /// The close code RFC 6455 §7.4.1 gives this violation.
    pub fn close_code(self) -> CloseCode {
        match self {
            Violation::ReservedBits
            | Violation::ReservedOpcode(_)
            | Violation::Unmasked
            | Violation::FragmentedControl
            | Violation::ControlTooLong(_)
            | Violation::BadLength
            | Violation::BadContinuation
            | Violation::BadClose => CloseCode::Protocol,
            Violation::InvalidUtf8 => CloseCode::Invalid,
            Violation::TooBig { .. } => CloseCode::Size,
        }
    }

    /// What a codec error that got past [`check`] means. `None` for an I/O error: the
    /// connection failed, the peer broke no rule we can answer.
    pub fn from_codec(e: &ProtocolError, cap: usize) -> Option<Violation> {
        Some(match e {
            ProtocolError::UnmaskedFrame | ProtocolError::MaskedFrame => Violation::Unmasked,
            ProtocolError::InvalidOpcode(op) => Violation::ReservedOpcode(*op),
            ProtocolError::InvalidLength(n) => Violation::ControlTooLong(*n as u64),
            // The codec reports a bad close code or reason as a bad opcode.
            ProtocolError::BadOpCode => Violation::BadClose,
            ProtocolError::Overflow => Violation::TooBig {
                declared: cap as u64 + 1,
                cap,
            },
            ProtocolError::ContinuationNotStarted
            | ProtocolError::ContinuationStarted
            | ProtocolError::ContinuationFragment(_) => Violation::BadContinuation,
            ProtocolError::Io(_) => return None,
        })
    }
}

/// Checks the header at the front of `buf` against the protocol and against `cap`. `Ok(false)`
/// while the header is not complete yet (it is at most 14 bytes, so waiting for it costs
/// nothing); `Ok(true)` once it is complete and fine.
pub fn check(buf: &[u8], cap: usize) -> Result<bool, Violation> {
    let (Some(&first), Some(&second)) = (buf.first(), buf.get(1)) else {
        return Ok(false);
    };
    if first & 0x70 != 0 {
        return Err(Violation::ReservedBits);
    }
    let opcode = first & 0x0f;
    let control = match opcode {
        0x0..=0x2 => false,
        0x8..=0xa => true,
        other => return Err(Violation::ReservedOpcode(other)),
    };
    if second & 0x80 == 0 {
        return Err(Violation::Unmasked);
    }
    let fin = first & 0x80 != 0;
    if control && !fin {
        return Err(Violation::FragmentedControl);
    }
    let declared = match second & 0x7f {
        126 => match buf.get(2..4) {
            Some(&[a, b]) => u64::from(u16::from_be_bytes([a, b])),
            _ => return Ok(false),
        },
        127 => match buf.get(2..10).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
            Some(len) => u64::from_be_bytes(len),
            None => return Ok(false),
        },
        short => u64::from(short),
    };
    if declared > i64::MAX as u64 {
        return Err(Violation::BadLength);
    }
    if control && declared > MAX_CONTROL_PAYLOAD {
        return Err(Violation::ControlTooLong(declared));
    }
    if declared > cap as u64 {
        return Err(Violation::TooBig { declared, cap });
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: usize = 1024 * 1024;

    /// A masked header with this first byte and length, without the mask key (`check` never
    /// needs it).
    fn header(first: u8, len: u64) -> Vec<u8> {
        let mut h = vec![first];
        match len {
            0..=125 => h.push(0x80 | len as u8),
            126..=0xffff => {
                h.push(0x80 | 126);
                h.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                h.push(0x80 | 127);
                h.extend_from_slice(&len.to_be_bytes());
            }
        }
        h
    }

    #[test]
    fn a_header_over_the_cap_is_refused_from_its_first_ten_bytes() {
        let h = header(0x82, 1 << 32);
        assert_eq!(h.len(), 10);
        assert_eq!(
            check(&h, CAP),
            Err(Violation::TooBig {
                declared: 1 << 32,
                cap: CAP
            })
        );
        assert_eq!(check(&h[..9], CAP), Ok(false), "length not complete yet");
        assert_eq!(check(&header(0x82, CAP as u64), CAP), Ok(true));
        assert_eq!(
            check(&header(0x02, CAP as u64 + 1), CAP).map_err(Violation::close_code),
            Err(CloseCode::Size),
            "a fragment over the cap too"
        );
        assert_eq!(check(&header(0x81, 70_000), CAP), Ok(true));
    }

    #[test]
    fn header_violations_are_protocol_errors() {
        let cases = [
            (header(0xc2, 1), Violation::ReservedBits),
            (header(0x92, 1), Violation::ReservedBits),
            (header(0x83, 1), Violation::ReservedOpcode(0x3)),
            (header(0x8b, 0), Violation::ReservedOpcode(0xb)),
            (vec![0x82, 0x01], Violation::Unmasked),
            (header(0x09, 1), Violation::FragmentedControl),
            (header(0x89, 126), Violation::ControlTooLong(126)),
            (header(0x88, 200), Violation::ControlTooLong(200)),
            (header(0x82, 1 << 63), Violation::BadLength),
        ];
        for (h, want) in cases {
            assert_eq!(check(&h, CAP), Err(want), "{h:02x?}");
            assert_eq!(want.close_code(), CloseCode::Protocol);
        }
        assert_eq!(check(&header(0x89, 125), CAP), Ok(true));
        assert_eq!(check(&header(0x00, 5), CAP), Ok(true), "a continuation");
        assert_eq!(check(&[], CAP), Ok(false));
        assert_eq!(check(&[0x82], CAP), Ok(false));
        assert_eq!(check(&[0x82, 0x80 | 126, 0x01], CAP), Ok(false));
    }

    #[test]
    fn payload_violations_have_their_own_codes() {
        assert_eq!(Violation::InvalidUtf8.close_code(), CloseCode::Invalid);
        assert_eq!(Violation::BadContinuation.close_code(), CloseCode::Protocol);
        assert_eq!(Violation::BadClose.close_code(), CloseCode::Protocol);
        assert_eq!(
            Violation::from_codec(&ProtocolError::ContinuationNotStarted, CAP),
            Some(Violation::BadContinuation)
        );
        assert_eq!(
            Violation::from_codec(&ProtocolError::Io(std::io::Error::other("gone")), CAP),
            None
        );
    }
}
