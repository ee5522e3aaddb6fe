//! The top-level object of one payload, read in one pass.
//!
//! Strings (keys and values) are checked in the walk that finds their end;
//! one with escapes is unescaped by a second walk (`unescape`). Numbers and
//! literals are checked against the RFC 8259 grammar and kept as written.
//! Only nested values (objects and arrays) go through `serde_json`, whose
//! skipping of them is iterative, so no depth of nesting inside the object
//! can exhaust the stack.

use serde::Deserialize as _;
use serde_json::value::RawValue;

use super::strings::{compact_into, find_string_stop, Invalid};
use super::tape::Val;
use super::unescape::unescape_into;

/// Reads `s` as one JSON object surrounded by optional whitespace, calling
/// `pair(key, value)` for each member in order (duplicates included).
/// Unescaped strings and compacted nested values are appended to `text`
/// (`Val::Text` offsets point there); `scratch` is reused between calls.
/// On `Err` the payload is not a valid JSON object, and `text` may hold
/// part of it: the caller rolls back.
pub(super) fn read_object<'a>(
    s: &'a str,
    text: &mut String,
    scratch: &mut Scratch,
    mut pair: impl FnMut(&str, Val<'a>),
) -> Result<(), Invalid> {
    let Scratch { key, bytes } = scratch;
    let mut c = Cursor { s, i: 0 };
    c.ws();
    c.eat(b'{')?;
    c.ws();
    if c.peek() == Some(b'}') {
        c.i += 1;
    } else {
        loop {
            c.eat(b'"')?;
            key.clear();
            let borrowed = c.string(key, bytes)?;
            c.ws();
            c.eat(b':')?;
            c.ws();
            let val = c.value(text, bytes)?;
            pair(borrowed.unwrap_or(key.as_str()), val);
            c.ws();
            match c.peek() {
                Some(b',') => {
                    c.i += 1;
                    c.ws();
                }
                Some(b'}') => {
                    c.i += 1;
                    break;
                }
                _ => return Err(Invalid),
            }
        }
    }
    c.ws();
    if c.i == s.len() {
        Ok(())
    } else {
        Err(Invalid)
    }
}

/// Buffers `read_object` reuses from one payload to the next.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// A key with escapes, unescaped.
    key: String,
    /// Where a string with escapes is unescaped before it is appended.
    bytes: Vec<u8>,
}

struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.s.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, want: u8) -> Result<(), Invalid> {
        if self.peek() == Some(want) {
            self.i += 1;
            Ok(())
        } else {
            Err(Invalid)
        }
    }

    /// `s[from..to]`, both on ASCII bytes the caller found.
    fn slice(&self, from: usize, to: usize) -> Result<&'a str, Invalid> {
        self.s.get(from..to).ok_or(Invalid)
    }

    /// The string whose opening quote was just eaten, up to and past its
    /// closing quote: `Some(text)` borrowed from the payload when it has no
    /// escape, else `None` with its unescaped text appended to `out`.
    /// Refuses raw control characters, unknown escapes and lone surrogates.
    fn string(
        &mut self,
        out: &mut String,
        scratch: &mut Vec<u8>,
    ) -> Result<Option<&'a str>, Invalid> {
        let b = self.bytes();
        let start = self.i;
        let j = find_string_stop(b, start);
        match b.get(j) {
            Some(b'"') => {
                self.i = j + 1;
                self.slice(start, j).map(Some)
            }
            Some(b'\\') => {
                self.i = unescape_into(self.s, start, scratch, out)?;
                Ok(None)
            }
            // A raw control character, or the end of the payload.
            _ => Err(Invalid),
        }
    }

    /// One member value starting at the cursor.
    fn value(&mut self, text: &mut String, scratch: &mut Vec<u8>) -> Result<Val<'a>, Invalid> {
        match self.peek() {
            Some(b'"') => {
                self.i += 1;
                let start = text.len();
                Ok(match self.string(text, scratch)? {
                    Some(s) => Val::Str(s),
                    None => Val::Text(start, text.len()),
                })
            }
            Some(b'{' | b'[') => self.nested(text),
            Some(b't') => self.literal("true", Val::Bool(true)),
            Some(b'f') => self.literal("false", Val::Bool(false)),
            Some(b'n') => self.literal("null", Val::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(Invalid),
        }
    }

    fn literal(&mut self, word: &str, val: Val<'a>) -> Result<Val<'a>, Invalid> {
        if self
            .bytes()
            .get(self.i..)
            .is_some_and(|rest| rest.starts_with(word.as_bytes()))
        {
            self.i += word.len();
            Ok(val)
        } else {
            Err(Invalid)
        }
    }

    fn digits(&mut self) -> usize {
        let from = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        self.i - from
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, kept as
    /// written: an integer that fits `i64` is parsed, any other is text.
    fn number(&mut self) -> Result<Val<'a>, Invalid> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(Invalid),
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(Invalid);
            }
            float = true;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(Invalid);
            }
            float = true;
        }
        let raw = self.slice(start, self.i)?;
        Ok(if float {
            Val::Float(raw)
        } else {
            // The grammar is checked, so the only possible error is overflow.
            raw.parse::<i64>().map_or(Val::BigInt(raw), Val::Int)
        })
    }

    /// An object or array: `serde_json` checks it and finds its end, then
    /// it is compacted (and checked for lone surrogates).
    fn nested(&mut self, text: &mut String) -> Result<Val<'a>, Invalid> {
        let rest = self.slice(self.i, self.s.len())?;
        let mut de = serde_json::Deserializer::from_str(rest);
        let raw = <&RawValue>::deserialize(&mut de)
            .map_err(|_| Invalid)?
            .get();
        // `raw` is the value's own text: a prefix of `rest`.
        if raw.as_ptr() != rest.as_ptr() {
            return Err(Invalid);
        }
        self.i += raw.len();
        let start = text.len();
        if compact_into(raw, text)? {
            Ok(Val::Text(start, text.len()))
        } else {
            Ok(Val::Str(raw))
        }
    }
}
