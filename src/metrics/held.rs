//! Gauge units held by what they count. A gauge moved by hand at each place a thing comes
//! and goes drifts the first time one of those places is missed (an actor stopped, a slot
//! dropped with its map); a unit that gives itself back on drop cannot.

use prometheus_client::metrics::gauge::Gauge;

/// One unit of a gauge, given back when dropped.
#[derive(Debug)]
pub struct Held {
    gauge: Gauge,
}

impl Held {
    /// Takes a unit of `gauge`.
    pub fn new(gauge: &Gauge) -> Held {
        gauge.inc();
        Held {
            gauge: gauge.clone(),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// A flag that holds one unit of a gauge while it is set (a lease this daemon holds).
#[derive(Debug)]
pub struct HeldFlag {
    gauge: Gauge,
    held: Option<Held>,
}

impl HeldFlag {
    /// An unset flag counting into `gauge`.
    pub fn new(gauge: &Gauge) -> HeldFlag {
        HeldFlag {
            gauge: gauge.clone(),
            held: None,
        }
    }

    /// Whether it is set.
    pub fn get(&self) -> bool {
        self.held.is_some()
    }

    /// Sets or clears it; setting a set flag (or clearing a clear one) changes nothing.
    pub fn set(&mut self, on: bool) {
        match (on, self.held.is_some()) {
            (true, false) => self.held = Some(Held::new(&self.gauge)),
            (false, true) => self.held = None,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_counts_once_however_often_it_is_set_and_gives_back_on_drop() {
        let g = Gauge::default();
        let mut f = HeldFlag::new(&g);
        f.set(true);
        f.set(true);
        assert_eq!(g.get(), 1);
        f.set(false);
        f.set(false);
        assert_eq!(g.get(), 0);
        f.set(true);
        drop(f);
        assert_eq!(g.get(), 0);
    }
}
