//! DUCKLAKE_PARTITION_BY through the real writer: every key DuckLake 1.5.5
//! takes (a column's value; year, month, day and hour of a timestamp or a
//! date; bucket of an integer and of a string), each row then read back
//! with the partition values the catalog holds for its data file, against
//! the values the key says, computed here (calendar fields in UTC, Iceberg's
//! murmur3 bucket).
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{Date32Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use chrono::{DateTime, Datelike, NaiveDate, Timelike, Utc};
use millpond_hoglake::murmur3::bucket;
use millpond_proto::OffsetRange;
use millpond_tests::flight::{client, descriptor, put};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::writer::Writer;

const META: &str = "__ducklake_metadata_lake";

/// Every transform, on columns of each type it takes.
const SPEC: &str =
    "year(ts), month(ts), day(ts), hour(ts), day(d), bucket(4, id), bucket(3, name), kind";

struct Row {
    id: i64,
    name: String,
    kind: Option<&'static str>,
    ts: Option<DateTime<Utc>>,
    d: Option<NaiveDate>,
}

/// 96 rows across years, months, days and hours, the edges of each (new
/// year, leap day, before 1970, NULLs); rows 24 apart share every key but
/// the bucket of their id.
fn known_rows() -> Vec<Row> {
    let moments = [
        (1969, 12, 31, 23, 59),
        (1970, 1, 1, 0, 0),
        (1999, 12, 31, 23, 59),
        (2000, 1, 1, 0, 0),
        (2024, 2, 29, 12, 30),
        (2026, 3, 23, 21, 15),
        (2026, 3, 23, 21, 45),
        (2026, 11, 5, 7, 0),
    ];
    (0..96)
        .map(|i| {
            let (y, mo, d, h, mi) = moments[i % moments.len()];
            let date = NaiveDate::from_ymd_opt(y, mo, d).unwrap();
            let ts = date.and_hms_opt(h, mi, 0).unwrap().and_utc();
            Row {
                id: i as i64 * 7 - 20,
                name: format!("name-{}", i % 3),
                kind: [Some("alpha"), Some("beta"), None][i % 3],
                ts: (i % 13 != 5).then_some(ts),
                d: (i % 17 != 3).then(|| date - chrono::Days::new(i as u64 % 2)),
            }
        })
        .collect()
}

fn batch(rows: &[Row]) -> RecordBatch {
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("kind", DataType::Utf8, true),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("d", DataType::Date32, true),
        ])),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.id))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.name))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.kind))),
            Arc::new(
                TimestampMicrosecondArray::from_iter(
                    rows.iter().map(|r| r.ts.map(|t| t.timestamp_micros())),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(Date32Array::from_iter(
                rows.iter()
                    .map(|r| r.d.map(|d| (d - epoch).num_days() as i32)),
            )),
        ],
    )
    .unwrap()
}

/// The partition values SPEC gives a row, as the catalog writes them.
fn expected(r: &Row) -> String {
    let field = |v: Option<u32>| v.map_or("NULL".into(), |v| v.to_string());
    let ts = r.ts;
    [
        ts.map_or("NULL".into(), |t| t.year().to_string()),
        field(ts.map(|t| t.month())),
        field(ts.map(|t| t.day())),
        field(ts.map(|t| t.hour())),
        field(r.d.map(|d| d.day())),
        bucket(&r.id.to_le_bytes(), 4).to_string(),
        bucket(r.name.as_bytes(), 3).to_string(),
        r.kind.unwrap_or("NULL").to_owned(),
    ]
    .join("|")
}

async fn rows_land_in_the_partitions_the_keys_say(backend: Backend) {
    let lake = Lake::new(backend, "events");
    // Not UTC: the partition of an instant must not follow the pod's zone.
    let writer = Writer::start_with(
        &lake,
        &[("DUCKLAKE_PARTITION_BY", SPEC), ("TZ", "America/New_York")],
    );
    let rows = known_rows();
    let mut c = client(&writer.addr).await;
    for (n, half) in rows.chunks(48).enumerate() {
        let first = (n * 48) as i64;
        let range = OffsetRange::new("events", 0, first, first + 47);
        put(
            &mut c,
            &descriptor(&format!("p{n}"), vec![range], 48),
            vec![batch(half)],
        )
        .await
        .unwrap();
    }
    writer.stop();

    let spec = lake.query(&format!(
        "SELECT pc.transform, c.column_name FROM {META}.ducklake_partition_column pc \
         JOIN {META}.ducklake_partition_info pi USING (partition_id, table_id) \
         JOIN {META}.ducklake_column c ON c.table_id = pc.table_id AND c.column_id = pc.column_id \
         WHERE pi.end_snapshot IS NULL AND c.end_snapshot IS NULL ORDER BY pc.partition_key_index"
    ));
    assert_eq!(
        spec,
        [
            "year|ts",
            "month|ts",
            "day|ts",
            "hour|ts",
            "day|d",
            "bucket(4)|id",
            "bucket(3)|name",
            "identity|kind"
        ]
    );

    // Each data file's partition values, by its path within the table.
    let values: HashMap<String, String> = lake
        .query(&format!(
            "SELECT df.path, string_agg(coalesce(pv.partition_value, 'NULL'), '|' \
               ORDER BY pv.partition_key_index) \
             FROM {META}.ducklake_data_file df \
             JOIN {META}.ducklake_file_partition_value pv USING (data_file_id) \
             WHERE df.end_snapshot IS NULL GROUP BY df.path"
        ))
        .into_iter()
        .map(|l| {
            let (path, vals) = l.split_once('|').unwrap();
            (path.to_owned(), vals.to_owned())
        })
        .collect();
    let by_id: HashMap<i64, &Row> = rows.iter().map(|r| (r.id, r)).collect();
    let located = lake.query("SELECT id, filename FROM lake.main.events ORDER BY id");
    assert_eq!(located.len(), rows.len(), "every row read back once");
    for line in &located {
        let (id, file) = line.split_once('|').unwrap();
        let row = by_id[&id.parse::<i64>().unwrap()];
        let (_, got) = values
            .iter()
            .find(|(path, _)| file.ends_with(&format!("/{path}")))
            .unwrap_or_else(|| panic!("row {id}: {file} has no partition values"));
        assert_eq!(*got, expected(row), "row {id} in {file}");
    }
    // Rows with the same values share a file: one file per distinct tuple
    // of each flush (each flush is one insert).
    let tuples: usize = rows
        .chunks(48)
        .map(|half| half.iter().map(expected).collect::<BTreeSet<_>>().len())
        .sum();
    assert_eq!(values.len(), tuples);
    assert!(
        values.len() < rows.len(),
        "some rows share every key, so some files hold several rows"
    );
}

/// `year` of a number is taken by DuckLake and then fails every insert: the
/// writer refuses it before, naming the variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calendar_key_on_a_number_is_refused_naming_the_variable() {
    let lake = Lake::new(Backend::Embedded, "events");
    let writer = Writer::start_with(&lake, &[("DUCKLAKE_PARTITION_BY", "year(id)")]);
    let mut c = client(&writer.addr).await;
    let rows = &known_rows()[..12];
    let range = OffsetRange::new("events", 0, 0, 11);
    let err = put(
        &mut c,
        &descriptor("y1", vec![range], 12),
        vec![batch(rows)],
    )
    .await
    .unwrap_err();
    assert!(
        err.message()
            .contains("DUCKLAKE_PARTITION_BY: year(id) needs a DATE or TIMESTAMP column"),
        "{err:?}"
    );
    writer.stop();
    assert_eq!(lake.count(), 0);
}

/// A key whose column the table lacks fails the flush (naming the
/// variable); once a flush brings the column, the table is partitioned
/// and that flush's rows land in their partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioning_applies_once_its_column_arrives() {
    let lake = Lake::new(Backend::Embedded, "events");
    let writer = Writer::start_with(&lake, &[("DUCKLAKE_PARTITION_BY", "kind")]);
    let mut c = client(&writer.addr).await;
    let rows = known_rows();
    let without_kind = batch(&rows[..12]).project(&[0, 1]).unwrap();
    let range = |a, b| OffsetRange::new("events", 0, a, b);
    let err = put(
        &mut c,
        &descriptor("k1", vec![range(0, 11)], 12),
        vec![without_kind],
    )
    .await
    .unwrap_err();
    assert!(
        err.message()
            .contains("applying DUCKLAKE_PARTITION_BY (kind)"),
        "{err:?}"
    );
    put(
        &mut c,
        &descriptor("k2", vec![range(0, 23)], 24),
        vec![batch(&rows[..24])],
    )
    .await
    .unwrap();
    // The writer exits with a failure for the flush it could not write.
    let mut writer = writer;
    writer.proc.signal("TERM");
    let status = writer.proc.wait_exit(std::time::Duration::from_secs(30));
    assert!(!status.success(), "{}", writer.proc.logs());
    let mut got = lake.query(&format!(
        "SELECT DISTINCT coalesce(pv.partition_value, 'NULL') FROM {META}.ducklake_data_file df \
         JOIN {META}.ducklake_file_partition_value pv USING (data_file_id) \
         WHERE df.end_snapshot IS NULL"
    ));
    got.sort();
    assert_eq!(got, ["NULL", "alpha", "beta"]);
    assert_eq!(
        lake.query("SELECT count(*), count(DISTINCT filename) FROM lake.main.events"),
        ["24|3"]
    );
}

mod embedded {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rows_land_in_the_partitions_the_keys_say() {
        super::rows_land_in_the_partitions_the_keys_say(super::Backend::Embedded).await
    }
}

mod postgres_s3 {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rows_land_in_the_partitions_the_keys_say() {
        super::rows_land_in_the_partitions_the_keys_say(super::Backend::PostgresS3).await
    }
}
