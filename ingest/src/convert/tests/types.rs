//! Columns and their types.
use super::*;

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
