//! [`Cell`]: one character cell of the grid, eight bytes.
//!
//! What is printed is a `char`, or for a character with combining marks an index into the
//! screen's [`StyleTable`](crate::table::StyleTable) of clusters; the style is an index into
//! the same table. A wide character takes two cells: the first holds it (width 2), the second
//! is a spacer (width 0) that holds nothing.

/// A character cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    /// A `char`, [`EMPTY`] for a cell nothing was printed in, or a cluster index with
    /// [`CLUSTER`] set.
    pub(crate) content: u32,
    /// Index of the cell's style in the table.
    pub(crate) style: u16,
    /// Columns the content takes: 1, 2 for a wide character, 0 for the spacer after it.
    pub(crate) width: u8,
}

/// Content of a cell nothing was printed in (erased, or never written).
pub const EMPTY: u32 = 0;
/// Set in [`Cell::content`] when the rest is a cluster index.
pub const CLUSTER: u32 = 1 << 31;

impl Cell {
    /// A cell with nothing printed, in `style`.
    pub const fn blank(style: u16) -> Cell {
        Cell {
            content: EMPTY,
            style,
            width: 1,
        }
    }

    /// A one- or two-column character in `style`.
    pub fn char(c: char, width: u8, style: u16) -> Cell {
        Cell {
            content: c as u32,
            style,
            width,
        }
    }

    /// The second column of a wide character.
    pub const fn spacer(style: u16) -> Cell {
        Cell {
            content: EMPTY,
            style,
            width: 0,
        }
    }

    /// Whether this is the second column of a wide character.
    pub fn is_spacer(&self) -> bool {
        self.width == 0
    }

    /// Whether this is the first column of a wide character.
    pub fn is_wide(&self) -> bool {
        self.width == 2
    }

    /// Whether anything was printed here.
    pub fn has_content(&self) -> bool {
        self.content != EMPTY
    }

    /// The style's index.
    pub fn style(&self) -> u16 {
        self.style
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_is_eight_bytes() {
        assert_eq!(std::mem::size_of::<Cell>(), 8);
    }
}
