//! `filter_matched_total{value}`: one series per allowlist value, up to a
//! cap (MILLPOND_FILTER_MATCHED_MAX_VALUES). A dynamic allowlist can grow
//! without bound and each value would be a series of its own, so values
//! seen after the first `cap` count under `value="_other"`. Nothing is lost:
//! the sum over the labels is the number of records kept.
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use prometheus::IntCounterVec;

/// The label of the values past the cap.
pub const OTHER: &str = "_other";

/// Default of MILLPOND_FILTER_MATCHED_MAX_VALUES.
pub const DEFAULT_MAX_VALUES: usize = 1000;

#[derive(Clone)]
pub struct MatchedValues {
    counter: IntCounterVec,
    labels: Arc<Mutex<Labels>>,
}

struct Labels {
    cap: usize,
    /// Values with a series of their own: the first `cap` seen.
    given: HashSet<String>,
    full: bool,
}

impl MatchedValues {
    pub fn new(counter: IntCounterVec, cap: usize) -> Self {
        MatchedValues {
            counter,
            labels: Arc::new(Mutex::new(Labels {
                cap,
                given: HashSet::new(),
                full: false,
            })),
        }
    }

    /// The same series with another cap (before any count).
    pub fn with_cap(&self, cap: usize) -> Self {
        MatchedValues::new(self.counter.clone(), cap)
    }

    /// Counts `n` records the allowlist kept for `value`.
    pub fn inc_by(&self, value: &str, n: u64) {
        let own = {
            let mut l = self.labels.lock().unwrap_or_else(|p| p.into_inner());
            if l.given.contains(value) {
                true
            } else if l.given.len() < l.cap {
                l.given.insert(value.to_owned());
                true
            } else {
                if !l.full {
                    l.full = true;
                    tracing::warn!(
                        cap = l.cap,
                        "millpond_filter_matched_total has a series for {} values; values past them count under value=\"{OTHER}\" (MILLPOND_FILTER_MATCHED_MAX_VALUES)",
                        l.cap
                    );
                }
                false
            }
        };
        let label = if own { value } else { OTHER };
        self.counter.with_label_values(&[label]).inc_by(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Opts;
    use proptest::prelude::*;

    fn counts(c: &IntCounterVec) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = prometheus::core::Collector::collect(c)[0]
            .get_metric()
            .iter()
            .map(|m| {
                (
                    m.get_label()[0].value().to_owned(),
                    m.get_counter().get_value() as u64,
                )
            })
            .collect();
        out.sort();
        out
    }

    fn vec() -> IntCounterVec {
        IntCounterVec::new(Opts::new("filter_matched_total", "h"), &["value"]).unwrap()
    }

    #[test]
    fn values_past_the_cap_count_under_other() {
        let c = vec();
        let m = MatchedValues::new(c.clone(), 2);
        for (v, n) in [
            ("7", 1),
            ("3", 2),
            ("9", 4),
            ("7", 8),
            ("11", 16),
            ("3", 32),
        ] {
            m.inc_by(v, n);
        }
        assert_eq!(
            counts(&c),
            [("3".into(), 34), ("7".into(), 9), (OTHER.into(), 20)]
        );
    }

    proptest! {
        /// At most `cap` values plus `_other` have a series, the first
        /// `cap` distinct values keep their own, and the counts add up.
        #[test]
        fn bounded_and_conserved(
            adds in proptest::collection::vec((0..40u32, 1..100u64), 0..200),
            cap in 0..10usize,
        ) {
            let c = vec();
            let m = MatchedValues::new(c.clone(), cap);
            let mut first: Vec<String> = Vec::new();
            for (v, n) in &adds {
                m.inc_by(&v.to_string(), *n);
                if !first.contains(&v.to_string()) && first.len() < cap {
                    first.push(v.to_string());
                }
            }
            let got = counts(&c);
            prop_assert!(got.len() <= cap + 1);
            let total: u64 = got.iter().map(|(_, n)| n).sum();
            prop_assert_eq!(total, adds.iter().map(|(_, n)| n).sum::<u64>());
            for (label, _) in &got {
                prop_assert!(label == OTHER || first.contains(label), "{}", label);
            }
            for v in &first {
                let want: u64 = adds.iter().filter(|(a, _)| a.to_string() == *v).map(|(_, n)| n).sum();
                prop_assert!(got.contains(&(v.clone(), want)));
            }
        }
    }
}
