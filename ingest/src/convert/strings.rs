//! Byte-level JSON helpers of pass 1: where a string stops, what its
//! escapes mean, and compacting a nested value.

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
