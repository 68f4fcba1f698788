//! [`StyleTable`]: the styles, character clusters and OSC 8 links a screen's cells point at.
//!
//! Cells hold 16-bit indexes instead of 16-byte styles and strings, which keeps a cell at
//! eight bytes (a 120×40 grid in 38 KiB). Entries are added as output uses them; when the
//! table is full (a program printing thousands of distinct true colours), the screen asks
//! for the live ones and [`StyleTable::compact`] renumbers them.

use std::collections::HashMap;

use crate::keyed_hash::KeyedState;

use crate::style::Style;

/// Most entries of each kind; the index must fit a cell's 16 bits (clusters' in 31).
const MAX_ENTRIES: usize = 1 << 15;

/// Most links, and the longest URI kept (a longer one is not linked): links are rare and
/// their URIs can be long, so they get a budget of their own (4 MiB at most).
const MAX_LINKS: usize = 1024;
pub const MAX_URI: usize = 4096;

/// An OSC 8 link: its `id=` parameter (empty for none) and URI.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Link {
    /// The `id=` parameter, which makes xterm.js treat two links as one.
    pub id: Box<str>,
    /// Where it points.
    pub uri: Box<str>,
}

/// A screen's styles and clusters.
#[derive(Debug)]
pub struct StyleTable {
    styles: Vec<Style>,
    style_ids: HashMap<Style, u16, KeyedState>,
    clusters: Vec<Box<str>>,
    cluster_ids: HashMap<Box<str>, u32, KeyedState>,
    links: Vec<Link>,
    link_ids: HashMap<Link, u16, KeyedState>,
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
            style_ids: HashMap::default(),
            clusters: Vec::new(),
            cluster_ids: HashMap::default(),
            links: Vec::new(),
            link_ids: HashMap::default(),
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

    /// The number a style's `link` holds for `link` (its index plus one), added if new;
    /// `None` when the table is full.
    pub fn link_id(&mut self, link: &Link) -> Option<u16> {
        if let Some(&id) = self.link_ids.get(link) {
            return Some(id + 1);
        }
        if self.links.len() >= self.max.min(MAX_LINKS) {
            return None;
        }
        let id = self.links.len() as u16;
        self.links.push(link.clone());
        self.link_ids.insert(link.clone(), id);
        Some(id + 1)
    }

    /// The link a style's `link` names (not 0).
    pub fn link(&self, id: u16) -> Option<&Link> {
        self.links.get(usize::from(id).wrapping_sub(1))
    }

    /// Keeps only the styles and clusters marked live, renumbered from 0 in their old order.
    /// Returns the maps from old index to new (entries not live map to the default style and
    /// to cluster 0, never read).
    ///
    /// Links are kept when a live style or `keep_link` (the pen's) names one; the return's
    /// last map takes an old link number to the new one.
    pub fn compact(
        &mut self,
        live_styles: &[bool],
        live_clusters: &[bool],
        keep_link: u16,
    ) -> (Vec<u16>, Vec<u32>, Vec<u16>) {
        let is_live = |id: usize| {
            id == usize::from(DEFAULT_STYLE) || live_styles.get(id).copied().unwrap_or(false)
        };
        let mut live_links = vec![false; self.links.len() + 1];
        for (id, style) in self.styles.iter().enumerate() {
            if is_live(id) {
                live_links[usize::from(style.link).min(self.links.len())] = true;
            }
        }
        live_links[usize::from(keep_link).min(self.links.len())] = true;
        let mut link_map = vec![0u16; self.links.len() + 1];
        let old = std::mem::take(&mut self.links);
        self.link_ids.clear();
        for (id, link) in old.into_iter().enumerate() {
            if live_links[id + 1] {
                let new = self.links.len() as u16;
                self.link_ids.insert(link.clone(), new);
                self.links.push(link);
                link_map[id + 1] = new + 1;
            }
        }
        let mut style_map = vec![DEFAULT_STYLE; self.styles.len()];
        let old = std::mem::take(&mut self.styles);
        self.style_ids.clear();
        for (id, mut style) in old.into_iter().enumerate() {
            if is_live(id) {
                style.link = link_map.get(usize::from(style.link)).copied().unwrap_or(0);
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
        (style_map, cluster_map, link_map)
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
        Style {
            fg: Color::rgb(n, 0, 0),
            ..Style::default()
        }
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
        let (styles, clusters, _) =
            table.compact(&[true, false, true, false, true], &[false, true], 0);
        assert_eq!(styles, vec![0, 0, 1, 0, 2]);
        assert_eq!(clusters, vec![0, 0]);
        assert_eq!(table.style(1), &red(2));
        assert_eq!(table.style(2), &red(4));
        assert_eq!(table.cluster(0), "a\u{300}");
        assert_eq!(table.style_id(red(4)), Some(2));
        assert_eq!(table.style_id(red(1)), Some(3));
        assert_eq!(table.len(), (4, 1));
    }

    #[test]
    fn compaction_keeps_the_links_live_styles_and_the_pen_name() {
        let mut table = StyleTable::with_max(8);
        let link = |uri: &str| Link {
            id: "".into(),
            uri: uri.into(),
        };
        let (a, b, c) = (link("a"), link("b"), link("c"));
        assert_eq!(table.link_id(&a), Some(1));
        assert_eq!(table.link_id(&b), Some(2));
        assert_eq!(table.link_id(&c), Some(3));
        let mut linked = red(1);
        linked.link = 3;
        table.style_id(linked);
        let (styles, _, links) = table.compact(&[true, true], &[], 2);
        assert_eq!(links, vec![0, 0, 1, 2]);
        assert_eq!(table.style(styles[1]).link, 2);
        assert_eq!(table.link(2), Some(&c));
        assert_eq!(table.link(1), Some(&b));
        assert_eq!(table.link_id(&a), Some(3));
    }
}
