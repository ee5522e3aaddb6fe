//! The dynamic allowlist's state: static pins plus the values an endpoint
//! manages, changed only under the safety rules, which follow from an
//! asymmetry: a wrong addition writes surplus rows, a wrong removal drops
//! records for good.
//!
//! * Additions apply on the first successful poll that shows them.
//! * A managed value is removed only after `removal_polls` consecutive
//!   successful polls without it; a poll that shows it again resets its
//!   countdown; failed polls change nothing (the countdown freezes).
//! * Pins (the static list) are never removed.
//! * Refused polls change nothing, except that a `bulk_removal` poll's
//!   additions still apply: `empty` (an empty array while managed values
//!   are held; a pins-only set takes an empty endpoint as its steady
//!   state), `bulk_removal` (more than half of the endpoint-managed slice
//!   absent at once), `type_flip` (integers where the static list holds
//!   text, or the reverse).
use std::collections::{BTreeMap, BTreeSet};

use crate::stages::filter::Values;

/// One allowlist value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    Int(i64),
    Text(String),
}

impl Value {
    pub fn label(&self) -> String {
        match self {
            Value::Int(i) => i.to_string(),
            Value::Text(s) => s.clone(),
        }
    }
}

/// Why a poll was refused (`include_values_refused_total{reason}`).
pub const EMPTY: &str = "empty";
pub const BULK_REMOVAL: &str = "bulk_removal";
pub const TYPE_FLIP: &str = "type_flip";

/// What one successful poll did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    pub added: Vec<Value>,
    pub removed: Vec<Value>,
    pub refused: Option<&'static str>,
}

impl Applied {
    /// Whether the poll counts as a success: `empty` and `type_flip`
    /// polls change nothing; a `bulk_removal` poll still applies its
    /// additions.
    pub fn accepted(&self) -> bool {
        !matches!(self.refused, Some(EMPTY | TYPE_FLIP))
    }
}

#[derive(Debug, Clone)]
pub struct IncludeSet {
    ints: bool,
    pins: BTreeSet<Value>,
    managed: BTreeSet<Value>,
    /// Managed values absent from recent polls: consecutive polls absent.
    pending: BTreeMap<Value, u32>,
    /// Pins the endpoint has served at least once (the others are
    /// invisible to it: only a config deploy removes them).
    served_pins: BTreeSet<Value>,
    /// The last successful poll, as sent.
    remote: BTreeSet<Value>,
    removal_polls: u32,
}

impl IncludeSet {
    pub fn new(pins: &Values, removal_polls: u32) -> IncludeSet {
        let (ints, pins) = match pins {
            Values::Int(l) => (true, l.iter().map(|v| Value::Int(*v)).collect()),
            Values::Text(l) => (false, l.iter().map(|v| Value::Text(v.clone())).collect()),
        };
        IncludeSet {
            ints,
            pins,
            managed: BTreeSet::new(),
            pending: BTreeMap::new(),
            served_pins: BTreeSet::new(),
            remote: BTreeSet::new(),
            removal_polls: removal_polls.max(1),
        }
    }

    /// Pins plus managed values: what an authoritative filter admits.
    pub fn effective(&self) -> BTreeSet<Value> {
        self.pins.union(&self.managed).cloned().collect()
    }

    pub fn pins(&self) -> &BTreeSet<Value> {
        &self.pins
    }

    pub fn pending_removals(&self) -> usize {
        self.pending.len()
    }

    /// Pins the endpoint has never served.
    pub fn pinned_only(&self) -> usize {
        self.pins.difference(&self.served_pins).count()
    }

    /// The last successful poll.
    pub fn remote(&self) -> &BTreeSet<Value> {
        &self.remote
    }

    /// Applies one successfully fetched array.
    pub fn apply(&mut self, polled: Vec<Value>) -> Applied {
        let mut out = Applied::default();
        if polled
            .iter()
            .any(|v| matches!(v, Value::Int(_)) != self.ints)
        {
            out.refused = Some(TYPE_FLIP);
            return out;
        }
        let polled: BTreeSet<Value> = polled.into_iter().collect();
        if polled.is_empty() && !self.managed.is_empty() {
            out.refused = Some(EMPTY);
            return out;
        }
        self.remote = polled.clone();
        self.served_pins
            .extend(self.pins.intersection(&polled).cloned());
        // Additions first: always safe.
        for v in &polled {
            self.pending.remove(v);
            if !self.pins.contains(v) && self.managed.insert(v.clone()) {
                out.added.push(v.clone());
            }
        }
        // The endpoint-managed slice: managed values and the pins it serves.
        let slice: BTreeSet<&Value> = self.managed.iter().chain(&self.served_pins).collect();
        let absent = slice.iter().filter(|v| !polled.contains(**v)).count();
        if absent * 2 > slice.len() {
            out.refused = Some(BULK_REMOVAL);
            return out;
        }
        let gone: Vec<Value> = self
            .managed
            .iter()
            .filter(|v| !polled.contains(*v))
            .cloned()
            .collect();
        for v in gone {
            let n = self.pending.entry(v.clone()).or_insert(0);
            *n += 1;
            if *n >= self.removal_polls {
                self.pending.remove(&v);
                self.managed.remove(&v);
                out.removed.push(v);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ints(v: &[i64]) -> Vec<Value> {
        v.iter().map(|i| Value::Int(*i)).collect()
    }

    fn set(s: &IncludeSet) -> Vec<i64> {
        s.effective()
            .into_iter()
            .map(|v| match v {
                Value::Int(i) => i,
                Value::Text(_) => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn additions_at_once_removals_after_the_countdown() {
        let mut s = IncludeSet::new(&Values::Int(vec![1]), 3);
        assert_eq!(s.apply(ints(&[2, 3, 4, 5])).added, ints(&[2, 3, 4, 5]));
        assert_eq!(set(&s), [1, 2, 3, 4, 5]);
        for _ in 0..2 {
            assert!(s.apply(ints(&[2, 3, 4])).removed.is_empty());
        }
        assert_eq!(s.pending_removals(), 1);
        assert_eq!(s.apply(ints(&[2, 3, 4])).removed, ints(&[5]));
        // A reappearing value resets its countdown.
        s.apply(ints(&[2, 3]));
        s.apply(ints(&[2, 3, 4]));
        s.apply(ints(&[2, 3]));
        s.apply(ints(&[2, 3]));
        assert_eq!(set(&s), [1, 2, 3, 4]);
    }

    #[test]
    fn refusals_change_nothing_but_bulk_removal_keeps_its_additions() {
        let mut s = IncludeSet::new(&Values::Int(vec![1]), 1);
        assert!(s.apply(ints(&[2, 3, 4, 5])).accepted());
        let empty = s.apply(vec![]);
        assert_eq!((empty.refused, empty.accepted()), (Some(EMPTY), false));
        let flip = s.apply(vec![Value::Text("2".into())]);
        assert_eq!((flip.refused, flip.accepted()), (Some(TYPE_FLIP), false));
        let a = s.apply(ints(&[2, 9]));
        assert_eq!(
            (a.refused, a.added.clone(), a.removed.clone(), a.accepted()),
            (Some(BULK_REMOVAL), ints(&[9]), vec![], true)
        );
        assert_eq!(set(&s), [1, 2, 3, 4, 5, 9]);
        // A pins-only set accepts an empty endpoint; a first poll of the
        // wrong type is refused.
        let mut p = IncludeSet::new(&Values::Int(vec![1]), 1);
        assert!(!p.apply(vec![Value::Text("1".into())]).accepted());
        assert_eq!(p.apply(vec![]).refused, None);
        assert_eq!(p.pinned_only(), 1);
    }

    proptest! {
        /// Whatever the endpoint serves, a pin is never removed, and a
        /// refused poll never removes anything.
        #[test]
        fn pins_survive_and_refusals_never_remove(
            polls in proptest::collection::vec(proptest::collection::vec(0..8i64, 0..6), 1..30),
            removal_polls in 1..4u32,
        ) {
            let mut s = IncludeSet::new(&Values::Int(vec![0, 1]), removal_polls);
            for p in polls {
                let before = s.effective();
                let a = s.apply(ints(&p));
                let after = s.effective();
                prop_assert!(after.contains(&Value::Int(0)) && after.contains(&Value::Int(1)));
                if a.refused.is_some() {
                    prop_assert!(before.is_subset(&after), "a refused poll removed something");
                }
                for v in &a.removed {
                    let served = matches!(v, Value::Int(i) if p.contains(i));
                    prop_assert!(!served, "removed a value the poll served");
                }
            }
        }
    }
}
