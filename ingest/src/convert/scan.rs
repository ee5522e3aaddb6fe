//! Pass 1: parse every payload into a flat, batch-wide tape.
//!
//! Each payload's top-level object is read by `object::read_object` in one
//! pass; keys are resolved to column indexes without allocating. Strings
//! without escapes and nested values that are already compact are borrowed
//! from the payload; unescaped strings and compacted nested values go into
//! one shared text arena.

use std::collections::HashMap;

use super::object::{read_object, Scratch};
use super::strings::Invalid;
use super::tape::{Entry, Repeated, Skip, SkipReason, Tape, Val};
use super::Limits;

/// Per-column duplicate-key tracking.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// `payload index + 1` of the last row that wrote this column (0: none).
    stamp: usize,
    /// Index in `entries` of that write.
    pos: usize,
}

#[derive(Default)]
struct Scanner<'a> {
    tape: Tape<'a>,
    slots: Vec<Slot>,
    index: HashMap<Box<str>, usize>,
    /// `hints[i]`: column of the i-th key of the previous row. Events of one
    /// topic almost always share their key order, so this usually avoids
    /// hashing the key at all.
    hints: Vec<usize>,
    scratch: Scratch,
    limits: Limits,
}

/// Parses all payloads. Never panics.
pub(super) fn scan<'a>(payloads: &[&'a [u8]], limits: Limits) -> Tape<'a> {
    let mut sc = Scanner {
        limits,
        ..Scanner::default()
    };
    // Unescaped and compacted text is never longer than the payloads it
    // comes from: reserving that once spares the arena's copies as it
    // grows (pages never written are never touched).
    sc.tape
        .text
        .reserve(payloads.iter().map(|p| p.len()).sum::<usize>());
    for (index, payload) in payloads.iter().enumerate() {
        let outcome = match std::str::from_utf8(payload) {
            Ok(s) => sc.row(s, index + 1),
            Err(_) => Err(SkipReason::InvalidUtf8),
        };
        if let Err(reason) = outcome {
            sc.tape.skipped.push(Skip { index, reason });
        }
    }
    sc.tape
}

impl<'a> Scanner<'a> {
    /// Parses one payload as a row; on failure rolls back every trace of it.
    fn row(&mut self, s: &'a str, stamp: usize) -> Result<(), SkipReason> {
        let entries = self.tape.entries.len();
        let repeated = self.tape.repeated.len();
        let text = self.tape.text.len();
        let cols = self.tape.names.len();
        let mut arena = std::mem::take(&mut self.tape.text);
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut pos = 0;
        let res = read_object(s, &mut arena, &mut scratch, |k, val| {
            let col = self.column(k, pos);
            self.put(col, stamp, val);
            pos += 1;
        });
        self.tape.text = arena;
        self.scratch = scratch;
        let reason = match res {
            Ok(()) if self.limits.too_many_keys(s.len(), pos) => SkipReason::TooManyKeys,
            Ok(()) => {
                self.tape.row_ends.push(self.tape.entries.len());
                return Ok(());
            }
            // Cold path: is it valid JSON of another kind?
            Err(Invalid)
                if !s.trim_start().starts_with('{')
                    && serde_json::from_str::<serde::de::IgnoredAny>(s).is_ok() =>
            {
                SkipReason::NotAnObject
            }
            Err(Invalid) => SkipReason::InvalidJson,
        };
        self.tape.entries.truncate(entries);
        self.tape.repeated.truncate(repeated);
        // `text` was a length of this String, hence a char boundary.
        self.tape.text.truncate(text);
        for name in self.tape.names.drain(cols..) {
            self.index.remove(&name);
        }
        self.slots.truncate(cols);
        // Stale stamps/hints are harmless: stamps are unique per payload and
        // hints are verified before use.
        Err(reason)
    }

    /// Column index for the `pos`-th key of the current row.
    fn column(&mut self, key: &str, pos: usize) -> usize {
        if let Some(&c) = self.hints.get(pos) {
            if self.tape.names.get(c).is_some_and(|n| **n == *key) {
                return c;
            }
        }
        let c = match self.index.get(key) {
            Some(&c) => c,
            None => {
                let c = self.tape.names.len();
                self.tape.names.push(key.into());
                self.slots.push(Slot { stamp: 0, pos: 0 });
                self.index.insert(key.into(), c);
                c
            }
        };
        if let Some(h) = self.hints.get_mut(pos) {
            *h = c;
        } else {
            self.hints.push(c);
        }
        c
    }

    /// Records `val` for `col` in the current row. A key seen before in
    /// the row: the last value wins, and the earlier one is set aside in
    /// [`Tape::repeated`] (unless null: no value).
    fn put(&mut self, col: usize, stamp: usize, val: Val<'a>) {
        let Some(slot) = self.slots.get_mut(col) else {
            return; // unreachable: `col` comes from `column`
        };
        if slot.stamp == stamp {
            if let Some(e) = self.tape.entries.get_mut(slot.pos) {
                let earlier = std::mem::replace(&mut e.val, val);
                if earlier != Val::Null {
                    self.tape.repeated.push(Repeated {
                        row: self.tape.row_ends.len(),
                        col,
                        val: earlier,
                    });
                }
            }
        } else {
            slot.stamp = stamp;
            slot.pos = self.tape.entries.len();
            self.tape.entries.push(Entry { col, val });
        }
    }
}
