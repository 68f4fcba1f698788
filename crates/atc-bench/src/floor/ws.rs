//! WebSocket framing as the floor needs it (RFC 6455 §5): headers of the unmasked frames a
//! server sends, and parsing of the masked frames a client sends.
//!
//! Only whole frames are spoken, as atc's attach contract promises: a client frame with FIN
//! clear or a continuation opcode is refused rather than reassembled. Pure byte logic, no I/O;
//! the server in `mod.rs` writes a header and the payload it already holds in one vectored write,
//! so no output byte is copied to frame it.

use thiserror::Error;

/// The frame types the floor reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    /// A UTF-8 message: control frames (`attached`) out, ignored in.
    Text,
    /// Terminal bytes: output out, input in.
    Binary,
    /// The closing handshake.
    Close,
    /// Keep-alive request; the floor does not answer (no client of the bench sends one).
    Ping,
    /// Keep-alive answer.
    Pong,
}

impl Opcode {
    fn bits(self) -> u8 {
        match self {
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }

    fn from_bits(bits: u8) -> Result<Opcode, FrameError> {
        Ok(match bits {
            0x0 => return Err(FrameError::Fragmented),
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            other => return Err(FrameError::UnknownOpcode(other)),
        })
    }
}

/// A client frame the floor will not take.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    /// RFC 6455 §5.1: every client-to-server frame is masked.
    #[error("client frame without a mask")]
    Unmasked,
    /// Fragmented messages are outside the attach contract.
    #[error("fragmented message")]
    Fragmented,
    /// An opcode RFC 6455 reserves.
    #[error("unknown opcode {0:#x}")]
    UnknownOpcode(u8),
    /// RSV bits set with no extension negotiated.
    #[error("reserved bits set")]
    Reserved,
    /// A payload larger than the floor buffers.
    #[error("frame of {0} bytes is over the limit")]
    TooLarge(u64),
}

/// The longest server frame header: 2 bytes plus a 64-bit length.
pub const MAX_HEADER: usize = 10;

/// The header of an unmasked, final server frame carrying `len` payload bytes; the header is
/// `buf[..n]` for the returned `n`.
pub fn server_header(opcode: Opcode, len: usize, buf: &mut [u8; MAX_HEADER]) -> usize {
    buf[0] = 0x80 | opcode.bits();
    if len < 126 {
        buf[1] = len as u8;
        2
    } else if let Ok(short) = u16::try_from(len) {
        buf[1] = 126;
        buf[2..4].copy_from_slice(&short.to_be_bytes());
        4
    } else {
        buf[1] = 127;
        buf[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    }
}

/// One whole client frame, unmasked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFrame {
    /// What it is.
    pub opcode: Opcode,
    /// Its payload, unmasked.
    pub payload: Vec<u8>,
}

/// Parses the first frame in `buf`: `Ok(None)` until the whole frame is there, else the frame
/// and how many bytes of `buf` it took. Payloads over `max` are refused before they are buffered.
pub fn parse_client_frame(
    buf: &[u8],
    max: usize,
) -> Result<Option<(ClientFrame, usize)>, FrameError> {
    let [b0, b1, ..] = *buf else {
        return Ok(None);
    };
    if b0 & 0x70 != 0 {
        return Err(FrameError::Reserved);
    }
    let opcode = Opcode::from_bits(b0 & 0x0F)?;
    if b0 & 0x80 == 0 {
        return Err(FrameError::Fragmented);
    }
    if b1 & 0x80 == 0 {
        return Err(FrameError::Unmasked);
    }
    let (len, mut at) = match b1 & 0x7F {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(None),
        },
        127 => match buf.get(2..10).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
            Some(b) => (u64::from_be_bytes(b), 10),
            None => return Ok(None),
        },
        short => (u64::from(short), 2),
    };
    let len = usize::try_from(len)
        .ok()
        .filter(|l| *l <= max)
        .ok_or(FrameError::TooLarge(len))?;
    let Some(mask) = buf.get(at..at + 4) else {
        return Ok(None);
    };
    let mask = [mask[0], mask[1], mask[2], mask[3]];
    at += 4;
    let Some(masked) = buf.get(at..at + len) else {
        return Ok(None);
    };
    let payload = masked
        .iter()
        .zip(mask.iter().cycle())
        .map(|(b, m)| b ^ m)
        .collect();
    Ok(Some((ClientFrame { opcode, payload }, at + len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A masked client frame as a browser or awc would send it.
    fn client_frame(first: u8, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
        let mut v = vec![first];
        match payload.len() {
            n if n < 126 => v.push(0x80 | n as u8),
            n if n <= 0xFFFF => {
                v.push(0x80 | 126);
                v.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                v.push(0x80 | 127);
                v.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        v.extend_from_slice(&mask);
        v.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, m)| b ^ m));
        v
    }

    #[test]
    fn server_headers_use_the_shortest_length_form() {
        let mut buf = [0u8; MAX_HEADER];
        assert_eq!(server_header(Opcode::Binary, 5, &mut buf), 2);
        assert_eq!(&buf[..2], &[0x82, 5]);
        assert_eq!(server_header(Opcode::Text, 126, &mut buf), 4);
        assert_eq!(&buf[..4], &[0x81, 126, 0, 126]);
        assert_eq!(server_header(Opcode::Binary, 65_535, &mut buf), 4);
        assert_eq!(&buf[..4], &[0x82, 126, 0xFF, 0xFF]);
        assert_eq!(server_header(Opcode::Binary, 65_536, &mut buf), 10);
        assert_eq!(&buf[..10], &[0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(server_header(Opcode::Close, 2, &mut buf), 2);
        assert_eq!(&buf[..2], &[0x88, 2]);
    }

    #[test]
    fn client_frames_are_unmasked_at_every_length_form() {
        let mask = [0x37, 0xFA, 0x21, 0x3D];
        for len in [0, 1, 125, 126, 65_535, 65_536] {
            let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let wire = client_frame(0x82, &payload, mask);
            let (frame, used) = parse_client_frame(&wire, 1 << 20)
                .expect("valid")
                .expect("whole");
            assert_eq!(used, wire.len(), "len {len}");
            assert_eq!(frame.opcode, Opcode::Binary);
            assert_eq!(frame.payload, payload, "len {len}");
        }
    }

    #[test]
    fn a_partial_frame_waits_and_a_second_frame_is_left_in_the_buffer() {
        let mut wire = client_frame(0x82, b"hello", [1, 2, 3, 4]);
        let first_len = wire.len();
        wire.extend(client_frame(0x88, &[0x03, 0xE8], [9, 9, 9, 9]));
        for cut in 0..first_len {
            assert_eq!(parse_client_frame(&wire[..cut], 64), Ok(None), "cut {cut}");
        }
        let (frame, used) = parse_client_frame(&wire, 64)
            .expect("valid")
            .expect("whole");
        assert_eq!((frame.payload.as_slice(), used), (&b"hello"[..], first_len));
        let (close, _) = parse_client_frame(&wire[used..], 64)
            .expect("valid")
            .expect("whole");
        assert_eq!(close.opcode, Opcode::Close);
        assert_eq!(close.payload, vec![0x03, 0xE8]);
    }

    #[test]
    fn frames_outside_the_contract_are_refused() {
        let mask = [0; 4];
        let unmasked = [0x82, 0x01, b'x'];
        assert_eq!(parse_client_frame(&unmasked, 64), Err(FrameError::Unmasked));
        let not_final = client_frame(0x02, b"x", mask);
        assert_eq!(
            parse_client_frame(&not_final, 64),
            Err(FrameError::Fragmented)
        );
        let continuation = client_frame(0x80, b"x", mask);
        assert_eq!(
            parse_client_frame(&continuation, 64),
            Err(FrameError::Fragmented)
        );
        let reserved = client_frame(0xC2, b"x", mask);
        assert_eq!(parse_client_frame(&reserved, 64), Err(FrameError::Reserved));
        let unknown = client_frame(0x83, b"x", mask);
        assert_eq!(
            parse_client_frame(&unknown, 64),
            Err(FrameError::UnknownOpcode(3))
        );
        let big = client_frame(0x82, &[0; 65], mask);
        assert_eq!(parse_client_frame(&big, 64), Err(FrameError::TooLarge(65)));
    }
}
