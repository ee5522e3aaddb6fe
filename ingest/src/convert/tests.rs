use std::collections::BTreeSet;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use arrow::record_batch::RecordBatch;
use serde_json::Value;

use super::{convert, Converted};

fn conv(payloads: &[&str]) -> Converted {
    let bytes: Vec<&[u8]> = payloads.iter().map(|p| p.as_bytes()).collect();
    let out = convert(&bytes);
    assert_eq!(out.rows + out.skipped.len(), payloads.len());
    match &out.batch {
        Some(b) => {
            assert_eq!(b.num_rows(), out.rows);
            assert_eq!(out.arrow_bytes, b.get_array_memory_size());
        }
        None => {
            assert_eq!(out.rows, 0);
            assert_eq!(out.arrow_bytes, 0);
        }
    }
    out
}

fn batch(payloads: &[&str]) -> RecordBatch {
    conv(payloads).batch.expect("a batch")
}

fn names(b: &RecordBatch) -> Vec<String> {
    b.schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

fn dtype(b: &RecordBatch, name: &str) -> DataType {
    b.schema()
        .field_with_name(name)
        .unwrap()
        .data_type()
        .clone()
}

fn ints(b: &RecordBatch, name: &str) -> Vec<Option<i64>> {
    let col = b.column_by_name(name).unwrap();
    col.as_primitive::<Int64Type>().iter().collect()
}

fn floats(b: &RecordBatch, name: &str) -> Vec<Option<f64>> {
    let col = b.column_by_name(name).unwrap();
    col.as_primitive::<Float64Type>().iter().collect()
}

fn bools(b: &RecordBatch, name: &str) -> Vec<Option<bool>> {
    b.column_by_name(name)
        .unwrap()
        .as_boolean()
        .iter()
        .collect()
}

fn strs(b: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let col = b.column_by_name(name).unwrap();
    col.as_string::<i32>()
        .iter()
        .map(|s| s.map(str::to_owned))
        .collect()
}

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

#[test]
fn columns_are_union_in_first_seen_order() {
    let b = batch(&[
        r#"{"b":1,"a":"x"}"#,
        r#"{"c":true,"a":"y"}"#,
        r#"{"d":2.5,"b":3}"#,
    ]);
    assert_eq!(names(&b), ["b", "a", "c", "d"]);
    assert_eq!(b.num_rows(), 3);
}

#[test]
fn missing_keys_are_null() {
    let b = batch(&[r#"{"a":1}"#, r#"{"b":"x"}"#, r#"{"a":3,"b":"z"}"#]);
    assert_eq!(ints(&b, "a"), [Some(1), None, Some(3)]);
    assert_eq!(strs(&b, "b"), [None, s("x"), s("z")]);
}

#[test]
fn scalar_types() {
    let b = batch(&[
        r#"{"i":1,"f":1.5,"t":true,"s":"x","n":null}"#,
        r#"{"i":-2,"f":-2.25e2,"t":false,"s":"","n":null}"#,
    ]);
    assert_eq!(dtype(&b, "i"), DataType::Int64);
    assert_eq!(dtype(&b, "f"), DataType::Float64);
    assert_eq!(dtype(&b, "t"), DataType::Boolean);
    assert_eq!(dtype(&b, "s"), DataType::Utf8);
    assert_eq!(ints(&b, "i"), [Some(1), Some(-2)]);
    assert_eq!(floats(&b, "f"), [Some(1.5), Some(-225.0)]);
    assert_eq!(bools(&b, "t"), [Some(true), Some(false)]);
    assert_eq!(strs(&b, "s"), [s("x"), s("")]);
}

#[test]
fn ints_and_floats_promote_to_float64() {
    let b = batch(&[
        r#"{"x":1}"#,
        r#"{"x":2.5}"#,
        r#"{"x":null}"#,
        r#"{"x":-7}"#,
        r#"{"x":1E3}"#,
    ]);
    assert_eq!(dtype(&b, "x"), DataType::Float64);
    assert_eq!(
        floats(&b, "x"),
        [Some(1.0), Some(2.5), None, Some(-7.0), Some(1000.0)]
    );
}

#[test]
fn int64_extremes_stay_int64() {
    let b = batch(&[
        r#"{"x":9223372036854775807}"#,
        r#"{"x":-9223372036854775808}"#,
        r#"{"x":-0}"#,
    ]);
    assert_eq!(dtype(&b, "x"), DataType::Int64);
    assert_eq!(ints(&b, "x"), [Some(i64::MAX), Some(i64::MIN), Some(0)]);
}

#[test]
fn mixed_kinds_become_json_text() {
    let b = batch(&[
        r#"{"sn":"a","bi":true,"fb":1.5,"all":42}"#,
        r#"{"sn":42,"bi":1,"fb":false,"all":"s"}"#,
        r#"{"sn":null,"bi":null,"fb":1.50,"all":true}"#,
        r#"{"all":-1.5e-3}"#,
        r#"{"all":[1, 2]}"#,
    ]);
    for c in ["sn", "bi", "fb", "all"] {
        assert_eq!(dtype(&b, c), DataType::Utf8, "{c}");
    }
    assert_eq!(strs(&b, "sn"), [s("a"), s("42"), None, None, None]);
    assert_eq!(strs(&b, "bi"), [s("true"), s("1"), None, None, None]);
    // Numbers are written as their shortest decimal, as unify writes a
    // float column meeting text in another batch.
    assert_eq!(strs(&b, "fb"), [s("1.5"), s("false"), s("1.5"), None, None]);
    assert_eq!(
        strs(&b, "all"),
        [s("42"), s("s"), s("true"), s("-0.0015"), s("[1,2]")]
    );
}

#[test]
fn nested_values_become_compact_json_text() {
    let b = batch(&[
        "{\"o\": {\"a\" : [1, 2,\n\t3], \"b\": \"x  y\", \"c\": {}}, \"l\": [ ]}",
        r#"{"o":{"e":"q\"\u00e9 \\"},"l":[{"k":null},"s",1.0e1]}"#,
    ]);
    assert_eq!(dtype(&b, "o"), DataType::Utf8);
    assert_eq!(
        strs(&b, "o"),
        [
            s(r#"{"a":[1,2,3],"b":"x  y","c":{}}"#),
            // Escapes inside nested values are preserved as written.
            s(r#"{"e":"q\"\u00e9 \\"}"#),
        ]
    );
    assert_eq!(strs(&b, "l"), [s("[]"), s(r#"[{"k":null},"s",1.0e1]"#)]);
    for text in strs(&b, "o").into_iter().chain(strs(&b, "l")).flatten() {
        serde_json::from_str::<Value>(&text).expect("nested text is valid JSON");
    }
}

#[test]
fn all_null_columns_are_dropped() {
    let b = batch(&[
        r#"{"a":null,"b":1,"c":null}"#,
        r#"{"a":null,"b":2}"#,
        r#"{"c":"x"}"#,
    ]);
    assert_eq!(names(&b), ["b", "c"]);
    assert_eq!(strs(&b, "c"), [None, None, s("x")]);
}

#[test]
fn only_empty_objects_give_zero_column_batch() {
    let out = conv(&["{}", "{\"a\":null}", " { } "]);
    let b = out.batch.expect("rows were converted");
    assert_eq!(b.num_columns(), 0);
    assert_eq!(b.num_rows(), 3);
}

#[test]
fn huge_integers_are_exact_text() {
    let b = batch(&[
        r#"{"u":18446744073709551615,"big":1234567890123456789012345,"neg":5}"#,
        r#"{"u":1,"big":null,"neg":-9223372036854775809}"#,
        r#"{"u":2.5,"neg":true}"#,
    ]);
    assert_eq!(dtype(&b, "u"), DataType::Utf8);
    assert_eq!(strs(&b, "u"), [s("18446744073709551615"), s("1"), s("2.5")]);
    assert_eq!(dtype(&b, "big"), DataType::Utf8);
    assert_eq!(
        strs(&b, "big"),
        [s("1234567890123456789012345"), None, None]
    );
    assert_eq!(
        strs(&b, "neg"),
        [s("5"), s("-9223372036854775809"), s("true")]
    );
}

#[test]
fn invalid_and_non_object_payloads_are_skipped() {
    let bad: &[&[u8]] = &[
        b"",
        b"   ",
        b"{",
        b"{\"a\":1",
        b"{\"a\":1,}",
        b"{\"a\" 1}",
        b"{'a':1}",
        b"{\"a\":01}",
        b"{\"a\":1.}",
        b"{\"a\":tru}",
        b"{\"a\":\"\x01\"}",
        b"{\"a\":\"\\x\"}",
        b"{\"a\":1}x",
        b"{\"a\":1}{\"b\":2}",
        b"{\"a\":\"\xff\"}",
        b"\xef\xbb\xbf{\"a\":1}",
        b"[1,2]",
        b"[{\"a\":1}]",
        b"1",
        b"-1.5",
        b"\"str\"",
        b"true",
        b"null",
        b"{\"a\":NaN}",
    ];
    let mut payloads: Vec<&[u8]> = bad.to_vec();
    payloads.push(b" {\"ok\":1} \n");
    payloads.push(b"{\"ok\":2}");
    let out = convert(&payloads);
    assert_eq!(out.skipped.len(), bad.len());
    assert_eq!(out.rows, 2);
    let b = out.batch.unwrap();
    assert_eq!(names(&b), ["ok"], "skipped rows must not create columns");
    assert_eq!(ints(&b, "ok"), [Some(1), Some(2)]);
    for p in bad {
        let one = convert(&[*p]);
        assert_eq!(one.skipped.len(), 1, "{:?}", String::from_utf8_lossy(p));
        assert!(one.batch.is_none());
    }
}

#[test]
fn failed_row_leaves_no_columns_behind() {
    // The first payload fails after `z` and `b` were seen.
    let b = batch(&[r#"{"z":1,"b":2,"c":"#, r#"{"b":3,"z":4}"#]);
    assert_eq!(names(&b), ["b", "z"]);
    assert_eq!(ints(&b, "b"), [Some(3)]);
    // A failed row in the middle of a batch.
    let b = batch(&[r#"{"a":1}"#, r#"{"a":"x","n":[1,"#, r#"{"a":2}"#]);
    assert_eq!(names(&b), ["a"]);
    assert_eq!(dtype(&b, "a"), DataType::Int64);
    assert_eq!(ints(&b, "a"), [Some(1), Some(2)]);
}

#[test]
fn every_payload_skipped_gives_no_batch() {
    let out = conv(&["nope", "[]", "{"]);
    assert!(out.batch.is_none());
    assert_eq!(out.rows, 0);
    assert_eq!(out.skipped.len(), 3);
}

#[test]
fn empty_input() {
    let out = convert(&[]);
    assert!(out.batch.is_none());
    assert_eq!((out.rows, out.skipped.len(), out.arrow_bytes), (0, 0, 0));
}

#[test]
fn deep_nesting_does_not_overflow_the_stack() {
    const DEPTH: usize = 10_000;
    let arrays = format!("{}{}", "[".repeat(DEPTH), "]".repeat(DEPTH));
    let objects = format!("{}1{}", "{\"a\":".repeat(DEPTH), "}".repeat(DEPTH));
    let open = "[".repeat(DEPTH);
    // Top-level non-objects and truncated nesting are skipped.
    let out = conv(&[&arrays, &open, &format!("{{\"a\":{open}}}")]);
    assert_eq!(out.skipped.len(), 3);
    // Deep but valid values inside an object are kept as text, iteratively.
    let inner_arrays = format!("{{\"d\":{arrays}}}");
    let b = batch(&[&objects, &inner_arrays]);
    assert_eq!(names(&b), ["a", "d"]);
    let a = strs(&b, "a");
    assert_eq!(a[0].as_deref().map(str::len), Some(objects.len() - 5 - 1));
    assert_eq!(a[1], None);
    assert_eq!(strs(&b, "d")[1].as_deref(), Some(arrays.as_str()));
}

#[test]
fn strings_are_unescaped() {
    let b = batch(&[
        r#"{"s":"a\"b\u00e9"}"#,
        r#"{"s":"\\ \/ \b\f\n\r\t \u0000 \u00E9\u4e2d \ud83d\ude00"}"#,
        r#"{"s":"raw é 中 😀"}"#,
        r#"{"s":"no escapes"}"#,
    ]);
    assert_eq!(
        strs(&b, "s"),
        [
            s("a\"bé"),
            s("\\ / \u{8}\u{c}\n\r\t \0 é中 😀"),
            s("raw é 中 😀"),
            s("no escapes"),
        ]
    );
}

#[test]
fn keys_are_unescaped_and_kept_as_is() {
    let b = batch(&[
        r#"{"k\u00e9y":1,"":2,"$set":3,"A b":4}"#,
        r#"{"kéy":5,"\"q\"":6}"#,
    ]);
    assert_eq!(names(&b), ["kéy", "", "$set", "A b", "\"q\""]);
    assert_eq!(ints(&b, "kéy"), [Some(1), Some(5)]);
    assert_eq!(ints(&b, ""), [Some(2), None]);
}

#[test]
fn lone_surrogates_are_invalid() {
    let out = conv(&[
        r#"{"s":"\ud800"}"#,
        r#"{"s":"\udc00"}"#,
        r#"{"s":"\ud800\u0041"}"#,
        r#"{"s":"\ud800x"}"#,
        r#"{"\ud800":1}"#,
        r#"{"o":{"s":"\ud800"}}"#,
        r#"{"o":["\udfff"]}"#,
        r#"{"o":{"\ud83d":1}}"#,
        r#"{"o":"\ud83d\ude00","p":["\ud83d\ude00"]}"#,
    ]);
    assert_eq!(out.skipped.len(), 8);
    let b = out.batch.unwrap();
    assert_eq!(strs(&b, "o"), [s("😀")]);
    assert_eq!(strs(&b, "p"), [s(r#"["\ud83d\ude00"]"#)]);
}

#[test]
fn duplicate_keys_last_wins() {
    let b = batch(&[
        r#"{"a":"x","b":1,"a":2}"#,
        r#"{"a":3,"c":null,"c":4,"c":null}"#,
        r#"{"d":5,"d":null}"#,
    ]);
    // The overwritten "x" influences neither value nor type.
    assert_eq!(dtype(&b, "a"), DataType::Int64);
    assert_eq!(ints(&b, "a"), [Some(2), Some(3), None]);
    // Columns whose surviving cells are all null are dropped.
    assert_eq!(names(&b), ["a", "b"]);
}

fn repeated(out: &Converted) -> Vec<(usize, &str, &str)> {
    out.repeated
        .iter()
        .map(|w| (w.row, w.column.as_str(), w.text.as_str()))
        .collect()
}

#[test]
fn earlier_values_of_a_repeated_key_are_set_aside_with_their_text() {
    let out = conv(&[
        r#"{"a":1,"a":2}"#,
        r#"{"b":true}"#,
        r#"{"a":"x","b":1,"a":{"n": [1, 2]},"\u0061":"y\u00e9"}"#,
        r#"{"a":1,"a":2"#,
        r#"{"c":null,"c":4,"c":null,"d":1.50,"d":-0}"#,
    ]);
    let b = out.batch.as_ref().unwrap();
    assert_eq!(out.rows, 4, "a record with a repeated key is still a row");
    assert_eq!(
        strs(b, "a"),
        [s("2"), None, s("yé"), None],
        "the last value lands"
    );
    assert_eq!(
        repeated(&out),
        [
            (0, "a", "1"),
            (2, "a", "x"),
            (2, "a", r#"{"n":[1,2]}"#),
            (3, "c", "4"),
            (3, "d", "1.50"),
        ],
        "rows counted without the invalid payload; an earlier null is no value"
    );
    // Without a repeated key, nothing is set aside.
    assert!(conv(&[r#"{"a":1,"b":2}"#, r#"{"a":3}"#])
        .repeated
        .is_empty());
}

#[test]
fn a_repeated_key_is_found_whatever_the_batch() {
    let payloads = [
        r#"{"a":1,"b":2}"#,
        r#"{"b":3,"a":4,"b":5}"#,
        r#"{"a":6,"b":7}"#,
        r#"{"b":8,"b":9}"#,
    ];
    let together: Vec<_> = repeated(&conv(&payloads))
        .into_iter()
        .map(|(row, c, t)| (payloads[row], c.to_owned(), t.to_owned()))
        .collect();
    let mut one_by_one = Vec::new();
    for p in payloads {
        let out = conv(&[p]);
        for (_, c, t) in repeated(&out) {
            one_by_one.push((p, c.to_owned(), t.to_owned()));
        }
    }
    assert_eq!(together, one_by_one);
    assert_eq!(
        together,
        [
            (payloads[1], "b".to_owned(), "3".to_owned()),
            (payloads[3], "b".to_owned(), "8".to_owned()),
        ]
    );
}

#[test]
fn arrow_bytes_reports_memory_size() {
    let out = conv(&[r#"{"a":1,"b":"hello"}"#, r#"{"a":2}"#]);
    let b = out.batch.as_ref().unwrap();
    assert!(out.arrow_bytes > 0);
    assert_eq!(out.arrow_bytes, b.get_array_memory_size());
}

#[test]
fn float_literals_f64_would_change_keep_their_text() {
    let b = batch(&[r#"{"f":1e400}"#, r#"{"f":-1e400}"#, r#"{"f":1e-400}"#]);
    assert_eq!(strs(&b, "f"), [s("1e400"), s("-1e400"), s("1e-400")]);
    let b = batch(&[r#"{"f":1.5}"#, r#"{"f":9007199254740993}"#]);
    assert_eq!(strs(&b, "f"), [s("1.5"), s("9007199254740993")]);
    let b = batch(&[r#"{"f":3.14159265358979323846}"#, r#"{"f":2}"#]);
    assert_eq!(strs(&b, "f"), [s("3.14159265358979323846"), s("2")]);
}

#[test]
fn columns_beyond_the_limit_are_not_built_but_returned() {
    let payloads: Vec<&[u8]> = vec![
        br#"{"x":null,"a":1,"b":"two","c":3}"#,
        br#"{"d":{"n":[1, 2]},"a":4}"#,
    ];
    let out = super::convert_limited(&payloads, 2);
    let b = out.batch.unwrap();
    assert_eq!(
        names(&b),
        ["a", "b"],
        "the all-null x does not take a place"
    );
    assert_eq!(
        out.overflow,
        [
            super::Withheld {
                row: 0,
                column: "c".into(),
                text: "3".into()
            },
            super::Withheld {
                row: 1,
                column: "d".into(),
                text: r#"{"n":[1,2]}"#.into()
            },
        ]
    );
}

proptest::proptest! {
    /// A number's text never depends on the batch it arrived in: next to a
    /// string in one batch (the converter) or in a float batch unified with
    /// a text batch (unify), it is the same text.
    #[test]
    fn a_number_reads_the_same_whichever_batch_it_came_in(f in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO) {
        let lit = format!("{f:e}");
        let one = batch(&[&format!(r#"{{"v":{lit}}}"#), r#"{"v":"x"}"#]);
        let float_batch = batch(&[&format!(r#"{{"v":{lit},"w":0.5}}"#)]);
        let text_batch = batch(&[r#"{"v":"x"}"#]);
        let (_, unified) = millpond_shared::unify::unify(vec![float_batch, text_batch]).unwrap();
        let from_unify = unified[0].column_by_name("v").unwrap().as_string::<i32>().value(0).to_owned();
        proptest::prop_assert_eq!(strs(&one, "v")[0].clone(), Some(from_unify));
    }
}

#[test]
fn floats_f64_holds_stay_floats() {
    let b = batch(&[
        r#"{"f":0.1}"#,
        r#"{"f":9007199254740992}"#,
        r#"{"f":1.50}"#,
        r#"{"f":1e300}"#,
    ]);
    assert_eq!(
        floats(&b, "f"),
        [Some(0.1), Some(9007199254740992.0), Some(1.5), Some(1e300)]
    );
}

#[test]
fn edge_cases_are_read_as_serde_json_reads_them() {
    let cases = [
        "{}",
        " \t\r\n{ } \n",
        r#"{"a":01}"#,
        r#"{"a":-}"#,
        r#"{"a":1.}"#,
        r#"{"a":.5}"#,
        r#"{"a":1e}"#,
        r#"{"a":1e+}"#,
        r#"{"a":+1}"#,
        r#"{"a":-01}"#,
        r#"{"a":-0}"#,
        r#"{"a":0e0}"#,
        r#"{"a":1E-0}"#,
        r#"{"a":tru}"#,
        r#"{"a":nul}"#,
        r#"{"a":truex}"#,
        r#"{"a":true,}"#,
        r#"{"a":1,,"b":2}"#,
        r#"{"a" 1}"#,
        r#"{a:1}"#,
        r#"{"a":1}}"#,
        r#"{"a":1} x"#,
        r#"{"a":[1,2] x}"#,
        r#"{"a":[1,2}"#,
        r#"{"a":{"b":1}"#,
        "{\"a\":\"x\u{1}y\"}",
        "{\"a\":\"x\ny\"}",
        "{\"a\nb\":1}",
        "{\"a\":\"x\u{7f}y\"}",
        r#"{"a":"\x"}"#,
        r#"{"a":"\u12"}"#,
        r#"{"a":"\u12G4"}"#,
        r#"{"a":"abc"#,
        r#"{"a":"abc\"}"#,
        r#"{"a":"01234567\"}"#,
        r#"{"a":"0123456789abcdef"}"#,
        r#"{"a":"0123456789abcde\"}"#,
        "{\"a\":\"0123456\u{1f}89abcdef\"}",
        "{\"a\":\"0123456789abcdé\u{1f}\"}",
        r#"{"a":"\uD83D\uDE00"}"#,
        r#"{"a":"\uD83D\uD83D"}"#,
        r#"{"a":"\uDE00\uD83D"}"#,
        r#"{"\uD83D\uDE00":1}"#,
    ];
    for case in cases {
        let rows = convert(&[case.as_bytes()]).rows;
        match oracle(case.as_bytes()) {
            Oracle::Row(_) => assert_eq!(rows, 1, "{case:?} is an object"),
            Oracle::Skip => assert_eq!(rows, 0, "{case:?} is not an object"),
            Oracle::Unknown => unreachable!("{case:?}"),
        }
    }
    let b = batch(&[r#"{"a":-0,"c":"0123456789abcdef","d":"x\u007f"}"#]);
    assert_eq!(ints(&b, "a"), [Some(0)]);
    assert_eq!(strs(&b, "c"), [s("0123456789abcdef")]);
    assert_eq!(strs(&b, "d"), [s("x\u{7f}")]);
}

#[test]
fn string_stop_search_matches_a_byte_loop() {
    // Every byte value at every position of a 24-byte run, over fillers
    // that sit just above the stops (the SWAR flags' false positives) and
    // above 0x7f.
    let naive = |b: &[u8], i: usize| {
        (i..b.len())
            .find(|&k| matches!(b[k], b'"' | b'\\' | 0..=0x1f))
            .unwrap_or(b.len())
    };
    for filler in [b'a', b' ', b'#', b']', 0x7f, 0x80, 0xff] {
        for stop in 0..=255u8 {
            for at in 0..24 {
                let mut b = vec![filler; 24];
                b[at] = stop;
                for from in [0, 1, 7, 8, 9] {
                    assert_eq!(
                        super::strings::find_string_stop(&b, from),
                        naive(&b, from),
                        "filler {filler:#x}, byte {stop:#x} at {at}, from {from}"
                    );
                }
            }
        }
    }
}

#[test]
fn unescape_matches_serde_json() {
    let cases = [
        r#""plain""#,
        r#""\"\\\/\b\f\n\r\t""#,
        r#""\u0041\u00e9\u20AC\uFFFF\uD834\uDD1E""#,
        r#""mixed é \u00e9 😀 \ud83d\ude00 end""#,
        r#""\\u0041""#,
    ];
    for case in cases {
        let expected: String = serde_json::from_str(case).unwrap();
        let b = batch(&[&format!(r#"{{"s":{case},{case}:1}}"#)]);
        assert_eq!(strs(&b, "s"), [Some(expected.clone())], "{case}");
        assert_eq!(names(&b), ["s", expected.as_str()], "{case}");
    }
}

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

/// What the reference parser says about one payload.
enum Oracle {
    Row(serde_json::Map<String, Value>),
    Skip,
    /// serde_json rejects out-of-range floats that we accept as ±inf.
    Unknown,
}

fn oracle(p: &[u8]) -> Oracle {
    match serde_json::from_slice::<Value>(p) {
        Ok(Value::Object(m)) => Oracle::Row(m),
        Ok(_) => Oracle::Skip,
        Err(e) if e.to_string().contains("out of range") => Oracle::Unknown,
        Err(_) => Oracle::Skip,
    }
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
