//! Unit tests of the hoglake sink: error kinds, refused names.
use millpond_hoglake::catalog::CatalogError;
use millpond_hoglake::publish::PublishError;
use millpond_shared::metrics::error_type;

use super::*;
use crate::sink::{SinkErrorKind, SinkId};

fn api(status: u16, code: &str) -> PublishError {
    PublishError::Catalog(CatalogError::Api {
        what: "POST commit".into(),
        status,
        code: code.into(),
        detail: None,
        tables: vec![],
        retry_after: None,
    })
}

#[test]
fn catalog_errors_map_to_sink_kinds() {
    assert_eq!(
        kind_of(&api(503, "commit_queue_timeout")),
        SinkErrorKind::Transient
    );
    assert_eq!(
        kind_of(&api(422, "unprocessable")),
        SinkErrorKind::Permanent
    );
    assert_eq!(kind_of(&api(404, "not_found")), SinkErrorKind::Permanent);
    let contention = kind_of(&api(409, "commit_conflict"));
    assert_eq!(contention, SinkErrorKind::Contention(SinkId::Hoglake));
    let spent = PublishError::Exhausted {
        table: "a.b".into(),
        attempts: 8,
        last: Box::new(api(409, "ddl_since_read_snapshot")),
    };
    // A hoglake writer never raises the DuckLake label.
    let e = SinkError::new(kind_of(&spent), "x");
    assert_eq!(e.error_type(), error_type::HOGLAKE_COMMIT_CONTENTION);
    assert!(e.is_retryable());
    let spent = PublishError::Exhausted {
        table: "a.b".into(),
        attempts: 8,
        last: Box::new(api(500, "internal")),
    };
    assert_eq!(kind_of(&spent), SinkErrorKind::Transient);
    // A spent deadline ends the write, whatever the last error was.
    let deadline = PublishError::DeadlineSpent {
        what: "publishing to",
        table: "a.b".into(),
        attempts: 2,
        deadline: Deadline::after(std::time::Duration::ZERO, config::WRITE_BUDGET_SET_BY),
        pause: std::time::Duration::from_secs(3600),
        last: Box::new(api(409, "commit_conflict")),
    };
    assert_eq!(kind_of(&deadline), SinkErrorKind::Deadline);
    assert!(
        deadline.to_string().contains("HOGLAKE_REQUEST_TIMEOUT_S"),
        "{deadline}"
    );
}

#[test]
fn hoglake_names_are_refused() {
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use millpond_proto::FlushTrigger;
    use std::sync::Arc;
    let long = "c".repeat(129);
    let ok128 = "d".repeat(128);
    let names = [
        "id",
        "_HOG_x",
        "_inserted_at",
        long.as_str(),
        ok128.as_str(),
    ];
    let schema = Arc::new(Schema::new(
        names
            .iter()
            .map(|n| Field::new(*n, DataType::Int64, true))
            .collect::<Vec<_>>(),
    ));
    let cols = names
        .iter()
        .map(|_| Arc::new(Int64Array::from(vec![1, 2])) as _)
        .collect();
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let flush = Flush {
        id: "f".into(),
        trigger: FlushTrigger::Size,
        ranges: vec![OffsetRange::new("t", 0, 0, 1)],
        schema,
        batches: vec![batch],
        dead_letters: Default::default(),
        streamed: None,
    };
    let p = prepare(
        &flush,
        &RESERVED_COLUMNS,
        UnsafeNames::Limited(NAME_LIMITS),
        NameCase::Sensitive,
    )
    .unwrap();
    assert_eq!(p.reserved_names, vec!["_inserted_at".to_string()]);
    assert_eq!(p.unsafe_names, vec!["_HOG_x".to_string(), long.clone()]);
    let kept: Vec<&str> = p
        .schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(kept, vec!["id", ok128.as_str()]);
    // Two values each of three refused columns; both rows lost a value
    // to an unsafe name (records_skipped{unsafe_field_name}).
    assert_eq!(p.dead_letters.len(), 6);
    assert_eq!(p.rows_with_unsafe, 2);
    let reasons: Vec<&str> = p.dead_letters.iter().map(|d| d.reason.as_str()).collect();
    assert_eq!(
        reasons
            .iter()
            .filter(|r| **r == dead_letter_reason::UNSAFE_FIELD_NAME)
            .count(),
        4
    );
}
