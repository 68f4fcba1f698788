//! Holding one RPC call mid-way: the test asks for the next call of a procedure (`imps.create`,
//! `grants.add`, ...) to stop before or after its effect, waits until one is stopped there, and
//! then does what it came for (kill the client, typically) before it lets the call go on. The
//! queue of asked-for holds lives in the shared state; each held call waits on its own pair of
//! watch channels, never under the state's lock.

use std::time::Duration;

use tokio::sync::watch;

/// Where in a call it is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HoldPoint {
    /// Before it does anything: the call has arrived, its effect has not happened.
    BeforeEffect,
    /// After its effect, before its answer is sent.
    AfterEffect,
}

/// One hold a test asked for and no call has taken yet.
#[derive(Debug)]
struct Asked {
    procedure: String,
    /// Calls of the procedure still to let through before the one held.
    skip: usize,
    gate: Gate,
}

/// The simulator's side of one hold: what a call taking it waits on.
#[derive(Debug)]
pub struct Gate {
    point: HoldPoint,
    held: watch::Sender<bool>,
    released: watch::Receiver<bool>,
}

impl Gate {
    /// Whether the call stops at `point`.
    pub fn at(&self, point: HoldPoint) -> bool {
        self.point == point
    }

    /// Says the call is held, then waits until the test releases it (or drops its handle).
    pub async fn wait(mut self) {
        self.held.send_replace(true);
        // Err: the test's handle is gone, which releases the call as well.
        let _ = self.released.wait_for(|r| *r).await;
    }
}

/// The test's handle on one hold. Dropping it releases the call.
#[derive(Debug)]
pub struct HeldCall {
    procedure: String,
    held: watch::Receiver<bool>,
    release: watch::Sender<bool>,
}

impl HeldCall {
    /// Waits up to `within` until a call is held; panics naming the procedure otherwise.
    pub async fn wait_held(&self, within: Duration) {
        let mut held = self.held.clone();
        let seen = tokio::time::timeout(within, held.wait_for(|h| *h))
            .await
            // Err inside: the call's gate was dropped before it held (the simulator stopped).
            .is_ok_and(|r| r.is_ok());
        if !seen {
            panic!(
                "impd sim: no {} call was held within {within:?}",
                self.procedure
            );
        }
    }

    /// Whether a call is held now (or was, and has been released).
    pub fn is_held(&self) -> bool {
        *self.held.borrow()
    }

    /// Lets the held call go on (a call not held yet goes straight through when it comes).
    pub fn release(self) {
        self.release.send_replace(true);
    }
}

/// The holds asked for, in the order asked.
#[derive(Debug, Default)]
pub struct Holds {
    asked: Vec<Asked>,
}

impl Holds {
    /// Holds the call of `procedure` that comes after `skip` more of them, at `point`.
    pub fn ask(&mut self, procedure: &str, skip: usize, point: HoldPoint) -> HeldCall {
        let (held_tx, held_rx) = watch::channel(false);
        let (release_tx, release_rx) = watch::channel(false);
        self.asked.push(Asked {
            procedure: procedure.to_string(),
            skip,
            gate: Gate {
                point,
                held: held_tx,
                released: release_rx,
            },
        });
        HeldCall {
            procedure: procedure.to_string(),
            held: held_rx,
            release: release_tx,
        }
    }

    /// A call of `procedure` arrived: the gate it must wait at, if a hold takes it. Every other
    /// hold on the procedure counts the call as one let through.
    pub fn take(&mut self, procedure: &str) -> Option<Gate> {
        let mut taken = None;
        let mut i = 0;
        while i < self.asked.len() {
            let a = &mut self.asked[i];
            if a.procedure != procedure {
                i += 1;
                continue;
            }
            if a.skip == 0 && taken.is_none() {
                taken = Some(self.asked.remove(i).gate);
                continue;
            }
            a.skip = a.skip.saturating_sub(1);
            i += 1;
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_takes_the_call_after_its_skips_and_only_its_procedure() {
        let mut h = Holds::default();
        let _second = h.ask("grants.add", 1, HoldPoint::AfterEffect);
        let _create = h.ask("imps.create", 0, HoldPoint::BeforeEffect);
        assert!(h.take("grants.delete").is_none());
        assert!(h.take("grants.add").is_none(), "the first add goes through");
        let g = h.take("grants.add").expect("the second add is held");
        assert!(g.at(HoldPoint::AfterEffect));
        assert!(h.take("grants.add").is_none(), "a hold is taken once");
        let g = h.take("imps.create").expect("the create is held");
        assert!(g.at(HoldPoint::BeforeEffect));
        assert!(h.take("imps.create").is_none());
    }

    #[test]
    fn two_holds_on_one_procedure_take_one_call_each() {
        let mut h = Holds::default();
        let _a = h.ask("grants.add", 0, HoldPoint::AfterEffect);
        let _b = h.ask("grants.add", 0, HoldPoint::BeforeEffect);
        assert!(h.take("grants.add").unwrap().at(HoldPoint::AfterEffect));
        // The second hold, asked for the next call too, takes the one after.
        assert!(h.take("grants.add").unwrap().at(HoldPoint::BeforeEffect));
        assert!(h.take("grants.add").is_none());
    }

    #[tokio::test]
    async fn a_held_call_waits_until_released_and_the_test_sees_it_held() {
        let mut h = Holds::default();
        let handle = h.ask("imps.create", 0, HoldPoint::AfterEffect);
        assert!(!handle.is_held());
        let gate = h.take("imps.create").unwrap();
        let call = tokio::spawn(gate.wait());
        handle.wait_held(Duration::from_secs(5)).await;
        assert!(handle.is_held());
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!call.is_finished(), "the call went on before its release");
        handle.release();
        tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .expect("released")
            .unwrap();
    }

    #[tokio::test]
    async fn dropping_the_handle_releases_the_call() {
        let mut h = Holds::default();
        let handle = h.ask("grants.add", 0, HoldPoint::BeforeEffect);
        let gate = h.take("grants.add").unwrap();
        drop(handle);
        tokio::time::timeout(Duration::from_secs(5), gate.wait())
            .await
            .expect("a dropped handle releases");
    }

    #[tokio::test]
    #[should_panic(expected = "no imps.create call was held")]
    async fn waiting_for_a_call_that_never_comes_fails_with_its_name() {
        let mut h = Holds::default();
        let handle = h.ask("imps.create", 0, HoldPoint::AfterEffect);
        handle.wait_held(Duration::from_millis(20)).await;
    }
}
