//! Payloads that are no rows, and what they leave behind.
use super::*;

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
