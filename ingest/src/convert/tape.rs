//! The tape: what pass 1 (`scan`) reads out of a batch of payloads and
//! pass 2 (`build`) turns into Arrow columns.

use millpond_shared::metrics::dead_letter_reason;

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

impl Tape<'_> {
    pub fn rows(&self) -> usize {
        self.row_ends.len()
    }
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
    /// More keys than the column limit, whose values as dead letters would
    /// cost more than the letter limit ([`super::Limits`]).
    TooManyKeys,
}

impl SkipReason {
    pub fn label(self) -> &'static str {
        match self {
            SkipReason::InvalidUtf8 => dead_letter_reason::INVALID_UTF8,
            SkipReason::InvalidJson => dead_letter_reason::INVALID_JSON,
            SkipReason::NotAnObject => dead_letter_reason::NOT_AN_OBJECT,
            SkipReason::TooManyKeys => dead_letter_reason::TOO_MANY_KEYS,
        }
    }
}
