//! Property tests against serde_json.
use super::*;

// ---------------------------------------------------------------------------
// Property tests. The JSON-ish generator below draws its choices from
// proptest's seeded generator; random bytes are a plain proptest strategy.
// ---------------------------------------------------------------------------

/// Random choices for the structured generators (deterministic, seeded).
struct Rng(proptest::test_runner::TestRng);

impl Rng {
    fn new() -> Self {
        Rng(proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ))
    }
    fn next(&mut self) -> u64 {
        <proptest::test_runner::TestRng as proptest::prelude::Rng>::next_u64(&mut self.0)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

fn ws(rng: &mut Rng, out: &mut String) {
    if rng.chance(25) {
        out.push_str(rng.pick(&[" ", "  ", "\n", "\t", "\r\n ", " \t"]));
    }
}

const KEYS: &[&str] = &[
    "a",
    "b",
    "c",
    "",
    "k\\u00e9y",
    "kéy",
    "x y",
    "$set",
    "\\\"q",
    "uuid",
];

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "42",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "18446744073709551615",
    "-9223372036854775809",
    "1234567890123456789012345",
    "1.5",
    "1.50",
    "-0.0",
    "0.1",
    "1e5",
    "2.5E-3",
    "123.456e+7",
    "-3.25e2",
];

const STRING_PIECES: &[&str] = &[
    "abc",
    " ",
    "\\\"",
    "\\\\",
    "\\/",
    "\\n",
    "\\t",
    "\\u00e9",
    "\\u0000",
    "\\ud83d\\ude00",
    "é",
    "中文",
    "😀",
    "{[,:]}",
    "\\\\u0041",
];

fn gen_string(rng: &mut Rng, out: &mut String) {
    out.push('"');
    for _ in 0..rng.below(4) {
        out.push_str(rng.pick(STRING_PIECES));
    }
    if rng.chance(2) {
        out.push_str("\\ud800"); // lone surrogate: invalid
    }
    out.push('"');
}

fn gen_value(rng: &mut Rng, depth: usize, out: &mut String) {
    let kinds = if depth >= 4 { 5 } else { 7 };
    match rng.below(kinds) {
        0 => out.push_str("null"),
        1 => out.push_str(rng.pick(&["true", "false"])),
        2 | 3 => out.push_str(rng.pick(NUMBERS)),
        4 => gen_string(rng, out),
        5 => {
            out.push('[');
            ws(rng, out);
            for i in 0..rng.below(4) {
                if i > 0 {
                    out.push(',');
                    ws(rng, out);
                }
                gen_value(rng, depth + 1, out);
                ws(rng, out);
            }
            out.push(']');
        }
        _ => gen_object(rng, depth + 1, out),
    }
}

fn gen_object(rng: &mut Rng, depth: usize, out: &mut String) {
    out.push('{');
    ws(rng, out);
    for i in 0..rng.below(7) {
        if i > 0 {
            out.push(',');
            ws(rng, out);
        }
        out.push('"');
        out.push_str(rng.pick(KEYS));
        out.push('"');
        ws(rng, out);
        out.push(':');
        ws(rng, out);
        gen_value(rng, depth, out);
        ws(rng, out);
    }
    out.push('}');
}

/// A JSON-ish payload: mostly objects, sometimes other values, sometimes
/// corrupted.
fn gen_payload(rng: &mut Rng) -> Vec<u8> {
    let mut text = String::new();
    ws(rng, &mut text);
    if rng.chance(85) {
        gen_object(rng, 0, &mut text);
    } else {
        gen_value(rng, 0, &mut text);
    }
    ws(rng, &mut text);
    let mut bytes = text.into_bytes();
    if rng.chance(25) && !bytes.is_empty() {
        const JUNK: &[u8] = b"\"\\{}[],:0e.-+ tnx\x01\xff\xc3";
        let at = rng.below(bytes.len());
        let junk = JUNK[rng.below(JUNK.len())];
        match rng.below(3) {
            0 => bytes.truncate(at),
            1 => bytes[at] = junk,
            _ => bytes.insert(at, junk),
        }
    }
    bytes
}

/// JSON equality with numbers compared as f64 (so `-0` == `0`).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Checks a converted batch cell by cell against serde_json's view.
fn check_against_oracle(b: &RecordBatch, rows: &[serde_json::Map<String, Value>]) {
    assert_eq!(b.num_rows(), rows.len());
    let expected_cols: BTreeSet<&str> = rows
        .iter()
        .flat_map(|m| m.iter())
        .filter(|(_, v)| !v.is_null())
        .map(|(k, _)| k.as_str())
        .collect();
    let got_cols: BTreeSet<String> = names(b).into_iter().collect();
    let got_cols: BTreeSet<&str> = got_cols.iter().map(String::as_str).collect();
    assert_eq!(got_cols, expected_cols);

    for field in b.schema().fields() {
        let name = field.name().as_str();
        let col = b.column_by_name(name).unwrap();
        let values: Vec<&Value> = rows
            .iter()
            .map(|m| m.get(name).unwrap_or(&Value::Null))
            .collect();
        // Kind classes: I = i64, A = -0 (int or float literal), N = other
        // number, B = bool, S = string or nested.
        let class = |v: &Value| match v {
            Value::Number(n) if n.is_i64() => 'I',
            Value::Number(n) if n.as_f64() == Some(0.0) => 'A',
            Value::Number(_) => 'N',
            Value::Bool(_) => 'B',
            _ => 'S',
        };
        let classes: BTreeSet<char> = values
            .iter()
            .filter(|v| !v.is_null())
            .map(|v| class(v))
            .collect();
        let numeric = classes.iter().all(|c| "IAN".contains(*c));
        // Numbers become text when f64 would change one of them.
        let allowed: &[DataType] = if classes.iter().all(|c| "IA".contains(*c)) {
            &[DataType::Int64, DataType::Float64, DataType::Utf8]
        } else if numeric {
            &[DataType::Float64, DataType::Utf8]
        } else if classes.len() == 1 && classes.contains(&'B') {
            &[DataType::Boolean]
        } else {
            &[DataType::Utf8]
        };
        assert!(
            allowed.contains(field.data_type()),
            "{name}: {:?} for {classes:?}",
            field.data_type()
        );
        for (row, v) in values.iter().enumerate() {
            assert_eq!(col.is_null(row), v.is_null(), "{name} row {row}");
            if v.is_null() {
                continue;
            }
            let ok = match field.data_type() {
                DataType::Int64 => {
                    v.as_f64() == Some(col.as_primitive::<Int64Type>().value(row) as f64)
                }
                DataType::Float64 => {
                    v.as_f64() == Some(col.as_primitive::<Float64Type>().value(row))
                }
                DataType::Boolean => v.as_bool() == Some(col.as_boolean().value(row)),
                _ => {
                    let cell = col.as_string::<i32>().value(row);
                    match v {
                        Value::String(s) => s == cell,
                        _ => serde_json::from_str::<Value>(cell).is_ok_and(|c| same_json(&c, v)),
                    }
                }
            };
            assert!(
                ok,
                "{name} row {row}: expected {v}, got {:?}",
                col.slice(row, 1)
            );
        }
    }
}

#[test]
fn property_json_ish_payloads_match_serde_json() {
    let mut rng = Rng::new();
    let mut accepted = 0;
    for _ in 0..400 {
        let payloads: Vec<Vec<u8>> = (0..1 + rng.below(24))
            .map(|_| gen_payload(&mut rng))
            .collect();
        let mut expected_rows = Vec::new();
        let mut comparable = true;
        for p in &payloads {
            let one = convert(&[p.as_slice()]);
            assert_eq!(one.rows + one.skipped.len(), 1);
            match oracle(p) {
                Oracle::Row(m) => {
                    assert_eq!(one.rows, 1, "{:?}", String::from_utf8_lossy(p));
                    expected_rows.push(m);
                }
                Oracle::Skip => {
                    assert_eq!(one.rows, 0, "{:?}", String::from_utf8_lossy(p));
                }
                Oracle::Unknown => comparable = false,
            }
        }
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let out = convert(&refs);
        assert_eq!(out.rows + out.skipped.len(), payloads.len());
        if !comparable {
            continue;
        }
        assert_eq!(out.rows, expected_rows.len());
        accepted += out.rows;
        match &out.batch {
            Some(b) => {
                assert_eq!(out.arrow_bytes, b.get_array_memory_size());
                check_against_oracle(b, &expected_rows);
            }
            None => assert!(expected_rows.is_empty()),
        }
    }
    // The generator must exercise the happy path too.
    assert!(accepted > 2000, "only {accepted} rows accepted");
}

fn json_alphabet_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    const ALPHABET: &[u8] = b"{}[]\":,\\ -0123456789.eEtrufalsn\n\xff\xc3\xa9\x00";
    proptest::collection::vec(
        prop_oneof![
            7 => proptest::sample::select(ALPHABET),
            3 => any::<u8>(),
        ],
        0..48,
    )
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(2000))]
    #[test]
    fn property_random_bytes_never_panic(
        payloads in proptest::collection::vec(json_alphabet_bytes(), 0..16)
    ) {
        let refs: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let out = convert(&refs);
        assert_eq!(out.rows + out.skipped.len(), payloads.len());
        if let Some(b) = &out.batch {
            assert_eq!(b.num_rows(), out.rows);
        }
        // Each payload is a row exactly when serde_json reads an object.
        for p in &payloads {
            let rows = convert(&[p.as_slice()]).rows;
            match oracle(p) {
                Oracle::Row(_) => assert_eq!(rows, 1, "{:?}", String::from_utf8_lossy(p)),
                Oracle::Skip => assert_eq!(rows, 0, "{:?}", String::from_utf8_lossy(p)),
                Oracle::Unknown => {}
            }
        }
    }
}

/// Pieces of a JSON string body: escapes of every kind, multi-byte text, and
/// (invalid) a raw control character, an unknown escape, a lone surrogate.
const BODY_PIECES: &[&str] = &[
    "a",
    "plain text ",
    "é",
    "😀",
    "\\\"",
    "\\\\",
    "\\/",
    "\\n",
    "\\t",
    "\\b\\f\\r",
    "\\u0041",
    "\\u00e9",
    "\\u20AC",
    "\\ud83d\\ude00",
    "\\u0000",
    "\u{1}",
    "\\x",
    "\\udc00",
];

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(3000))]
    /// A string with escapes, at every offset from a word boundary and
    /// anywhere up to the payload's end, reads as serde_json reads it (or
    /// is refused when serde_json refuses it), as a value and as a key.
    #[test]
    fn strings_with_escapes_read_as_serde_json_reads_them(
        pieces in proptest::collection::vec(proptest::sample::select(BODY_PIECES), 1..40),
        pad in 0usize..9,
        tail in 0usize..3,
    ) {
        let body: String = pieces.concat();
        let padding = "p".repeat(pad);
        let after = ["", ",\"z\":1", ",\"z\":\"0123456789abcdef\""][tail];
        let payload = format!(r#"{{"{padding}":0,"s":"{body}"{after}}}"#);
        let as_key = format!(r#"{{"{body}":1}}"#);
        for p in [payload.as_str(), as_key.as_str()] {
            let one = convert(&[p.as_bytes()]);
            match serde_json::from_str::<serde_json::Map<String, Value>>(p) {
                Ok(m) => {
                    proptest::prop_assert_eq!(one.rows, 1, "{:?}", p);
                    check_against_oracle(one.batch.as_ref().unwrap(), &[m]);
                }
                Err(_) => proptest::prop_assert_eq!(one.rows, 0, "{:?}", p),
            }
        }
    }
}
