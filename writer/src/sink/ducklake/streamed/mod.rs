//! Streamed flushes written to Parquet as they arrive (`spool`), so the
//! writer never holds one whole: each batch is prepared, the table evolved
//! for it and its values brought to the live types, exactly as a flush sent
//! whole would be, then it is encoded and dropped. At the trailer the files
//! are registered with `ducklake_add_data_files` in the transaction that
//! records the flush's offsets and dead letters, so exactly-once holds as
//! for an insert.
//!
//! The first DUCKLAKE_FILES_FROM_BYTES of a flush are held: a smaller flush is
//! inserted by DuckDB as a whole (no small file per flush, its columns'
//! types decided over the whole flush). Past it, a new column's type is the
//! one of the batch that brings it.
//!
//! What only DuckDB's insert can do (VARIANT companions, partitioned
//! tables, object storage other than S3, values that need an engine cast, types
//! a file does not map exactly) keeps streamed flushes on the insert path.
//! Met before any file is written, the flush is held and inserted; met
//! later, or when the lake refuses the files at the commit, the sender is
//! asked to send the flush again whole ([`SinkErrorKind::ResendWhole`]).
//! Either way streamed flushes are held for the next ten minutes.
//!
//! [`SinkErrorKind::ResendWhole`]: crate::sink::SinkErrorKind::ResendWhole
mod columns;
mod commit;
mod letter_file;
mod pause;
mod refusal;
mod spooling;
mod stream;
mod streams;

pub use commit::commit_files;
pub use streams::Streams;
