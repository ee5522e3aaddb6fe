//! Unit tests of the catalog client: classes, Retry-After, URLs, API errors.
use reqwest::StatusCode;

use super::error::api_error;
use super::*;

#[test]
fn classes_follow_the_api_document() {
    assert_eq!(classify(503, "commit_queue_timeout"), ErrorClass::Retry);
    assert_eq!(classify(502, "http_502"), ErrorClass::Retry);
    assert_eq!(classify(429, "http_429"), ErrorClass::Retry);
    assert_eq!(
        classify(409, "ddl_since_read_snapshot"),
        ErrorClass::RePrepare
    );
    assert_eq!(classify(409, "table_recreated"), ErrorClass::RePrepare);
    assert_eq!(classify(410, "expired"), ErrorClass::RePrepare);
    assert_eq!(classify(409, "offset_regression"), ErrorClass::Permanent);
    assert_eq!(classify(422, "validation"), ErrorClass::Permanent);
    assert_eq!(classify(400, "bad_request"), ErrorClass::Permanent);
    assert_eq!(classify(501, "http_501"), ErrorClass::Permanent);
}

#[test]
fn retry_after_is_delta_seconds() {
    assert_eq!(parse_retry_after("1"), Some(Duration::from_secs(1)));
    assert_eq!(
        parse_retry_after(" 2.5 "),
        Some(Duration::from_millis(2500))
    );
    assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    assert_eq!(parse_retry_after("-1"), None);
}

#[test]
fn urls_percent_encode_segments_and_append_v1() {
    let c = CatalogClient::new("http://h:1/root/", "demo", DEFAULT_REQUEST_TIMEOUT).unwrap();
    assert_eq!(
        c.url(&["namespaces", "a b", "tables", "t/x"]).as_str(),
        "http://h:1/root/v1/catalogs/demo/namespaces/a%20b/tables/t%2Fx"
    );
    assert!(CatalogClient::new("ftp://h", "demo", DEFAULT_REQUEST_TIMEOUT).is_err());
}

#[test]
fn api_errors_carry_code_tables_and_retry_after() {
    let e = api_error(
        "commit",
        StatusCode::CONFLICT,
        br#"{"error":"table_recreated","detail":"x","tables":["a.b"],"retry":"re-prepare"}"#,
        None,
    );
    assert_eq!(e.class(), ErrorClass::RePrepare);
    assert!(matches!(&e, CatalogError::Api { tables, .. } if tables == &["a.b"]));
    let e = api_error(
        "commit",
        StatusCode::BAD_GATEWAY,
        b"<html>",
        Some(Duration::from_secs(3)),
    );
    assert_eq!(e.code(), Some("http_502"));
    assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
    assert_eq!(e.class(), ErrorClass::Retry);
}
