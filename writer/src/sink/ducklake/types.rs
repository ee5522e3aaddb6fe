//! Arrow types as DuckDB column types, and which changes count as widening.
use arrow::datatypes::{DataType, TimeUnit};

/// The DuckDB column type for an Arrow type, spelled as DuckDB reports it in
/// information_schema, so live and batch types compare as strings.
pub fn duck_type(dt: &DataType) -> String {
    match dt {
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INTEGER".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::UInt8 => "UTINYINT".into(),
        DataType::UInt16 => "USMALLINT".into(),
        DataType::UInt32 => "UINTEGER".into(),
        DataType::UInt64 => "UBIGINT".into(),
        DataType::Float16 | DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "BLOB".into(),
        DataType::FixedSizeBinary(16) => "UUID".into(),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP WITH TIME ZONE".into(),
        DataType::Timestamp(TimeUnit::Second, None) => "TIMESTAMP_S".into(),
        DataType::Timestamp(TimeUnit::Millisecond, None) => "TIMESTAMP_MS".into(),
        DataType::Timestamp(TimeUnit::Nanosecond, None) => "TIMESTAMP_NS".into(),
        DataType::Timestamp(TimeUnit::Microsecond, None) => "TIMESTAMP".into(),
        DataType::Decimal128(p, s) => format!("DECIMAL({p},{s})"),
        DataType::List(_) | DataType::Struct(_) | DataType::Map(_, _) => "JSON".into(),
        _ => "VARCHAR".into(),
    }
}

/// Normalises a type name read back from the catalog.
pub fn normalize(live: &str) -> String {
    let up = live.trim().to_ascii_uppercase();
    match up.as_str() {
        "TIMESTAMPTZ" => "TIMESTAMP WITH TIME ZONE".into(),
        "INT" | "INT4" => "INTEGER".into(),
        "INT8" | "LONG" => "BIGINT".into(),
        "REAL" | "FLOAT4" => "FLOAT".into(),
        "FLOAT8" => "DOUBLE".into(),
        "STRING" | "TEXT" => "VARCHAR".into(),
        _ => up,
    }
}

fn rank(family: &[&str], t: &str) -> Option<usize> {
    family.iter().position(|x| *x == t)
}

/// True when altering a column from `live` to `batch` keeps every value
/// (the promotions DuckLake supports).
pub fn is_widening(live: &str, batch: &str) -> bool {
    const FAMILIES: [&[&str]; 3] = [
        &["TINYINT", "SMALLINT", "INTEGER", "BIGINT"],
        &["UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"],
        &["FLOAT", "DOUBLE"],
    ];
    FAMILIES
        .iter()
        .any(|f| match (rank(f, live), rank(f, batch)) {
            (Some(a), Some(b)) => b > a,
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_only_within_a_family() {
        assert!(is_widening("INTEGER", "BIGINT"));
        assert!(is_widening("FLOAT", "DOUBLE"));
        assert!(!is_widening("BIGINT", "INTEGER"), "narrowing");
        assert!(!is_widening("BIGINT", "DOUBLE"), "cross family");
        assert!(!is_widening("BIGINT", "VARCHAR"));
        assert_eq!(normalize("timestamptz"), "TIMESTAMP WITH TIME ZONE");
        assert_eq!(duck_type(&DataType::Int64), "BIGINT");
    }
}
