//! VARIANT dual-write (MILLPOND_VARIANT_COLUMNS) through the writer process
//! on both backends: the text column lands as sent, the companion is
//! readable with `properties_variant."$browser"` from a plain DuckDB
//! session, malformed JSON leaves only the companion NULL, an integer above
//! INT64_MAX no longer breaks shredding (including the inlined path), and
//! payload keys that collide with a companion are dead letters.
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use millpond_proto::OffsetRange;
use millpond_tests::flight::{client, descriptor, put, with_coordinates};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::writer::Writer;

const POISON: &str = "9223372036854775809"; // 2^63 + 1

fn r(first: i64, last: i64) -> OffsetRange {
    OffsetRange::new("events", 0, first, last)
}

async fn send(
    c: &mut arrow_flight::FlightClient,
    id: &str,
    columns: Vec<(&str, ArrayRef)>,
    first: i64,
) -> millpond_proto::FlushAck {
    let b = RecordBatch::try_from_iter(columns).unwrap();
    let n = b.num_rows();
    let d = descriptor(id, vec![r(first, first + n as i64 - 1)], n);
    put(c, &d, vec![with_coordinates(b, 0, first)])
        .await
        .unwrap()
}

/// Without the writer's rewrite, the poison integer is accepted by the
/// VARIANT cast and then breaks shredding on the way to Parquet.
#[test]
fn the_shredding_overflow_is_real_without_the_rewrite() {
    let lake = Lake::new(Backend::Embedded, "raw");
    std::fs::create_dir_all(lake.env_value("MILLPOND_LAKE_DIR").unwrap()).unwrap();
    let conn = lake.admin();
    conn.execute_batch("CREATE TABLE lake.main.raw (p VARCHAR, v VARIANT)")
        .unwrap();
    // Written straight to Parquet it fails at the INSERT; inlined, at the
    // later flush of the inlined rows. Either way the write never lands.
    let err = conn
        .execute_batch(&format!(
            r#"INSERT INTO lake.main.raw SELECT p, try_cast(try_cast(p AS JSON) AS VARIANT) FROM (VALUES ('{{"big": {POISON}}}')) t(p)"#
        ))
        .and_then(|_| conn.execute_batch("CALL ducklake_flush_inlined_data('lake')"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("out of range"), "{err}");
}

async fn dual_write(backend: Backend) {
    let lake = Lake::new(backend, "events").with_env("MILLPOND_VARIANT_COLUMNS", "properties");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let props = [
        r#"{"$browser": "Chrome", "n": 5}"#.to_string(),
        "{bad".to_string(),
        format!(r#"{{"big": {POISON}, "$browser": "Firefox"}}"#),
    ];
    let ack = send(
        &mut c,
        "f1",
        vec![
            ("id", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef),
            (
                "properties",
                Arc::new(StringArray::from(props.to_vec())) as ArrayRef,
            ),
        ],
        0,
    )
    .await;
    assert_eq!((ack.rows_written, ack.dead_letters_written), (3, 0));
    assert_eq!(
        writer.metric("millpond_variant_values_coerced_total", &[]),
        1.0
    );
    // Inlined rows reach Parquet without overflowing (the writer's table
    // has a row-group size, which needs insertion order off).
    lake.admin()
        .execute_batch(
            "SET preserve_insertion_order = false; CALL ducklake_flush_inlined_data('lake')",
        )
        .unwrap();
    let rows = lake.query(
        r#"SELECT id, properties, properties_variant."$browser", properties_variant.big FROM lake.main.events ORDER BY id"#,
    );
    assert_eq!(
        rows,
        [
            format!("1|{}|Chrome|NULL", props[0]),
            "2|{bad|NULL|NULL".to_string(),
            format!("3|{}|Firefox|{POISON}", props[2]),
        ],
        "text as sent; companion shredded; the poison integer kept as its digits"
    );
    let types: Vec<(String, String)> = lake.columns();
    assert!(
        types.contains(&("properties_variant".into(), "VARIANT".into())),
        "{types:?}"
    );

    // A payload key that is a companion is a dead letter, never cast in.
    let ack = send(
        &mut c,
        "f2",
        vec![
            ("id", Arc::new(Int64Array::from(vec![4])) as ArrayRef),
            (
                "Properties_Variant",
                Arc::new(StringArray::from(vec!["sneaky"])) as ArrayRef,
            ),
        ],
        3,
    )
    .await;
    assert_eq!((ack.rows_written, ack.dead_letters_written), (1, 1));
    // Records with nothing else are dead letters whole: no empty row.
    let ack = send(
        &mut c,
        "f3",
        vec![(
            "properties_variant",
            Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef,
        )],
        4,
    )
    .await;
    assert_eq!((ack.rows_written, ack.dead_letters_written), (0, 2));
    assert_eq!(lake.count(), 4);
    let metric = |name: &str, labels: &[(&str, &str)]| writer.metric(name, labels);
    assert_eq!(
        metric(
            "millpond_dead_letter_values_total",
            &[("reason", "variant_companion_collision")]
        ),
        1.0
    );
    assert_eq!(
        metric(
            "millpond_dead_letters_total",
            &[("reason", "variant_companion_collision")]
        ),
        2.0
    );
    assert_eq!(
        metric("millpond_variant_companion_columns_dropped_total", &[]),
        2.0
    );
    // The original's count of records left with nothing but collisions.
    assert_eq!(
        metric(
            "millpond_records_skipped_total",
            &[("reason", "variant_companion_collision")]
        ),
        2.0
    );
    assert_eq!(metric("millpond_variant_write_fallback_total", &[]), 0.0);
    let letters = lake.query(
        "SELECT kafka_offset, reason, column_name, decode(original) FROM lake.main.events_dead_letters ORDER BY kafka_offset",
    );
    assert_eq!(
        letters,
        [
            "3|variant_companion_collision|Properties_Variant|sneaky",
            r#"4|variant_companion_collision|NULL|{"properties_variant":"a"}"#,
            r#"5|variant_companion_collision|NULL|{"properties_variant":"b"}"#,
        ]
    );
    writer.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dual_write_embedded() {
    dual_write(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dual_write_postgres_s3() {
    dual_write(Backend::PostgresS3).await;
}

/// An object with an empty key (`{"": 1}`) is valid JSON the pre-scan has
/// no rewrite for, and DuckDB 1.5.5 cannot shred it: written straight to
/// Parquet (more rows than DuckLake inlines), the INSERT fails. The
/// backstop writes the flush again without its companion: every row lands
/// with its text as sent, the companion NULL, nothing lost, and the next
/// clean flush fills the companion again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_that_breaks_shredding_lands_as_text_only() {
    const ROWS: i64 = 50;
    let lake =
        Lake::new(Backend::Embedded, "events").with_env("MILLPOND_VARIANT_COLUMNS", "properties");
    let writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let props = |rows: std::ops::Range<i64>, empty_key: bool| -> Vec<String> {
        rows.map(|i| {
            if empty_key && i == 7 {
                r#"{"": 1, "n": 7}"#.to_string()
            } else {
                format!(r#"{{"n": {i}, "$browser": "Chrome"}}"#)
            }
        })
        .collect()
    };
    let columns = |rows: std::ops::Range<i64>, empty_key: bool| {
        vec![
            (
                "id",
                Arc::new(Int64Array::from_iter_values(rows.clone())) as ArrayRef,
            ),
            (
                "properties",
                Arc::new(StringArray::from(props(rows, empty_key))) as ArrayRef,
            ),
        ]
    };
    let ack = send(&mut c, "f1", columns(0..ROWS, true), 0).await;
    assert_eq!(
        (ack.rows_written, ack.dead_letters_written),
        (ROWS as u64, 0)
    );
    let metric = |name: &str, labels: &[(&str, &str)]| writer.metric(name, labels);
    assert_eq!(metric("millpond_variant_write_fallback_total", &[]), 1.0);
    assert_eq!(
        metric("millpond_errors_total", &[("type", "variant_write")]),
        1.0
    );
    // The next flush shreds again.
    let ack = send(&mut c, "f2", columns(ROWS..2 * ROWS, false), ROWS).await;
    assert_eq!(
        (ack.rows_written, ack.dead_letters_written),
        (ROWS as u64, 0)
    );
    assert_eq!(metric("millpond_variant_write_fallback_total", &[]), 1.0);
    assert_eq!(
        metric("millpond_records_written_total", &[]),
        2.0 * ROWS as f64
    );
    assert_eq!(metric("millpond_dead_letters_total", &[]), 0.0);
    writer.stop();

    // Every row once, its text exactly as sent.
    let sent: Vec<String> = props(0..ROWS, true)
        .into_iter()
        .chain(props(ROWS..2 * ROWS, false))
        .enumerate()
        .map(|(i, p)| format!("{i}|{p}"))
        .collect();
    assert_eq!(
        lake.query("SELECT id, properties FROM lake.main.events ORDER BY id"),
        sent
    );
    // The fallen-back flush has no companion values; the clean one has all.
    assert_eq!(
        lake.query(&format!(
            "SELECT id < {ROWS}, count(*), count(properties_variant), count(properties_variant.\"$browser\") \
             FROM lake.main.events GROUP BY ALL ORDER BY ALL"
        )),
        [format!("false|{ROWS}|{ROWS}|{ROWS}"), format!("true|{ROWS}|0|0")]
    );
}

/// A `{source}_variant` column the table already holds as VARCHAR (written
/// by a writer without MILLPOND_VARIANT_COLUMNS): DuckLake cannot alter it
/// to VARIANT, so the source is left out of dual-write, counted once per
/// flush on `errors_total{type="schema"}`. The text column lands, the old
/// column keeps its values and type, and no value is a dead letter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_companion_that_is_already_not_variant_leaves_the_text_to_land() {
    let lake = Lake::new(Backend::Embedded, "events");
    let plain = Writer::start(&lake);
    let mut c = client(&plain.addr).await;
    let ack = send(
        &mut c,
        "f1",
        vec![
            ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
            (
                "properties_variant",
                Arc::new(StringArray::from(vec!["kept"])) as ArrayRef,
            ),
        ],
        0,
    )
    .await;
    assert_eq!((ack.rows_written, ack.dead_letters_written), (1, 0));
    plain.stop();

    let writer = Writer::start_with(&lake, &[("MILLPOND_VARIANT_COLUMNS", "properties")]);
    let mut c = client(&writer.addr).await;
    let props = [r#"{"$browser": "Chrome"}"#, r#"{"$browser": "Firefox"}"#];
    for (i, first) in [(0, 1), (1, 3)] {
        let ack = send(
            &mut c,
            &format!("g{i}"),
            vec![
                (
                    "id",
                    Arc::new(Int64Array::from(vec![first + 1, first + 2])) as ArrayRef,
                ),
                (
                    "properties",
                    Arc::new(StringArray::from(props.to_vec())) as ArrayRef,
                ),
            ],
            first,
        )
        .await;
        assert_eq!((ack.rows_written, ack.dead_letters_written), (2, 0));
    }
    let metric = |name: &str, labels: &[(&str, &str)]| writer.metric(name, labels);
    assert_eq!(
        metric("millpond_errors_total", &[("type", "schema")]),
        2.0,
        "one per flush that left the source out"
    );
    assert_eq!(metric("millpond_variant_write_fallback_total", &[]), 0.0);
    assert_eq!(metric("millpond_dead_letters_total", &[]), 0.0);
    assert_eq!(metric("millpond_records_written_total", &[]), 4.0);
    writer.stop();

    let types: std::collections::HashMap<String, String> = lake.columns().into_iter().collect();
    assert_eq!(types["properties_variant"], "VARCHAR");
    assert_eq!(
        lake.query("SELECT id, properties, properties_variant FROM lake.main.events ORDER BY id"),
        [
            "1|NULL|kept".to_string(),
            format!("2|{}|NULL", props[0]),
            format!("3|{}|NULL", props[1]),
            format!("4|{}|NULL", props[0]),
            format!("5|{}|NULL", props[1]),
        ]
    );
}
