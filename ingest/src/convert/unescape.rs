//! Unescaping a JSON string that has escapes, eight bytes at a time.
//!
//! The escaped JSON text of `properties`-like fields has an escape every few
//! bytes. Copying each run between escapes to the output was a `memcpy`
//! call per run; here every step copies a whole word to a scratch buffer and
//! moves the output position by the bytes that count, so a run costs a few
//! instructions whatever its length.

use super::strings::{escape_at, string_stops, Invalid};

/// Unescapes the body of the JSON string starting at `s[from]` (just past
/// its opening quote) up to its closing quote, appends the text to `out`
/// and returns the index just past that quote. `scratch` is reused between
/// calls. Refuses raw control characters, unknown escapes and lone
/// surrogates, as `escape_at` does.
pub(super) fn unescape_into(
    s: &str,
    from: usize,
    scratch: &mut Vec<u8>,
    out: &mut String,
) -> Result<usize, Invalid> {
    let b = s.as_bytes();
    // The text is never longer than its escaped form (an escape of n bytes
    // stands for at most n - 1 bytes of UTF-8), so with `o` the output
    // position, o <= i - from always holds, and a word written at `o` fits.
    let need = b.len().saturating_sub(from) + 8;
    if scratch.len() < need {
        scratch.resize(need, 0);
    }
    let (mut i, mut o) = (from, 0);
    loop {
        match b.get(i..i + 8) {
            Some(word) => {
                let word: [u8; 8] = word.try_into().map_err(|_| Invalid)?;
                scratch
                    .get_mut(o..o + 8)
                    .ok_or(Invalid)?
                    .copy_from_slice(&word);
                let hits = string_stops(u64::from_le_bytes(word));
                if hits == 0 {
                    i += 8;
                    o += 8;
                    continue;
                }
                let k = (hits.trailing_zeros() / 8) as usize;
                i += k;
                o += k;
            }
            // The last few bytes of the payload, one at a time.
            None => match b.get(i) {
                Some(&c) if c != b'"' && c != b'\\' && c >= 0x20 => {
                    *scratch.get_mut(o).ok_or(Invalid)? = c;
                    i += 1;
                    o += 1;
                    continue;
                }
                _ => {}
            },
        }
        match b.get(i) {
            Some(b'"') => {
                // Runs of the (valid) input cut at ASCII bytes, and whole
                // encoded chars: valid UTF-8, checked again rather than
                // assumed.
                let text = std::str::from_utf8(scratch.get(..o).ok_or(Invalid)?);
                out.push_str(text.map_err(|_| Invalid)?);
                return Ok(i + 1);
            }
            Some(b'\\') => {
                let (ch, next) = escape_at(b, i)?;
                let dst = scratch.get_mut(o..o + 4).ok_or(Invalid)?;
                o += ch.encode_utf8(dst).len();
                i = next;
            }
            // A raw control character, or the end of the payload.
            _ => return Err(Invalid),
        }
    }
}
