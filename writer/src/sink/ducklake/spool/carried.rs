//! What the writer's Parquet files carry: the Arrow types that map exactly
//! to the table's DuckDB types, the table's columns as a file's fields, and
//! the codec of the table's `parquet_compression`.
use arrow::datatypes::{DataType, Field, TimeUnit};
use parquet::basic::Compression;

/// The column every row carries: when its flush was written.
pub const INSERTED_AT: &str = "_inserted_at";

/// Arrow types whose Parquet form DuckLake maps to the DuckDB type
/// `types::duck_type` names (measured by registering files: a file's BIGINT
/// is not accepted for a DOUBLE column, so the types must match exactly).
pub fn fits_a_file(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Boolean
            | DataType::Int64
            | DataType::Float64
            | DataType::Utf8
            | DataType::LargeUtf8
    ) || matches!(dt, DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if tz.as_ref() == "UTC")
}

/// The table's columns (lowercase name, DuckDB type) a file carries, by
/// name: all but `_inserted_at` (a file's own) and those of a type no file
/// carries.
pub fn file_fields(table: &std::collections::HashMap<String, String>) -> Vec<Field> {
    let mut fields: Vec<Field> = table
        .iter()
        .filter(|(name, _)| name.as_str() != INSERTED_AT)
        .filter_map(|(name, t)| arrow_type(t).map(|dt| Field::new(name, dt, true)))
        .collect();
    fields.sort_by(|a, b| a.name().cmp(b.name()));
    fields
}

/// Why files cannot hold the table's rows: a column of a type no file
/// carries (VARIANT, or a pinned UUID, DECIMAL, DATE). A file lacking it
/// would leave DuckLake's record of its NULLs untouched (`spool::fill`).
pub fn uncarried(table: &std::collections::HashMap<String, String>) -> Option<String> {
    let mut cols: Vec<(&String, &String)> = table
        .iter()
        .filter(|(name, t)| name.as_str() != INSERTED_AT && arrow_type(t).is_none())
        .collect();
    cols.sort();
    cols.first().map(|(c, t)| {
        format!("the table has a {t} column ({c}), which the writer's files cannot carry")
    })
}

/// The codec for DuckLake's `parquet_compression` option (and its
/// `parquet_compression_level`), as DuckDB would write the table's files;
/// unset, LZ4_RAW (measured: the cheapest to write at the size of DuckDB's
/// default snappy). `Err` for a codec this build cannot write.
pub fn codec(option: Option<&str>, level: Option<i32>) -> Result<Compression, String> {
    use parquet::basic::ZstdLevel;
    Ok(match option.map(str::to_ascii_lowercase).as_deref() {
        None | Some("lz4") | Some("lz4_raw") => Compression::LZ4_RAW,
        Some("snappy") => Compression::SNAPPY,
        Some("uncompressed") => Compression::UNCOMPRESSED,
        Some("zstd") => Compression::ZSTD(
            ZstdLevel::try_new(level.unwrap_or(3)).map_err(|e| format!("zstd level: {e}"))?,
        ),
        Some(other) => {
            return Err(format!(
                "parquet_compression {other} is not one the writer's files support"
            ))
        }
    })
}

/// The Arrow type a file carries for a live DuckDB type, for the types
/// [`fits_a_file`] accepts.
pub fn arrow_type(live: &str) -> Option<DataType> {
    Some(match live {
        "BOOLEAN" => DataType::Boolean,
        "BIGINT" => DataType::Int64,
        "DOUBLE" => DataType::Float64,
        "VARCHAR" => DataType::Utf8,
        "TIMESTAMP WITH TIME ZONE" => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        _ => return None,
    })
}
