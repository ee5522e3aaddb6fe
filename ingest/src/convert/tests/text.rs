//! Strings, keys, repeated keys, the column limit and edge cases.
use super::*;

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
    let limits = crate::convert::Limits {
        max_columns: 2,
        ..Default::default()
    };
    let out = crate::convert::convert_limited(&payloads, limits);
    let b = out.batch.unwrap();
    assert_eq!(
        names(&b),
        ["a", "b"],
        "the all-null x does not take a place"
    );
    assert_eq!(
        out.overflow,
        [
            crate::convert::Withheld {
                row: 0,
                column: "c".into(),
                text: "3".into()
            },
            crate::convert::Withheld {
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
                        crate::convert::strings::find_string_stop(&b, from),
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
