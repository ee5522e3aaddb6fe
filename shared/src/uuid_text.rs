//! The uuid wire forms MILLPOND_TYPED_COLUMNS accepts, and the one text a
//! uuid is written as. Accepted, as the original's grammar has them: the
//! canonical hyphenated form (8-4-4-4-12) or 32 hex digits, each either
//! bare, wrapped in `{...}`, or prefixed with a lowercase `urn:uuid:`
//! (one or the other, never both); hex digits in either case. Anything
//! else is refused, including what lenient parsers remap: `urn:uuid:{...}`,
//! hyphens elsewhere, `0x`, `_`, `URN:UUID:`, whitespace. Variant and
//! version bits are not checked: a uuid here is an opaque 128-bit value.

/// The 16 big-endian bytes of an accepted uuid text.
pub fn parse(s: &str) -> Option<[u8; 16]> {
    let s = match (s.strip_prefix("urn:uuid:"), s.strip_prefix('{')) {
        (Some(urn), _) => urn,
        (None, Some(braced)) => braced.strip_suffix('}')?,
        (None, None) => s,
    };
    let b = s.as_bytes();
    let hex: Vec<u8> = match b.len() {
        32 => b.to_vec(),
        36 => {
            if [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
                return None;
            }
            b.iter().copied().filter(|&c| c != b'-').collect()
        }
        _ => return None,
    };
    if hex.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Canonical lowercase hyphenated text.
pub fn format(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANON: &str = "f79c3e09-677c-4bbd-a479-3f349cb785e7";

    #[test]
    fn the_original_s_spellings_parse_to_the_same_bytes() {
        let want = parse(CANON).unwrap();
        for s in [
            CANON,
            "F79C3E09-677C-4BBD-A479-3F349CB785E7",
            "f79C3e09-677c-4BBD-a479-3f349cb785E7",
            "f79c3e09677c4bbda4793f349cb785e7",
            "F79C3E09677C4BBDA4793F349CB785E7",
            "{f79c3e09-677c-4bbd-a479-3f349cb785e7}",
            "{f79c3e09677c4bbda4793f349cb785e7}",
            "{F79C3E09-677C-4BBD-A479-3F349CB785E7}",
            "urn:uuid:f79c3e09-677c-4bbd-a479-3f349cb785e7",
            "urn:uuid:f79c3e09677c4bbda4793f349cb785e7",
            "urn:uuid:F79C3E09-677C-4BBD-A479-3F349CB785E7",
        ] {
            assert_eq!(parse(s), Some(want), "{s}");
        }
        assert_eq!(format(&want), CANON);
    }

    #[test]
    fn every_other_spelling_is_refused() {
        for s in [
            // Both a urn prefix and braces, in either order.
            "urn:uuid:{f79c3e09-677c-4bbd-a479-3f349cb785e7}",
            "urn:uuid:{f79c3e09677c4bbda4793f349cb785e7}",
            "{urn:uuid:f79c3e09-677c-4bbd-a479-3f349cb785e7}",
            // Prefixes other than a lowercase urn:uuid:, or repeated.
            "URN:UUID:f79c3e09-677c-4bbd-a479-3f349cb785e7",
            "urn:UUID:f79c3e09-677c-4bbd-a479-3f349cb785e7",
            "Urn:uuid:f79c3e09-677c-4bbd-a479-3f349cb785e7",
            "uuid:f79c3e09-677c-4bbd-a479-3f349cb785e7",
            "urn:f79c3e09-677c-4bbd-a479-3f349cb785e7",
            "urn:uuid:urn:uuid:f79c3e09-677c-4bbd-a479-3f349cb785e7",
            "urn:uuid:",
            // Braces unbalanced, doubled or reversed.
            "{f79c3e09-677c-4bbd-a479-3f349cb785e7",
            "f79c3e09-677c-4bbd-a479-3f349cb785e7}",
            "{{f79c3e09-677c-4bbd-a479-3f349cb785e7}}",
            "}f79c3e09-677c-4bbd-a479-3f349cb785e7{",
            "{}",
            // Hyphens elsewhere, missing or extra.
            "0123-4567-89ab-cdef-0123-4567-89ab-cdef",
            "f79c3e09-677c4bbd-a479-3f349cb785e7",
            "f79c3e09-677c-4bbd-a479-3f349cb785e7-",
            "f79c3e09677c-4bbd-a479-3f349cb785e7-",
            "f79c3e09-677c-4bbd-a4793f349cb785e7",
            // Radix prefixes, underscores, whitespace, signs.
            "0xf79c3e09677c4bbda4793f349cb785e7",
            "f79c3e09_677c_4bbd_a479_3f349cb785e7",
            " f79c3e09-677c-4bbd-a479-3f349cb785e7",
            "f79c3e09-677c-4bbd-a479-3f349cb785e7\n",
            "f79c3e09 677c 4bbd a479 3f349cb785e7",
            "+f79c3e09677c4bbda4793f349cb785e7",
            // Too few or too many digits, or not hex.
            "f79c3e09677c4bbda4793f349cb785e",
            "f79c3e09677c4bbda4793f349cb785e70",
            "f79c3e09-677c-4bbd-a479-3f349cb785eg",
            "f79c3e09-677c-4bbd-a479-3f349cb785\u{e9}",
            "",
        ] {
            assert_eq!(parse(s), None, "{s:?}");
        }
    }
}
