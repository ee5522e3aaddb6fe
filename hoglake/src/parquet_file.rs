//! Writing one data file: Arrow batches -> parquet bytes in memory, laid out
//! like pyhoglake's files (pyarrow 26 defaults: Snappy, data page v1,
//! dictionary on, chunk statistics without truncation, one row group up to
//! 1 Mi rows, no page index, Arrow schema stored under `ARROW:schema`,
//! decimals as FIXED_LEN_BYTE_ARRAY), with every catalog field id embedded.
//!
//! The returned metadata is parsed back from the bytes' own footer, so the
//! registration is derived from exactly what the object holds.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::{ArrowSchemaConverter, ArrowWriter};
use parquet::basic::{Compression, LogicalType, Type as PhysicalType};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::schema::types::{SchemaDescriptor, Type, TypePtr};

use crate::arrow_schema::conform;
use crate::error::{Error, Result};

/// pyarrow's default row group size.
pub const MAX_ROW_GROUP_ROWS: usize = 1024 * 1024;

/// The parquet trailer: footer length (u32 LE) + `PAR1`.
const TRAILER_LEN: usize = 8;

/// A parquet object ready to upload and register.
#[derive(Debug, Clone)]
pub struct ParquetFile {
    pub bytes: Bytes,
    /// The u32 in the 8-byte trailer: length of the thrift FileMetaData,
    /// trailer excluded. The server's hydrator reads
    /// `[len - footer_size - 8, len)`.
    pub footer_size: u32,
    /// Rows in the file (footer `num_rows`).
    pub record_count: u64,
    /// The footer, parsed back from `bytes`.
    pub metadata: ParquetMetaData,
}

impl ParquetFile {
    pub fn file_size_bytes(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// The writer settings matching pyhoglake's files.
pub fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(true)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_statistics_truncate_length(None)
        .set_offset_index_disabled(true)
        .set_max_row_group_row_count(Some(MAX_ROW_GROUP_ROWS))
        .build()
}

/// Writes `batches` (conformed to `schema`, see [`conform`]) as one parquet
/// file. `schema` is the file schema from [`crate::arrow_schema::arrow_schema`].
pub fn write_parquet(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<ParquetFile> {
    let options = ArrowWriterOptions::new()
        .with_properties(writer_properties())
        .with_parquet_schema(parquet_schema(schema)?);
    let mut writer = ArrowWriter::try_new_with_options(Vec::new(), schema.clone(), options)?;
    for batch in batches {
        writer.write(&conform(batch, schema)?)?;
    }
    let bytes = Bytes::from(writer.into_inner()?);
    read_back(bytes)
}

/// Parses the footer of finished parquet bytes.
pub fn read_back(bytes: Bytes) -> Result<ParquetFile> {
    let len = bytes.len();
    if len < 12 || &bytes[len - 4..] != b"PAR1" {
        return Err(Error::Parquet(parquet::errors::ParquetError::General(
            "not a parquet file".into(),
        )));
    }
    let trailer = &bytes[len - TRAILER_LEN..len - 4];
    let footer_size = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    let metadata = ParquetMetaDataReader::new().parse_and_finish(&bytes)?;
    let record_count = u64::try_from(metadata.file_metadata().num_rows()).unwrap_or(0);
    Ok(ParquetFile {
        bytes,
        footer_size,
        record_count,
        metadata,
    })
}

/// The parquet schema arrow-rs would derive, except that decimals are
/// FIXED_LEN_BYTE_ARRAY at every precision as pyarrow writes them
/// (arrow-rs picks INT32/INT64 for small precisions).
fn parquet_schema(schema: &SchemaRef) -> Result<SchemaDescriptor> {
    let derived = ArrowSchemaConverter::new().convert(schema)?;
    let root = decimals_as_fixed(derived.root_schema_ptr())?;
    Ok(SchemaDescriptor::new(root))
}

fn decimals_as_fixed(node: TypePtr) -> Result<TypePtr> {
    let info = node.get_basic_info();
    if node.is_group() {
        let fields = node
            .get_fields()
            .iter()
            .map(|f| decimals_as_fixed(f.clone()))
            .collect::<Result<Vec<_>>>()?;
        let mut builder = Type::group_type_builder(info.name())
            .with_fields(fields)
            .with_logical_type(info.logical_type_ref().cloned())
            .with_converted_type(info.converted_type());
        if info.has_repetition() {
            builder = builder.with_repetition(info.repetition());
        }
        if info.has_id() {
            builder = builder.with_id(Some(info.id()));
        }
        return Ok(Arc::new(builder.build()?));
    }
    let Some(LogicalType::Decimal { scale, precision }) = info.logical_type_ref().cloned() else {
        return Ok(node);
    };
    if node.get_physical_type() == PhysicalType::FIXED_LEN_BYTE_ARRAY {
        return Ok(node);
    }
    let length = decimal_byte_length(precision);
    let mut builder = Type::primitive_type_builder(info.name(), PhysicalType::FIXED_LEN_BYTE_ARRAY)
        .with_repetition(info.repetition())
        .with_length(length)
        .with_logical_type(Some(LogicalType::Decimal { scale, precision }))
        .with_precision(precision)
        .with_scale(scale);
    if info.has_id() {
        builder = builder.with_id(Some(info.id()));
    }
    Ok(Arc::new(builder.build()?))
}

/// Smallest byte width whose signed range holds every `precision`-digit
/// value (pyarrow's choice: decimal(10,2) -> 5 bytes).
fn decimal_byte_length(precision: i32) -> i32 {
    (1..=16)
        .find(|bytes| {
            let bits = 8 * bytes - 1;
            // 10^precision - 1 <= 2^bits - 1
            f64::from(precision) <= (f64::from(bits) * 2f64.log10()).floor()
        })
        .unwrap_or(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_widths_match_pyarrow() {
        let widths: Vec<_> = [1, 2, 3, 4, 9, 10, 18, 19, 38]
            .into_iter()
            .map(decimal_byte_length)
            .collect();
        assert_eq!(widths, [1, 1, 2, 2, 4, 5, 8, 9, 16]);
    }
}
