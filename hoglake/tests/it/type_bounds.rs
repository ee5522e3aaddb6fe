//! Every scalar hoglake type through the whole path: catalog column -> Arrow
//! -> parquet written here -> footer statistics -> Iceberg bound bytes. The
//! expected bytes are spelled out per type from hoglake-api.md §6.1, so a
//! wrong width, unit, byte order or signedness fails here. (The captured
//! pyhoglake vectors only cover long, string, timestamp, decimal, double and
//! list<string>; they are checked in wire_parity.rs.)

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, FixedSizeBinaryArray,
    Float32Array, Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, MapBuilder,
    RecordBatch, StringArray, StringBuilder, StructArray, Time64MicrosecondArray,
    TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray, UInt16Array,
    UInt64Array, UInt8Array,
};
use arrow::datatypes::{DataType, Field};
use base64::Engine;
use millpond_hoglake::arrow_schema::{arrow_schema, conform};
use millpond_hoglake::bounds::minimal_be;
use millpond_hoglake::parquet_file::write_parquet;
use millpond_hoglake::schema::Column;
use millpond_hoglake::stats::{column_stats, ColumnStats};
use parquet::basic::{LogicalType, Type as PhysicalType};

const UUID_LO: [u8; 16] = [0x0f; 16];
const UUID_HI: [u8; 16] = [
    0xf7, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd, 0xa4, 0x79, 0x3f, 0x34, 0x9c, 0xb7, 0x85, 0xe7,
];

/// `(name, type, type_params)`: one nullable column each, field ids 1.. in
/// this order; then a struct (ids 23, 24) and a map (ids 25, 26, 27).
const SCALARS: [(&str, &str, &str); 22] = [
    ("b", "boolean", ""),
    ("i8", "int8", ""),
    ("i16", "int16", ""),
    ("i32", "int", ""),
    ("i64", "long", ""),
    ("u8", "uint8", ""),
    ("u16", "uint16", ""),
    ("u32", "uint32", ""),
    ("u64", "uint64", ""),
    ("f32", "float", ""),
    ("f64", "double", ""),
    (
        "dec_small",
        "decimal",
        r#","type_params":{"precision":5,"scale":2}"#,
    ),
    (
        "dec_wide",
        "decimal",
        r#","type_params":{"precision":20,"scale":4}"#,
    ),
    ("d", "date", ""),
    ("t", "time", ""),
    ("ts_s", "timestamp_s", ""),
    ("ts_ms", "timestamp_ms", ""),
    ("ts", "timestamp", ""),
    ("ts_ns", "timestamp_ns", ""),
    ("tstz", "timestamptz", ""),
    ("s", "string", ""),
    ("j", "json", ""),
];

fn columns() -> Vec<Column> {
    let mut json: Vec<String> = SCALARS
        .iter()
        .enumerate()
        .map(|(i, (name, t, params))| {
            format!(
                r#"{{"name":"{name}","type":"{t}","field_id":{},"ordinal":{i}{params}}}"#,
                i + 1
            )
        })
        .collect();
    json.push(r#"{"name":"u","type":"uuid","field_id":30,"ordinal":22}"#.into());
    json.push(r#"{"name":"bin","type":"binary","field_id":31,"ordinal":23}"#.into());
    json.push(
        r#"{"name":"st","type":"struct","field_id":23,"ordinal":24,"children":[
            {"name":"a","type":"int","field_id":24,"ordinal":0}]}"#
            .into(),
    );
    json.push(
        r#"{"name":"m","type":"map","field_id":25,"ordinal":25,"children":[
            {"name":"key","type":"string","nullable":false,"field_id":26,"ordinal":0},
            {"name":"value","type":"long","field_id":27,"ordinal":1}]}"#
            .into(),
    );
    serde_json::from_str(&format!("[{}]", json.join(","))).unwrap()
}

/// Three rows per column: the low value, the high value, null.
fn batch() -> RecordBatch {
    let dec = |p, s, lo, hi| -> ArrayRef {
        Arc::new(
            Decimal128Array::from(vec![Some(lo), Some(hi), None])
                .with_precision_and_scale(p, s)
                .unwrap(),
        )
    };
    let st = StructArray::new(
        vec![Field::new("a", DataType::Int32, true)].into(),
        vec![Arc::new(Int32Array::from(vec![Some(-3), Some(9), None])) as ArrayRef],
        None,
    );
    let mut map = MapBuilder::new(
        None,
        StringBuilder::new(),
        arrow::array::Int64Builder::new(),
    );
    map.keys().append_value("k1");
    map.values().append_value(100);
    map.append(true).unwrap();
    map.keys().append_value("k0");
    map.values().append_value(-100);
    map.keys().append_value("k2");
    map.values().append_null();
    map.append(true).unwrap();
    map.append(false).unwrap();
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "b",
            Arc::new(BooleanArray::from(vec![Some(false), Some(true), None])),
        ),
        (
            "i8",
            Arc::new(Int8Array::from(vec![Some(-5), Some(7), None])),
        ),
        (
            "i16",
            Arc::new(Int16Array::from(vec![Some(-300), Some(300), None])),
        ),
        (
            "i32",
            Arc::new(Int32Array::from(vec![Some(-70_000), Some(70_000), None])),
        ),
        (
            "i64",
            Arc::new(Int64Array::from(vec![
                Some(-(1 << 40)),
                Some(1 << 40),
                None,
            ])),
        ),
        (
            "u8",
            Arc::new(UInt8Array::from(vec![Some(1), Some(250), None])),
        ),
        (
            "u16",
            Arc::new(UInt16Array::from(vec![Some(1), Some(65_000), None])),
        ),
        (
            "u32",
            Arc::new(Int64Array::from(vec![Some(1), Some(4_000_000_000), None])),
        ),
        (
            "u64",
            Arc::new(UInt64Array::from(vec![Some(1), Some(u64::MAX), None])),
        ),
        (
            "f32",
            Arc::new(Float32Array::from(vec![Some(-1.5), Some(2.25), None])),
        ),
        (
            "f64",
            Arc::new(Float64Array::from(vec![Some(-1e300), Some(0.0), None])),
        ),
        ("dec_small", dec(5, 2, -12_345, 99_999)),
        ("dec_wide", dec(20, 4, -(1i128 << 65), 1i128 << 64)),
        (
            "d",
            Arc::new(Date32Array::from(vec![Some(-1), Some(20_458), None])),
        ),
        (
            "t",
            Arc::new(Time64MicrosecondArray::from(vec![
                Some(0),
                Some(86_399_999_999),
                None,
            ])),
        ),
        (
            "ts_s",
            Arc::new(TimestampMillisecondArray::from(vec![
                Some(1_000),
                Some(2_000),
                None,
            ])),
        ),
        (
            "ts_ms",
            Arc::new(TimestampMillisecondArray::from(vec![
                Some(-1),
                Some(2),
                None,
            ])),
        ),
        (
            "ts",
            Arc::new(TimestampMicrosecondArray::from(vec![
                Some(-7),
                Some(1_767_614_400_000_000),
                None,
            ])),
        ),
        (
            "ts_ns",
            Arc::new(TimestampNanosecondArray::from(vec![Some(1), Some(5), None])),
        ),
        (
            "tstz",
            Arc::new(
                TimestampMicrosecondArray::from(vec![Some(3), Some(4), None]).with_timezone("UTC"),
            ),
        ),
        (
            "s",
            Arc::new(StringArray::from(vec![Some("a"), Some("zz"), None])),
        ),
        (
            "j",
            Arc::new(StringArray::from(vec![Some("{}"), Some("[1]"), None])),
        ),
        (
            "u",
            Arc::new(
                FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                    [Some(UUID_HI), Some(UUID_LO), None].into_iter(),
                    16,
                )
                .unwrap(),
            ),
        ),
        (
            "bin",
            Arc::new(BinaryArray::from(vec![
                Some(&[0u8, 0xff][..]),
                Some(&[1u8][..]),
                None,
            ])),
        ),
        ("st", Arc::new(st)),
        ("m", Arc::new(map.finish())),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `(field_id, value_count, null_count, lower bytes, upper bytes)`.
type Expected = (i64, i64, i64, Vec<u8>, Vec<u8>);

fn expected() -> Vec<Expected> {
    let le4 = |v: i32| v.to_le_bytes().to_vec();
    let le8 = |v: i64| v.to_le_bytes().to_vec();
    vec![
        (1, 3, 1, vec![0], vec![1]),
        (2, 3, 1, le4(-5), le4(7)),
        (3, 3, 1, le4(-300), le4(300)),
        (4, 3, 1, le4(-70_000), le4(70_000)),
        (5, 3, 1, le8(-(1 << 40)), le8(1 << 40)),
        (6, 3, 1, le4(1), le4(250)),
        (7, 3, 1, le4(1), le4(65_000)),
        (8, 3, 1, le8(1), le8(4_000_000_000)),
        // uint64 as decimal(20,0): 2^64-1 keeps a leading zero byte.
        (9, 3, 1, vec![1], [vec![0], vec![0xff; 8]].concat()),
        (
            10,
            3,
            1,
            (-1.5f32).to_le_bytes().to_vec(),
            2.25f32.to_le_bytes().to_vec(),
        ),
        // An upper zero is +0.0.
        (
            11,
            3,
            1,
            (-1e300f64).to_le_bytes().to_vec(),
            0.0f64.to_le_bytes().to_vec(),
        ),
        (12, 3, 1, vec![0xcf, 0xc7], vec![0x01, 0x86, 0x9f]),
        (
            13,
            3,
            1,
            minimal_be(-(1i128 << 65)),
            minimal_be(1i128 << 64),
        ),
        (14, 3, 1, le4(-1), le4(20_458)),
        (15, 3, 1, le8(0), le8(86_399_999_999)),
        // timestamp_s / timestamp_ms files hold ms; bounds are µs.
        (16, 3, 1, le8(1_000_000), le8(2_000_000)),
        (17, 3, 1, le8(-1_000), le8(2_000)),
        (18, 3, 1, le8(-7), le8(1_767_614_400_000_000)),
        // timestamp_ns bounds stay in ns.
        (19, 3, 1, le8(1), le8(5)),
        (20, 3, 1, le8(3), le8(4)),
        (21, 3, 1, b"a".to_vec(), b"zz".to_vec()),
        (22, 3, 1, b"[1]".to_vec(), b"{}".to_vec()),
        (30, 3, 1, UUID_LO.to_vec(), UUID_HI.to_vec()),
        (31, 3, 1, vec![0, 0xff], vec![1]),
        (24, 3, 1, le4(-3), le4(9)),
        // Map leaves count entries plus one slot for the null map.
        (26, 4, 1, b"k0".to_vec(), b"k2".to_vec()),
        (27, 4, 2, le8(-100), le8(100)),
    ]
}

#[test]
fn every_scalar_type_encodes_its_bounds() {
    let columns = columns();
    let schema = Arc::new(arrow_schema(&columns).unwrap());
    let file = write_parquet(&schema, &[conform(&batch(), &schema).unwrap()]).unwrap();
    let stats = column_stats(&file.metadata, &columns);
    let ours: Vec<ColumnStats> = stats
        .into_iter()
        .map(|s| ColumnStats {
            size_bytes: None,
            ..s
        })
        .collect();
    let want: Vec<ColumnStats> = expected()
        .into_iter()
        .map(|(field_id, value_count, null_count, lo, hi)| ColumnStats {
            field_id,
            value_count,
            null_count,
            nan_count: None,
            size_bytes: None,
            lower_bound: Some(b64(&lo)),
            upper_bound: Some(b64(&hi)),
        })
        .collect();
    assert_eq!(ours, want);
}

#[test]
fn parquet_annotations_follow_the_writer_contract() {
    let columns = columns();
    let schema = Arc::new(arrow_schema(&columns).unwrap());
    let file = write_parquet(&schema, &[conform(&batch(), &schema).unwrap()]).unwrap();
    let descr = file.metadata.file_metadata().schema_descr();
    let leaf = |path: &str| {
        descr
            .columns()
            .iter()
            .find(|c| c.path().string() == path)
            .unwrap_or_else(|| panic!("no leaf {path}"))
            .clone()
    };
    let u = leaf("u");
    assert_eq!(
        (u.physical_type(), u.type_length()),
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, 16)
    );
    assert_eq!(u.logical_type_ref(), Some(&LogicalType::Uuid));
    assert_eq!(leaf("j").logical_type_ref(), Some(&LogicalType::Json));
    assert_eq!(leaf("u32").physical_type(), PhysicalType::INT64);
    assert_eq!(leaf("u32").logical_type_ref(), None);
    assert_eq!(
        leaf("u64").logical_type_ref(),
        Some(&LogicalType::Integer {
            bit_width: 64,
            is_signed: false
        })
    );
    let tstz = leaf("tstz");
    assert!(matches!(
        tstz.logical_type_ref(),
        Some(LogicalType::Timestamp {
            is_adjusted_to_u_t_c: true,
            ..
        })
    ));
    let ts = leaf("ts");
    assert!(matches!(
        ts.logical_type_ref(),
        Some(LogicalType::Timestamp {
            is_adjusted_to_u_t_c: false,
            ..
        })
    ));
    for (path, len) in [("dec_small", 3), ("dec_wide", 9)] {
        let d = leaf(path);
        assert_eq!(
            (d.physical_type(), d.type_length()),
            (PhysicalType::FIXED_LEN_BYTE_ARRAY, len),
            "{path}"
        );
    }
    // Field ids on every node, synthetic map group excepted.
    assert_eq!(
        leaf("m.key_value.key").self_type().get_basic_info().id(),
        26
    );
    assert_eq!(leaf("st.a").self_type().get_basic_info().id(), 24);
    let root = descr.root_schema().get_fields();
    let m = root.iter().find(|f| f.name() == "m").unwrap();
    assert_eq!(m.get_basic_info().id(), 25);
    assert!(!m.get_fields()[0].get_basic_info().has_id());
    // And every value reads back as written.
    let back: Vec<RecordBatch> =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file.bytes.clone())
            .unwrap()
            .build()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
    assert_eq!(
        conform(&back[0], &schema).unwrap(),
        conform(&batch(), &schema).unwrap()
    );
}
