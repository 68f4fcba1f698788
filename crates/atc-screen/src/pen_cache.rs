//! [`PenCache`]: the pens a screen set lately, with their indexes in its style table.
//!
//! Agents' TUIs change the pen every few characters but among a handful of styles. Without
//! the cache each change hashed two styles into the table (SipHash, which stays: styles come
//! from the program's output, and a keyed hash keeps crafted collisions from stalling the
//! screen thread); a profile of dense SGR output had that at half the model's time. A hit
//! here costs a compare. The slot is picked by a cheap unkeyed mix: a collision only misses.

use crate::style::Style;

/// Slots; a power of two.
const SLOTS: usize = 16;

/// An index found, or not yet.
type Id = Option<u16>;

/// Recently set pens: the pen, the index of what it prints, the index of what it erases
/// (each once it has been needed).
#[derive(Debug, Default)]
pub struct PenCache {
    slots: [Option<(Style, Id, Id)>; SLOTS],
}

impl PenCache {
    fn slot(pen: &Style) -> usize {
        let mixed = pen.mix().wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (mixed >> 60) as usize % SLOTS
    }

    /// The indexes of `pen` found while it was set lately.
    pub fn get(&self, pen: &Style) -> Option<(Id, Id)> {
        match &self.slots[PenCache::slot(pen)] {
            Some((cached, printed, erased)) if cached == pen => Some((*printed, *erased)),
            _ => None,
        }
    }

    /// Remembers `pen`'s indexes.
    pub fn put(&mut self, pen: Style, printed: Id, erased: Id) {
        self.slots[PenCache::slot(&pen)] = Some((pen, printed, erased));
    }

    /// Forgets everything: the table was renumbered.
    pub fn clear(&mut self) {
        self.slots = Default::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::style::Color;

    #[test]
    fn a_pen_put_is_found_until_cleared_and_others_are_not() {
        let mut cache = PenCache::default();
        let red = Style {
            fg: Color::ansi(1),
            ..Style::default()
        };
        assert_eq!(cache.get(&red), None);
        cache.put(red, Some(3), None);
        assert_eq!(cache.get(&red), Some((Some(3), None)));
        assert_eq!(cache.get(&Style::default()), None);
        cache.clear();
        assert_eq!(cache.get(&red), None);
    }
}
