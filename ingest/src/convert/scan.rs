//! Pass 1: parse every payload into a flat, batch-wide tape.
//!
//! Each payload's top-level object is read by `object::read_object` in one
//! pass; keys are resolved to column indexes without allocating. Strings
//! without escapes and nested values that are already compact are borrowed
//! from the payload; unescaped strings and compacted nested values go into
//! one shared text arena.

use millpond_shared::metrics::dead_letter_reason;
use std::collections::HashMap;

use super::object::{read_object, Scratch};

/// One top-level value of one row, borrowing from the payload or the arena.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Val<'a> {
    Null,
    Bool(bool),
    /// An integer literal that fits in `i64`.
    Int(i64),
    /// An integer literal outside the `i64` range, exactly as written.
    BigInt(&'a str),
    /// A number literal with a fraction and/or exponent, as written.
    Float(&'a str),
    /// Final text borrowed from the payload: a string without escapes (the
    /// text between the quotes) or an already-compact nested value.
    Str(&'a str),
    /// Final text in [`Tape::text`] (`start..end`): an unescaped string or a
    /// compacted nested value.
    Text(usize, usize),
}

#[derive(Debug)]
pub(super) struct Entry<'a> {
    pub col: usize,
    pub val: Val<'a>,
}

/// A value of a key repeated in one object, followed by a later value of
/// the same key: the row holds the last one, this one is set aside.
#[derive(Debug)]
pub(super) struct Repeated<'a> {
    pub row: usize,
    pub col: usize,
    pub val: Val<'a>,
}

/// Everything pass 2 needs: the rows of the batch, flattened.
#[derive(Debug, Default)]
pub(super) struct Tape<'a> {
    /// Column names, first-seen order.
    pub names: Vec<Box<str>>,
    /// Row-major entries; at most one per (row, column).
    pub entries: Vec<Entry<'a>>,
    /// Earlier values of keys repeated in one object (not null), in row
    /// order then key order.
    pub repeated: Vec<Repeated<'a>>,
    /// `entries[row_ends[r - 1]..row_ends[r]]` are the entries of row `r`.
    pub row_ends: Vec<usize>,
    /// Arena for unescaped strings and compacted nested values.
    pub text: String,
    /// Payloads skipped as invalid / non-object JSON, in payload order.
    pub skipped: Vec<Skip>,
}

/// A payload that is not a row, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skip {
    /// Index in the payloads passed to `convert`.
    pub index: usize,
    pub reason: SkipReason,
}

/// Why a payload is not a row. `label()` is the dead-letter reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Not UTF-8.
    InvalidUtf8,
    /// Not JSON (syntax error, truncated, trailing data, lone surrogate).
    InvalidJson,
    /// Valid JSON, but an array, a scalar or `null` rather than an object.
    NotAnObject,
}

impl SkipReason {
    pub fn label(self) -> &'static str {
        match self {
            SkipReason::InvalidUtf8 => dead_letter_reason::INVALID_UTF8,
            SkipReason::InvalidJson => dead_letter_reason::INVALID_JSON,
            SkipReason::NotAnObject => dead_letter_reason::NOT_AN_OBJECT,
        }
    }
}

impl Tape<'_> {
    pub fn rows(&self) -> usize {
        self.row_ends.len()
    }
}

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
}

/// Parses all payloads. Never panics.
pub(super) fn scan<'a>(payloads: &[&'a [u8]]) -> Tape<'a> {
    let mut sc = Scanner::default();
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

/// Marker error: the payload is not a valid JSON object (or a broken
/// invariant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Invalid;

#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Compacts `raw` (a valid JSON object/array): removes insignificant
/// whitespace and rejects lone surrogate escapes. Iterative, so any nesting
/// depth is fine. Returns `Ok(false)` without touching `out` when `raw` is
/// already compact (the common case: no copy at all), else appends the
/// compacted text to `out` and returns `Ok(true)`.
pub(super) fn compact_into(raw: &str, out: &mut String) -> Result<bool, Invalid> {
    let b = raw.as_bytes();
    let n = b.len();
    let mut wrote = false;
    let mut seg = 0; // start of the pending run to copy
    let mut i = 0;
    while i < n {
        match b[i] {
            b'"' => {
                i += 1;
                loop {
                    i = find_quote_or_backslash(b, i);
                    match b.get(i) {
                        None => return Err(Invalid),
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        _ => {
                            // A backslash.
                            i = if b.get(i + 1) == Some(&b'u') {
                                skip_u_escape(b, i)?
                            } else {
                                i + 2
                            };
                        }
                    }
                }
            }
            c if is_ws(c) => {
                if !wrote {
                    out.reserve(n);
                    wrote = true;
                }
                // `seg` and `i` sit on ASCII bytes: valid char boundaries.
                out.push_str(raw.get(seg..i).ok_or(Invalid)?);
                i += 1;
                while i < n && is_ws(b[i]) {
                    i += 1;
                }
                seg = i;
            }
            _ => i += 1,
        }
    }
    if wrote {
        out.push_str(raw.get(seg..).ok_or(Invalid)?);
    }
    Ok(wrote)
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Flags the zero bytes of `x`; the lowest flag is always exact.
#[inline]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(LO) & !x & HI
}

/// Index of the first byte in `b[i..]` for which `stop` holds (or
/// `b.len()`), eight bytes at a time (SWAR): `flags` marks, in a word of
/// eight bytes, at least the lowest byte that stops and no byte below it.
#[inline]
fn find_stop(
    b: &[u8],
    mut i: usize,
    flags: impl Fn(u64) -> u64,
    stop: impl Fn(u8) -> bool,
) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        let Ok(chunk) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let hits = flags(u64::from_le_bytes(chunk));
        if hits != 0 {
            return i + (hits.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if stop(c) {
            break;
        }
        i += 1;
    }
    i
}

fn quote_or_backslash(x: u64) -> u64 {
    zero_bytes(x ^ (LO * u64::from(b'"'))) | zero_bytes(x ^ (LO * u64::from(b'\\')))
}

/// Index of the first `"` or `\\` in `b[i..]` (or `b.len()`).
#[inline]
fn find_quote_or_backslash(b: &[u8], i: usize) -> usize {
    find_stop(b, i, quote_or_backslash, |c| c == b'"' || c == b'\\')
}

/// Index of the first byte in `b[i..]` that ends a run of plain string
/// text: `"`, `\\` or a control character (below 0x20), or `b.len()`.
#[inline]
pub(super) fn find_string_stop(b: &[u8], i: usize) -> usize {
    find_stop(b, i, string_stops, |c| c == b'"' || c == b'\\' || c < 0x20)
}

/// Flags, in a word of eight bytes, at least the lowest byte that ends a
/// run of plain string text (`"`, `\\` or below 0x20) and none below it.
#[inline]
pub(super) fn string_stops(x: u64) -> u64 {
    // Bytes below 0x20 (exact for the lowest, as for zero bytes).
    let control = x.wrapping_sub(LO * 0x20) & !x & HI;
    quote_or_backslash(x) | control
}

/// Four hex digits at `b[at..at + 4]`.
fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let digits = b.get(at..at.checked_add(4)?)?;
    digits
        .iter()
        .try_fold(0u32, |acc, &d| Some(acc << 4 | char::from(d).to_digit(16)?))
}

/// Decodes the `\uXXXX` escape at `b[i]` (plus its low surrogate, if any).
/// Returns the code point and the index just past the escape(s).
fn u_escape(b: &[u8], i: usize) -> Result<(char, usize), Invalid> {
    let hi = hex4(b, i + 2).ok_or(Invalid)?;
    match hi {
        0xD800..=0xDBFF => {
            if b.get(i + 6..i + 8) != Some(b"\\u".as_slice()) {
                return Err(Invalid);
            }
            let lo = hex4(b, i + 8).ok_or(Invalid)?;
            if !(0xDC00..=0xDFFF).contains(&lo) {
                return Err(Invalid);
            }
            let cp = 0x1_0000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
            Ok((char::from_u32(cp).ok_or(Invalid)?, i + 12))
        }
        _ => Ok((char::from_u32(hi).ok_or(Invalid)?, i + 6)),
    }
}

fn skip_u_escape(b: &[u8], i: usize) -> Result<usize, Invalid> {
    u_escape(b, i).map(|(_, next)| next)
}

/// Decodes the escape whose backslash is at `b[j]`: the character and the
/// index just past the escape.
pub(super) fn escape_at(b: &[u8], j: usize) -> Result<(char, usize), Invalid> {
    Ok(match b.get(j + 1).copied().ok_or(Invalid)? {
        b'"' => ('"', j + 2),
        b'\\' => ('\\', j + 2),
        b'/' => ('/', j + 2),
        b'b' => ('\u{8}', j + 2),
        b'f' => ('\u{c}', j + 2),
        b'n' => ('\n', j + 2),
        b'r' => ('\r', j + 2),
        b't' => ('\t', j + 2),
        b'u' => u_escape(b, j)?,
        _ => return Err(Invalid),
    })
}
