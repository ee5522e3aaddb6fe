//! Batch conversion of Kafka JSON payloads into one Arrow [`RecordBatch`].
//!
//! This is the Rust replacement for the original Python path
//! (`orjson.loads` per message, then `pyarrow.Table.from_pylist`). It never
//! builds a per-record dynamic value tree: each payload is parsed with
//! `serde_json` directly into a flat, batch-wide *tape* of borrowed slices,
//! and the typed Arrow columns are built from that tape at the end.
//!
//! # Semantics
//!
//! * **Rows.** Every payload must be a single JSON object (surrounding
//!   whitespace allowed). Invalid UTF-8, invalid JSON, trailing data, or valid
//!   JSON that is not an object (array, string, number, bool, `null`) is
//!   skipped and listed in [`Converted::skipped`] with its reason. A skipped
//!   payload leaves no trace: keys it contained before the error do not become
//!   columns. `convert` never panics, whatever the input bytes.
//! * **Columns** are the union of the top-level keys of the converted rows, in
//!   first-seen order. Keys are used as-is, after JSON string unescaping
//!   (`"k\u00e9y"` and `"kéy"` are the same column); the empty key `""` is a
//!   valid column name. A row without a key gets null in that column.
//! * **Duplicate keys** within one object (after unescaping: `"a"` and
//!   `"\u0061"` are one key): the last occurrence is the cell's value; each
//!   earlier non-null one is returned in [`Converted::repeated`] (for a
//!   `duplicate_field_name` dead letter) and influences neither the value
//!   nor the inferred column type. The record is still a row.
//! * **Types** are inferred per column from its non-null values:
//!   - only integers that fit in `i64` → `Int64`;
//!   - only numbers, at least one with a fraction or exponent (`1.5`, `1e3`,
//!     `2E-7`) → `Float64`, provided `f64` holds every one of them exactly
//!     (`shared::decimal`: the shortest decimal that reads back as the
//!     `f64` denotes the same number). One literal that `f64` would change
//!     (`9007199254740993` next to `1.5`, `1e400`, 20 significant digits)
//!     makes the column `Utf8` holding each number as written, like any
//!     other mix;
//!   - only booleans → `Boolean`; only strings → `Utf8` (unescaped text);
//!   - any nested object or array → `Utf8` holding the value as JSON text;
//!   - any other mix (string + number, bool + int, …) → `Utf8`, where each
//!     non-string value is rendered as text: `42` → `"42"`, `true` →
//!     `"true"`, a number f64 holds as its shortest decimal without exponent
//!     (`1.50` → `"1.5"`, `1E3` → `"1000"`: `shared::decimal::number_text`,
//!     the rule unify uses across batches too), a number f64 cannot hold
//!     exactly as written;
//!   - JSON `null` is a null cell. A column whose cells are **all** null in the
//!     batch is dropped, like the original implementation did.
//! * **Integers outside the `i64` range** (e.g. `18446744073709551615`, or a
//!   25-digit literal such as `1234567890123456789012345`) never overflow and
//!   never lose digits: their presence makes the whole column `Utf8`, and the
//!   cell holds the exact decimal digits as written. This is our chosen
//!   representation (the original Python either failed or silently lost
//!   precision). Integers that fit (`i64::MIN..=i64::MAX`) stay `Int64`.
//! * **Nested values** (objects and arrays) are stored as *whitespace-compact*
//!   JSON text: insignificant whitespace outside strings is removed, and
//!   everything else is byte-for-byte what the producer wrote (key order,
//!   duplicate keys, number spelling and string escapes such as `\u00e9` are
//!   preserved, not normalised). `{"a": [1, 2], "b": "x y"}` becomes
//!   `{"a":[1,2],"b":"x y"}`. The text is always valid JSON.
//! * **Strings** are fully unescaped (`"a\"b\u00e9"` → `a"bé`, surrogate pairs
//!   → one code point). A lone UTF-16 surrogate escape (e.g. `"\ud800"`), in a
//!   top-level string, a key, or anywhere inside a nested value, makes the
//!   payload invalid (skipped), as `serde_json` and `orjson` do.
//! * **Deep nesting** cannot overflow the stack: the top-level object is
//!   read by a loop, and nested values are skipped (by `serde_json`) and
//!   compacted by iterative loops with no recursion at all. A
//!   non-object top-level value such as 10,000 levels of `[[[…]]]` is
//!   rejected at its first byte; a deeply nested value *inside* an object is
//!   valid JSON and is kept as text (no depth limit applies to it).
//! * **Too many keys.** With [`Limits`], an object with more keys (repeats
//!   counted) than `max_columns` whose values as dead letters could cost
//!   more than `max_letter_bytes` is skipped whole
//!   ([`SkipReason::TooManyKeys`]): one message cannot hold more memory
//!   as dead letters than the record limit allows.
//! * **Batch.** [`Converted::rows`] is the number of converted payloads and
//!   `rows + skipped.len() == payloads.len()`. If every payload is
//!   skipped (or there are none) `batch` is `None`. If rows were converted but
//!   no column survived (e.g. only `{}` objects) the batch has zero columns and
//!   `rows` rows. All fields are nullable. A text column whose total size
//!   would overflow 32-bit offsets (> 2 GiB in one batch) is emitted as
//!   `LargeUtf8` instead of `Utf8`.
//! * [`Converted::arrow_bytes`] is `batch.get_array_memory_size()` (0 without
//!   a batch).
//!
//! # Design
//!
//! Pass 1 (`scan.rs`, `object.rs`) reads each payload's top-level object in
//! one pass (strict RFC 8259, UTF-8 checked once per payload): each key is
//! resolved to a column index (hash lookup, short-circuited by the key order
//! of the previous row), each string is checked in the walk that finds its
//! end (one with escapes is unescaped a word at a time, `unescape.rs`),
//! numbers are checked and kept as written, and
//! nested values are checked and delimited by `serde_json`. Values go onto a
//! flat tape of `(column, value)` entries that borrow from the payloads; only
//! unescaped strings and nested values that contain whitespace are copied,
//! into one batch-wide arena. A failing payload is rolled back (tape, arena,
//! new columns). A duplicate key overwrites its earlier tape entry, whose
//! value is set aside (found by the per-column stamp of the last row that
//! wrote it, so an object without duplicates pays nothing more). Pass 2
//! (`build.rs`) infers each column's type from the
//! final tape, then appends into pre-sized Arrow builders row by row, filling
//! absent cells with nulls lazily.

mod build;
mod object;
mod scan;
mod strings;
mod tape;

pub use build::Withheld;
pub use tape::{Skip, SkipReason};
#[cfg(test)]
mod tests;
mod unescape;

use arrow::record_batch::RecordBatch;

/// Result of converting one batch of payloads.
#[derive(Debug, Clone)]
pub struct Converted {
    /// The converted rows; `None` when no payload could be converted.
    pub batch: Option<RecordBatch>,
    /// Number of payloads converted into rows.
    pub rows: usize,
    /// Payloads that are not a valid JSON object, in order, with the reason.
    pub skipped: Vec<Skip>,
    /// `batch.get_array_memory_size()`, or 0 without a batch.
    pub arrow_bytes: usize,
    /// Values of columns beyond [`convert_limited`]'s column limit, in row
    /// order: their rows are in the batch without them.
    pub overflow: Vec<Withheld>,
    /// Earlier values of keys repeated in one object, in row order: their
    /// rows hold the key's last value.
    pub repeated: Vec<Withheld>,
}

/// What one batch's conversion refuses to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most columns built: values of later keys go to
    /// [`Converted::overflow`].
    pub max_columns: usize,
    /// Most bytes one record's values may cost as dead letters: a record
    /// with more keys than `max_columns` whose keys, each costed at
    /// [`LETTER_FLOOR`], with its bytes, come to more is skipped whole
    /// ([`SkipReason::TooManyKeys`]). Decided from the record alone, so
    /// the same record meets the same fate in any batch.
    pub max_letter_bytes: usize,
}

impl Default for Limits {
    /// No limits.
    fn default() -> Self {
        Limits {
            max_columns: usize::MAX,
            max_letter_bytes: usize::MAX,
        }
    }
}

/// The least a value-level dead letter costs ingest, whatever its value:
/// the struct and the four allocations (topic, reason, column, value) it
/// always makes (`buffer::cost`).
pub const LETTER_FLOOR: usize = std::mem::size_of::<millpond_proto::DeadLetter>() + 4 * 32;

impl Limits {
    /// The record of `bytes` with `keys` keys (repeats counted) is to be
    /// skipped whole.
    pub fn too_many_keys(&self, bytes: usize, keys: usize) -> bool {
        keys > self.max_columns
            && keys.saturating_mul(LETTER_FLOOR).saturating_add(bytes) > self.max_letter_bytes
    }
}

/// Converts a batch of JSON object payloads (tombstones already removed) into
/// a single [`RecordBatch`]. See the [module documentation](self) for the
/// exact semantics.
pub fn convert(payloads: &[&[u8]]) -> Converted {
    convert_limited(payloads, Limits::default())
}

/// [`convert`], building at most `max_columns` columns: the first non-null
/// ones in first-seen order. Values of later keys are returned in
/// [`Converted::overflow`] instead, so one message with 80,000 distinct keys
/// costs `max_columns` columns, not 80,000.
pub fn convert_limited(payloads: &[&[u8]], limits: Limits) -> Converted {
    let tape = scan::scan(payloads, limits);
    let rows = tape.rows();
    let (batch, overflow) = build::build(&tape, limits.max_columns);
    let repeated = tape
        .repeated
        .iter()
        .map(|r| Withheld::new(&tape, r.row, r.col, &r.val))
        .collect();
    let skipped = tape.skipped;
    let arrow_bytes = batch.as_ref().map_or(0, |b| b.get_array_memory_size());
    Converted {
        batch,
        rows,
        skipped,
        arrow_bytes,
        overflow,
        repeated,
    }
}
