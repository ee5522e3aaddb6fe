//! Table definitions as the hoglake catalog sends and takes them: columns with
//! field ids, the 27 column types, partition and sort specs.
//!
//! Responses omit null fields, so every optional field here is skipped when
//! absent. Unknown response fields are ignored (servers add fields over
//! time); request shapes are built only from the fields defined here.

use serde::{Deserialize, Deserializer, Serialize};

/// The 27 hoglake column type names. The server reads them
/// case-insensitively; we always send the lower-case spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnType {
    Boolean,
    Int8,
    Int16,
    Int,
    Long,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Float,
    Double,
    Decimal,
    Date,
    Time,
    TimestampS,
    TimestampMs,
    Timestamp,
    TimestampNs,
    Timestamptz,
    String,
    Json,
    Uuid,
    Binary,
    Variant,
    List,
    Struct,
    Map,
}

impl ColumnType {
    pub const ALL: [ColumnType; 27] = [
        Self::Boolean,
        Self::Int8,
        Self::Int16,
        Self::Int,
        Self::Long,
        Self::Uint8,
        Self::Uint16,
        Self::Uint32,
        Self::Uint64,
        Self::Float,
        Self::Double,
        Self::Decimal,
        Self::Date,
        Self::Time,
        Self::TimestampS,
        Self::TimestampMs,
        Self::Timestamp,
        Self::TimestampNs,
        Self::Timestamptz,
        Self::String,
        Self::Json,
        Self::Uuid,
        Self::Binary,
        Self::Variant,
        Self::List,
        Self::Struct,
        Self::Map,
    ];

    /// The wire name (`timestamp_ns`, `uint64`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Self::Boolean => "boolean",
            Self::Int8 => "int8",
            Self::Int16 => "int16",
            Self::Int => "int",
            Self::Long => "long",
            Self::Uint8 => "uint8",
            Self::Uint16 => "uint16",
            Self::Uint32 => "uint32",
            Self::Uint64 => "uint64",
            Self::Float => "float",
            Self::Double => "double",
            Self::Decimal => "decimal",
            Self::Date => "date",
            Self::Time => "time",
            Self::TimestampS => "timestamp_s",
            Self::TimestampMs => "timestamp_ms",
            Self::Timestamp => "timestamp",
            Self::TimestampNs => "timestamp_ns",
            Self::Timestamptz => "timestamptz",
            Self::String => "string",
            Self::Json => "json",
            Self::Uuid => "uuid",
            Self::Binary => "binary",
            Self::Variant => "variant",
            Self::List => "list",
            Self::Struct => "struct",
            Self::Map => "map",
        }
    }

    /// Parses a wire name, case-insensitively like the server.
    pub fn parse(name: &str) -> Option<Self> {
        let lower = name.to_ascii_lowercase();
        Self::ALL.into_iter().find(|t| t.name() == lower)
    }

    pub fn is_container(self) -> bool {
        matches!(self, Self::List | Self::Struct | Self::Map)
    }
}

impl<'de> Deserialize<'de> for ColumnType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::string::String::deserialize(d)?;
        Self::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown hoglake type `{name}`")))
    }
}

impl std::fmt::Display for ColumnType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `type_params`: decimal precision/scale, or a variant's shredding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TypeParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<i8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shredding: Option<serde_json::Value>,
}

fn default_nullable() -> bool {
    true
}

/// A column of a create-table request or an `add_column` op (no field id yet).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    #[serde(rename = "type")]
    pub column_type: ColumnType,
    #[serde(default = "default_nullable")]
    pub nullable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_params: Option<TypeParams>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<ColumnDef>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A column of a table the server returned: a [`ColumnDef`] plus its field id
/// and its position among its siblings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub column_type: ColumnType,
    #[serde(default = "default_nullable")]
    pub nullable: bool,
    pub field_id: i64,
    pub ordinal: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_params: Option<TypeParams>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<Column>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl Column {
    /// Children in ordinal order (empty for scalars).
    pub fn ordered_children(&self) -> Vec<&Column> {
        ordered(self.children.as_deref().unwrap_or_default())
    }

    /// The `(precision, scale)` of a decimal column.
    pub fn decimal_params(&self) -> Option<(u8, i8)> {
        let p = self.type_params.as_ref()?;
        Some((p.precision?, p.scale.unwrap_or(0)))
    }
}

/// Columns sorted by `ordinal`, the order files must follow.
pub fn ordered(columns: &[Column]) -> Vec<&Column> {
    let mut out: Vec<&Column> = columns.iter().collect();
    out.sort_by_key(|c| c.ordinal);
    out
}

/// The Table object (`GET …/tables/{t}`, create and alter responses).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub name: String,
    pub namespace: String,
    pub table_uuid: String,
    pub columns: Vec<Column>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_snapshot_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_spec: Option<PartitionSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort_spec: Option<SortSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// A live partition spec; `fields` order is the partition tuple order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionSpec {
    pub spec_id: i64,
    pub fields: Vec<PartitionField>,
}

/// One partition field as the wire carries it; see
/// [`crate::partition::Transform`] for the checked form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionField {
    pub source_field_id: i64,
    pub transform: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform_param: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SortSpec {
    pub sort_id: i64,
    pub fields: Vec<SortField>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SortField {
    pub source_field_id: i64,
    /// `asc` or `desc`.
    pub direction: String,
    /// `nulls_first` or `nulls_last`.
    pub null_order: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_round_trip_and_parse_case_insensitively() {
        for t in ColumnType::ALL {
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.name()));
            assert_eq!(serde_json::from_str::<ColumnType>(&json).unwrap(), t);
            assert_eq!(ColumnType::parse(&t.name().to_uppercase()), Some(t));
        }
        assert_eq!(ColumnType::parse("int128"), None);
    }

    #[test]
    fn column_def_omits_absent_fields_and_defaults_nullable() {
        let def: ColumnDef = serde_json::from_str(r#"{"name":"id","type":"LONG"}"#).unwrap();
        assert!(def.nullable);
        assert_eq!(def.column_type, ColumnType::Long);
        assert_eq!(
            serde_json::to_string(&def).unwrap(),
            r#"{"name":"id","type":"long","nullable":true}"#
        );
    }
}
