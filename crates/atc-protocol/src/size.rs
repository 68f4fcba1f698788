//! Terminal sizes in character cells.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Smallest and largest terminal dimension a client may ask for.
pub const DIM_RANGE: std::ops::RangeInclusive<u64> = 1..=4096;

/// A terminal size, both dimensions within [`DIM_RANGE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TermSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

impl TermSize {
    /// The size used when a client gives none.
    pub const DEFAULT: TermSize = TermSize { cols: 80, rows: 24 };

    /// The cell-wise minimum of two sizes (the rule for several attached clients).
    pub fn min(self, other: TermSize) -> TermSize {
        TermSize {
            cols: self.cols.min(other.cols),
            rows: self.rows.min(other.rows),
        }
    }
}
