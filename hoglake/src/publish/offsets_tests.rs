use super::*;

fn file(values: Vec<Option<&str>>) -> DataFile {
    DataFile {
        data_file_id: 1,
        path: "s3://lake/o.parquet".into(),
        record_count: 1,
        file_size_bytes: 10,
        stats_state: None,
        begin_snapshot: Some(3),
        partition_values: Some(values.into_iter().map(|v| v.map(String::from)).collect()),
    }
}

#[test]
fn a_head_is_read_from_the_partition_values_with_its_last_record() {
    let f = file(vec![
        Some("events#2"),
        Some("100"),
        Some("199"),
        Some("1700000000000"),
        Some("-2"),
        Some("flush-7"),
        Some("u1"),
    ]);
    let head = Head::of("o", 4, &f).unwrap();
    assert_eq!(
        (head.flush_id.as_str(), head.table_uuid.as_str()),
        ("flush-7", "u1")
    );
    assert_eq!(
        head.range,
        OffsetRange::new("events#2", 4, 100, 199).with_last_record(Some(LastRecord {
            timestamp_ms: Some(1_700_000_000_000),
            // The checksum's 64 bits, stored as a signed long.
            checksum: u64::MAX - 1,
        }))
    );
    let bare = file(vec![
        Some("t"),
        Some("0"),
        Some("9"),
        None,
        None,
        Some("f"),
        Some("u"),
    ]);
    assert_eq!(
        Head::of("o", 0, &bare).unwrap().range,
        OffsetRange::new("t", 0, 0, 9)
    );
}

#[test]
fn a_file_that_does_not_name_a_range_is_refused() {
    assert!(Head::of("o", 0, &file(vec![Some("t"), Some("0")])).is_err());
    let not_a_number = file(vec![
        Some("t"),
        Some("x"),
        Some("9"),
        None,
        None,
        Some("f"),
        Some("u"),
    ]);
    assert!(Head::of("o", 0, &not_a_number).is_err());
    let no_range = file(vec![
        Some("t"),
        None,
        Some("9"),
        None,
        None,
        Some("f"),
        Some("u"),
    ]);
    assert!(Head::of("o", 0, &no_range).is_err());
}

#[test]
fn the_row_carries_the_checksum_bits_and_a_missing_timestamp_as_null() {
    let range = OffsetRange::new("t", 3, 5, 8).with_last_record(Some(LastRecord {
        timestamp_ms: None,
        checksum: u64::MAX,
    }));
    let row = offsets_row(&range, ("f1", "u1"));
    assert_eq!(row.num_rows(), 1);
    let ts = row.column_by_name("last_timestamp_ms").unwrap();
    assert!(ts.is_null(0));
    let ck = row
        .column_by_name("last_checksum")
        .unwrap()
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    assert_eq!(ck.value(0), -1);
}

#[test]
fn offsets_table_names_stay_within_hoglakes_limit() {
    assert_eq!(offsets_table("events", 12), "_millpond_offsets_events_12");
    let long = "e".repeat(120);
    let name = offsets_table(&long, i32::MAX);
    assert!(name.len() <= MAX_NAME_CHARS, "{name}");
    assert!(name.starts_with(OFFSETS_TABLE_PREFIX));
    assert_ne!(
        offsets_table_prefix(&long),
        offsets_table_prefix(&"f".repeat(120)),
        "each long name its own tables"
    );
    // Exactly at the limit: the name is kept.
    let edge = "e".repeat(MAX_NAME_CHARS - OFFSETS_TABLE_PREFIX.len() - 11);
    assert_eq!(
        offsets_table(&edge, 0),
        format!("{OFFSETS_TABLE_PREFIX}{edge}_0")
    );
}
