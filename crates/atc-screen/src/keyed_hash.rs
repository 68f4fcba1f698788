//! [`KeyedHasher`]: the style table's hash. Styles come from a program's output, so the hash is
//! keyed (a random key per table, drawn from std's `RandomState`) to keep crafted collisions
//! from stalling the screen thread; it is a folded multiply per word rather than SipHash,
//! which was a fifth of the model's time on output that changes colour every few characters.
//! The same construction as foldhash's and aHash's fallback.

use std::hash::{BuildHasher, Hasher};

const MULTIPLIER: u64 = 0x5851_f42d_4c95_7f2d;

/// The product's two halves folded together: every input bit reaches many output bits.
fn fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// A table's key.
#[derive(Clone, Debug)]
pub struct KeyedState {
    keys: [u64; 2],
}

impl Default for KeyedState {
    fn default() -> KeyedState {
        let random = std::collections::hash_map::RandomState::new();
        KeyedState {
            keys: [random.hash_one(0u64), random.hash_one(1u64) | 1],
        }
    }
}

impl BuildHasher for KeyedState {
    type Hasher = KeyedHasher;

    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher {
            state: self.keys[0],
            key: self.keys[1],
        }
    }
}

/// One hashing.
#[derive(Debug)]
pub struct KeyedHasher {
    state: u64,
    key: u64,
}

impl Hasher for KeyedHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
        self.write_u64(bytes.len() as u64);
    }

    fn write_u64(&mut self, word: u64) {
        self.state = fold(self.state ^ word, MULTIPLIER ^ self.key);
    }

    fn write_u32(&mut self, word: u32) {
        self.write_u64(u64::from(word));
    }

    fn write_u16(&mut self, word: u16) {
        self.write_u64(u64::from(word));
    }

    fn write_u8(&mut self, word: u8) {
        self.write_u64(u64::from(word));
    }

    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }

    fn finish(&self) -> u64 {
        fold(self.state, self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_input_hashes_equal_and_keys_differ_between_tables() {
        let a = KeyedState::default();
        assert_eq!(a.hash_one(42u64), a.hash_one(42u64));
        assert_ne!(a.hash_one(42u64), a.hash_one(43u64));
        assert_ne!(a.hash_one("ab"), a.hash_one("ba"));
        let b = KeyedState::default();
        assert_ne!(a.hash_one(42u64), b.hash_one(42u64));
    }
}
