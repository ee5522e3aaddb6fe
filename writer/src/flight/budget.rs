//! The writer's one bound on the Arrow bytes its DoPuts hold at once
//! (MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES): each message takes its bytes as it
//! arrives and its DoPut gives them all back when it ends (written, refused,
//! cut or dropped). Nothing waits for room: a message that does not fit is
//! refused at once, so two half-received uploads can never wait on each
//! other.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus::IntGauge;

/// Bytes held across all DoPuts, against the bound.
pub struct Budget {
    limit: u64,
    used: AtomicU64,
    /// `millpond_writer_in_flight_bytes`.
    gauge: Option<IntGauge>,
}

/// Why a message did not fit.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// This upload alone would pass the bound: it never fits, whatever the
    /// others do (permanent).
    Alone,
    /// Other uploads hold the room; a resend may fit once they end.
    Busy,
}

/// What one DoPut holds; given back when dropped.
pub struct Held {
    budget: Arc<Budget>,
    bytes: u64,
}

impl Budget {
    pub fn new(limit: u64, gauge: Option<IntGauge>) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            used: AtomicU64::new(0),
            gauge,
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes held now, by every DoPut.
    #[cfg(test)]
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    /// An empty holding for one DoPut.
    pub fn hold(self: &Arc<Self>) -> Held {
        Held {
            budget: self.clone(),
            bytes: 0,
        }
    }

    fn show(&self, used: u64) {
        if let Some(g) = &self.gauge {
            g.set(used.min(i64::MAX as u64) as i64);
        }
    }
}

impl Held {
    /// Takes `n` more bytes for this DoPut, or says why not (taking none).
    pub fn take(&mut self, n: u64) -> Result<(), Refused> {
        if self.bytes.saturating_add(n) > self.budget.limit {
            return Err(Refused::Alone);
        }
        let used = &self.budget.used;
        let mut now = used.load(Ordering::SeqCst);
        loop {
            let next = now.saturating_add(n);
            if next > self.budget.limit {
                return Err(Refused::Busy);
            }
            match used.compare_exchange_weak(now, next, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => {
                    self.bytes += n;
                    self.budget.show(next);
                    return Ok(());
                }
                Err(seen) => now = seen,
            }
        }
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.bytes > 0 {
            let before = self.budget.used.fetch_sub(self.bytes, Ordering::SeqCst);
            self.budget.show(before - self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_share_the_bound_and_give_it_back_when_they_end() {
        let budget = Budget::new(100, None);
        let mut a = budget.hold();
        let mut b = budget.hold();
        a.take(60).unwrap();
        assert_eq!(b.take(50), Err(Refused::Busy), "a holds the room");
        assert_eq!(budget.used(), 60, "a refusal takes nothing");
        b.take(40).unwrap();
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 40);
        b.take(50).unwrap();
        drop(b);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn an_upload_larger_than_the_bound_is_refused_as_never_fitting() {
        let budget = Budget::new(100, None);
        let mut other = budget.hold();
        other.take(90).unwrap();
        let mut big = budget.hold();
        assert_eq!(big.take(11), Err(Refused::Busy));
        // Alone it would pass the bound: refused as such even while another
        // holds room (not Busy, which a resend would repeat forever).
        assert_eq!(big.take(101), Err(Refused::Alone));
        drop(other);
        big.take(60).unwrap();
        assert_eq!(big.take(41), Err(Refused::Alone));
        assert_eq!(big.bytes(), 60);
        big.take(40).unwrap();
        assert_eq!(budget.used(), 100);
    }

    #[test]
    fn the_gauge_follows_what_is_held() {
        let gauge = IntGauge::new("in_flight", "test").unwrap();
        let budget = Budget::new(1000, Some(gauge.clone()));
        let mut a = budget.hold();
        a.take(300).unwrap();
        assert_eq!(gauge.get(), 300);
        drop(a);
        assert_eq!(gauge.get(), 0);
    }
}
