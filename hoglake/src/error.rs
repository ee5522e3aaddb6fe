//! The crate's one error type.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    /// A table definition this crate cannot turn into a file schema (unknown
    /// type parameters, a container without its children, a missing field id).
    #[error("table definition: {0}")]
    Definition(String),

    /// An Arrow field with no hoglake column type.
    #[error("column `{column}`: arrow type {arrow_type} has no hoglake type")]
    UnsupportedArrowType { column: String, arrow_type: String },

    /// A partition spec that does not fit the table (unknown source field id,
    /// a transform the source type does not allow).
    #[error("partition spec: {0}")]
    PartitionSpec(String),

    /// A value a partition transform cannot represent the way pyhoglake does
    /// (e.g. a date outside Python's years 1..=9999).
    #[error("partition value: {0}")]
    PartitionValue(String),

    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),

    #[error("parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
