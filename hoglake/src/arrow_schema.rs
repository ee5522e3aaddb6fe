//! Arrow schema <-> hoglake columns.
//!
//! Files bind to the catalog by field id: every Arrow field we write carries
//! its catalog id in the metadata key `PARQUET:field_id`, which the parquet
//! writer turns into the SchemaElement `field_id` (containers and list
//! elements included; the synthetic `list` / `key_value` groups get none).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::{cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use arrow_schema::extension::{ExtensionType, Json, Uuid};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

use crate::error::{Error, Result};
use crate::schema::{ordered, Column, ColumnDef, ColumnType, TypeParams};

/// The Arrow schema files for these catalog columns must have: ordinal order,
/// variant columns left out (they are written only through prepared files),
/// field ids on every field, nullability from the catalog.
pub fn arrow_schema(columns: &[Column]) -> Result<Schema> {
    let fields = ordered(columns)
        .into_iter()
        .filter(|c| c.column_type != ColumnType::Variant)
        .map(arrow_field)
        .collect::<Result<Vec<_>>>()?;
    Ok(Schema::new(fields))
}

/// One catalog column as an Arrow field (recursively for containers).
pub fn arrow_field(column: &Column) -> Result<Field> {
    let data_type = arrow_type(column)?;
    let field = Field::new(&column.name, data_type, column.nullable);
    let field = match column.column_type {
        ColumnType::Uuid => field.with_extension_type(Uuid),
        ColumnType::Json => field.with_extension_type(Json::default()),
        _ => field,
    };
    let mut metadata = field.metadata().clone();
    metadata.insert(
        PARQUET_FIELD_ID_META_KEY.to_string(),
        column.field_id.to_string(),
    );
    Ok(field.with_metadata(metadata))
}

fn arrow_type(column: &Column) -> Result<DataType> {
    use ColumnType as T;
    Ok(match column.column_type {
        T::Boolean => DataType::Boolean,
        T::Int8 => DataType::Int8,
        T::Int16 => DataType::Int16,
        T::Int => DataType::Int32,
        T::Long => DataType::Int64,
        T::Uint8 => DataType::UInt8,
        T::Uint16 => DataType::UInt16,
        // pyhoglake's contract: uint32 travels as int64, never uint32.
        T::Uint32 => DataType::Int64,
        T::Uint64 => DataType::UInt64,
        T::Float => DataType::Float32,
        T::Double => DataType::Float64,
        T::Decimal => {
            let (precision, scale) = column.decimal_params().ok_or_else(|| {
                Error::Definition(format!("decimal `{}` without precision", column.name))
            })?;
            if !(1..=38).contains(&precision) {
                return Err(Error::Definition(format!(
                    "decimal `{}` precision {precision} outside 1..=38",
                    column.name
                )));
            }
            DataType::Decimal128(precision, scale)
        }
        T::Date => DataType::Date32,
        T::Time => DataType::Time64(TimeUnit::Microsecond),
        // Parquet has no seconds unit: timestamp_s files hold milliseconds.
        T::TimestampS | T::TimestampMs => DataType::Timestamp(TimeUnit::Millisecond, None),
        T::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
        T::TimestampNs => DataType::Timestamp(TimeUnit::Nanosecond, None),
        T::Timestamptz => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        T::String | T::Json => DataType::Utf8,
        T::Uuid => DataType::FixedSizeBinary(16),
        T::Binary => DataType::Binary,
        T::Variant => {
            return Err(Error::Definition(format!(
                "variant column `{}` has no Arrow form here",
                column.name
            )))
        }
        T::List => {
            let [element] = children::<1>(column)?;
            DataType::List(Arc::new(arrow_field(element)?))
        }
        T::Map => {
            let [key, value] = children::<2>(column)?;
            let entries = Field::new(
                "key_value",
                DataType::Struct(Fields::from(vec![arrow_field(key)?, arrow_field(value)?])),
                false,
            );
            DataType::Map(Arc::new(entries), false)
        }
        T::Struct => {
            let fields = column
                .ordered_children()
                .into_iter()
                .map(arrow_field)
                .collect::<Result<Vec<_>>>()?;
            if fields.is_empty() {
                return Err(Error::Definition(format!(
                    "struct `{}` has no fields",
                    column.name
                )));
            }
            DataType::Struct(Fields::from(fields))
        }
    })
}

fn children<const N: usize>(column: &Column) -> Result<[&Column; N]> {
    column.ordered_children().try_into().map_err(|_| {
        Error::Definition(format!(
            "{} `{}` needs exactly {N} children",
            column.column_type, column.name
        ))
    })
}

/// The column definitions a new table needs for an Arrow schema (the inverse
/// of [`arrow_schema`], used when a table is created from a batch).
pub fn column_defs(schema: &Schema) -> Result<Vec<ColumnDef>> {
    schema.fields().iter().map(|f| column_def(f)).collect()
}

fn column_def(field: &Field) -> Result<ColumnDef> {
    use ColumnType as T;
    let unsupported = || Error::UnsupportedArrowType {
        column: field.name().clone(),
        arrow_type: field.data_type().to_string(),
    };
    let mut type_params = None;
    let mut children = None;
    let column_type = match field.data_type() {
        DataType::Boolean => T::Boolean,
        DataType::Int8 => T::Int8,
        DataType::Int16 => T::Int16,
        DataType::Int32 => T::Int,
        DataType::Int64 => T::Long,
        DataType::UInt8 => T::Uint8,
        DataType::UInt16 => T::Uint16,
        DataType::UInt32 => T::Uint32,
        DataType::UInt64 => T::Uint64,
        DataType::Float32 => T::Float,
        DataType::Float64 => T::Double,
        DataType::Decimal128(precision, scale) => {
            type_params = Some(TypeParams {
                precision: Some(*precision),
                scale: Some(*scale),
                shredding: None,
            });
            T::Decimal
        }
        DataType::Date32 => T::Date,
        DataType::Time64(TimeUnit::Microsecond) => T::Time,
        DataType::Timestamp(unit, None) => match unit {
            TimeUnit::Second => T::TimestampS,
            TimeUnit::Millisecond => T::TimestampMs,
            TimeUnit::Microsecond => T::Timestamp,
            TimeUnit::Nanosecond => T::TimestampNs,
        },
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => T::Timestamptz,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            if field.extension_type_name() == Some(Json::NAME) {
                T::Json
            } else {
                T::String
            }
        }
        // Bare fixed(16) is accepted by hoglake as the same thing as the
        // annotated UUID type.
        DataType::FixedSizeBinary(16) => T::Uuid,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => T::Binary,
        DataType::List(element) | DataType::LargeList(element) => {
            let mut element = column_def(element)?;
            element.name = "element".into();
            children = Some(vec![element]);
            T::List
        }
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(unsupported());
            };
            let mut key = column_def(&kv[0])?;
            key.name = "key".into();
            key.nullable = false;
            let mut value = column_def(&kv[1])?;
            value.name = "value".into();
            children = Some(vec![key, value]);
            T::Map
        }
        DataType::Struct(fields) => {
            children = Some(
                fields
                    .iter()
                    .map(|f| column_def(f))
                    .collect::<Result<_>>()?,
            );
            T::Struct
        }
        _ => return Err(unsupported()),
    };
    Ok(ColumnDef {
        name: field.name().clone(),
        column_type,
        nullable: field.is_nullable(),
        type_params,
        children,
        comment: None,
    })
}

/// Re-shapes a batch to the file schema: columns picked by name in the
/// schema's order, absent nullable columns filled with nulls, and every
/// column cast to the target type (which also stamps the nested fields with
/// their field ids). A column or a value that cannot be cast is an error.
pub fn conform(batch: &RecordBatch, target: &SchemaRef) -> Result<RecordBatch> {
    let by_name: HashMap<&str, usize> = batch
        .schema_ref()
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name().as_str(), i))
        .collect();
    let columns = target
        .fields()
        .iter()
        .map(|field| match by_name.get(field.name().as_str()) {
            Some(&i) => {
                let column = batch.column(i);
                if column.data_type() == field.data_type() {
                    Ok(column.clone())
                } else {
                    // Never silently: a value the cast cannot carry is an
                    // error, not a NULL (the writer brings values to the
                    // live type exactly before they get here).
                    let strict = CastOptions {
                        safe: false,
                        ..Default::default()
                    };
                    Ok(cast_with_options(column, field.data_type(), &strict)?)
                }
            }
            None if field.is_nullable() => Ok(arrow::array::new_null_array(
                field.data_type(),
                batch.num_rows(),
            )),
            None => Err(Error::Definition(format!(
                "required column `{}` missing from the batch",
                field.name()
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(target.clone(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events_columns() -> Vec<Column> {
        serde_json::from_str(
            r#"[{"name": "id", "type": "long", "nullable": false, "field_id": 1, "ordinal": 0},
                {"name": "tags", "type": "list", "nullable": true, "field_id": 6, "ordinal": 2,
                 "children": [{"name": "element", "type": "string", "nullable": true, "field_id": 7, "ordinal": 0}]},
                {"name": "u", "type": "uuid", "field_id": 8, "ordinal": 1},
                {"name": "v", "type": "variant", "field_id": 9, "ordinal": 3}]"#,
        )
        .unwrap()
    }

    fn field_id(f: &Field) -> &str {
        f.metadata()[PARQUET_FIELD_ID_META_KEY].as_str()
    }

    #[test]
    fn schema_follows_ordinals_skips_variants_and_carries_ids() {
        let schema = arrow_schema(&events_columns()).unwrap();
        let names: Vec<_> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "u", "tags"]);
        assert_eq!(field_id(schema.field(0)), "1");
        assert!(!schema.field(0).is_nullable());
        assert_eq!(field_id(schema.field(1)), "8");
        assert_eq!(schema.field(1).extension_type_name(), Some(Uuid::NAME));
        let DataType::List(element) = schema.field(2).data_type() else {
            panic!("tags is not a list")
        };
        assert_eq!(element.name(), "element");
        assert_eq!(field_id(element), "7");
        assert_eq!(field_id(schema.field(2)), "6");
    }

    #[test]
    fn column_defs_invert_the_mapping() {
        let columns = events_columns();
        let schema = arrow_schema(&columns).unwrap();
        let defs = column_defs(&schema).unwrap();
        let summary: Vec<_> = defs
            .iter()
            .map(|d| (d.name.as_str(), d.column_type))
            .collect();
        assert_eq!(
            summary,
            [
                ("id", ColumnType::Long),
                ("u", ColumnType::Uuid),
                ("tags", ColumnType::List)
            ]
        );
        let element = &defs[2].children.as_ref().unwrap()[0];
        assert_eq!(
            (element.name.as_str(), element.column_type),
            ("element", ColumnType::String)
        );
    }

    #[test]
    fn unsupported_arrow_types_are_named() {
        let schema = Schema::new(vec![Field::new("d", DataType::Float16, true)]);
        let err = column_defs(&schema).unwrap_err().to_string();
        assert!(err.contains("`d`") && err.contains("Float16"), "{err}");
    }
}
