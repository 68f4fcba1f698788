//! [`StyleTable`]: the styles and character clusters a screen's cells point at.
//!
//! Cells hold 16-bit indexes instead of 16-byte styles and strings, which keeps a cell at
//! eight bytes (a 120×40 grid in 38 KiB). Entries are added as output uses them; when the
//! table is full (a program printing thousands of distinct true colours), the screen asks
//! for the live ones and [`StyleTable::compact`] renumbers them.

use std::collections::HashMap;

use crate::style::Style;

/// Most entries of each kind; the index must fit a cell's 16 bits (clusters' in 31).
const MAX_ENTRIES: usize = 1 << 15;

/// A screen's styles and clusters.
#[derive(Debug)]
pub struct StyleTable {
    styles: Vec<Style>,
    style_ids: HashMap<Style, u16>,
    clusters: Vec<Box<str>>,
    cluster_ids: HashMap<Box<str>, u32>,
    max: usize,
}

/// Index 0 is always the default style: what a fresh screen is filled with.
pub const DEFAULT_STYLE: u16 = 0;

impl Default for StyleTable {
    fn default() -> StyleTable {
        StyleTable::with_max(MAX_ENTRIES)
    }
}

impl StyleTable {
    /// A table that holds at most `max` entries of each kind (tests use a small one).
    pub fn with_max(max: usize) -> StyleTable {
        let mut table = StyleTable {
            styles: Vec::new(),
            style_ids: HashMap::new(),
            clusters: Vec::new(),
            cluster_ids: HashMap::new(),
            max: max.clamp(2, MAX_ENTRIES),
        };
        table.styles.push(Style::default());
        table.style_ids.insert(Style::default(), DEFAULT_STYLE);
        table
    }

    /// The index of `style`, added if new; `None` when the table is full.
    pub fn style_id(&mut self, style: Style) -> Option<u16> {
        if let Some(&id) = self.style_ids.get(&style) {
            return Some(id);
        }
        if self.styles.len() >= self.max {
            return None;
        }
        let id = self.styles.len() as u16;
        self.styles.push(style);
        self.style_ids.insert(style, id);
        Some(id)
    }

    /// The style at `id`.
    pub fn style(&self, id: u16) -> &Style {
        &self.styles[usize::from(id)]
    }

    /// The index of `cluster`, added if new; `None` when the table is full.
    pub fn cluster_id(&mut self, cluster: &str) -> Option<u32> {
        if let Some(&id) = self.cluster_ids.get(cluster) {
            return Some(id);
        }
        if self.clusters.len() >= self.max {
            return None;
        }
        let id = self.clusters.len() as u32;
        self.clusters.push(cluster.into());
        self.cluster_ids.insert(cluster.into(), id);
        Some(id)
    }

    /// The cluster at `id`.
    pub fn cluster(&self, id: u32) -> &str {
        &self.clusters[id as usize]
    }

    /// Keeps only the styles and clusters marked live, renumbered from 0 in their old order.
    /// Returns the maps from old index to new (entries not live map to the default style and
    /// to cluster 0, never read).
    pub fn compact(
        &mut self,
        live_styles: &[bool],
        live_clusters: &[bool],
    ) -> (Vec<u16>, Vec<u32>) {
        let mut style_map = vec![DEFAULT_STYLE; self.styles.len()];
        let old = std::mem::take(&mut self.styles);
        self.style_ids.clear();
        for (id, style) in old.into_iter().enumerate() {
            if id == usize::from(DEFAULT_STYLE) || live_styles.get(id).copied().unwrap_or(false) {
                let new = self.styles.len() as u16;
                self.style_ids.insert(style, new);
                self.styles.push(style);
                style_map[id] = new;
            }
        }
        let mut cluster_map = vec![0; self.clusters.len()];
        let old = std::mem::take(&mut self.clusters);
        self.cluster_ids.clear();
        for (id, cluster) in old.into_iter().enumerate() {
            if live_clusters.get(id).copied().unwrap_or(false) {
                let new = self.clusters.len() as u32;
                self.cluster_ids.insert(cluster.clone(), new);
                self.clusters.push(cluster);
                cluster_map[id] = new;
            }
        }
        (style_map, cluster_map)
    }

    /// Entries of each kind, for the screen's compaction and tests.
    pub fn len(&self) -> (usize, usize) {
        (self.styles.len(), self.clusters.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::style::Color;

    fn red(n: u8) -> Style {
        let mut style = Style::default();
        style.fg = Color::rgb(n, 0, 0);
        style
    }

    #[test]
    fn styles_are_interned_and_a_full_table_says_so() {
        let mut table = StyleTable::with_max(3);
        assert_eq!(table.style_id(Style::default()), Some(DEFAULT_STYLE));
        assert_eq!(table.style_id(red(1)), Some(1));
        assert_eq!(table.style_id(red(2)), Some(2));
        assert_eq!(table.style_id(red(1)), Some(1));
        assert_eq!(table.style_id(red(3)), None);
    }

    #[test]
    fn compaction_keeps_the_live_entries_in_order() {
        let mut table = StyleTable::with_max(8);
        for n in 1..=4 {
            table.style_id(red(n));
        }
        table.cluster_id("e\u{301}");
        table.cluster_id("a\u{300}");
        let (styles, clusters) = table.compact(&[true, false, true, false, true], &[false, true]);
        assert_eq!(styles, vec![0, 0, 1, 0, 2]);
        assert_eq!(clusters, vec![0, 0]);
        assert_eq!(table.style(1), &red(2));
        assert_eq!(table.style(2), &red(4));
        assert_eq!(table.cluster(0), "a\u{300}");
        assert_eq!(table.style_id(red(4)), Some(2));
        assert_eq!(table.style_id(red(1)), Some(3));
        assert_eq!(table.len(), (4, 1));
    }
}
