//! A DuckDB instance opened through the C API, so the write path can hand
//! Arrow batches to DuckDB without copying them first (duckdb_arrow_scan):
//! the insert reads the flush's own buffers.
use std::ffi::{c_char, CStr, CString};
use std::ptr;

use arrow::datatypes::SchemaRef;
use arrow::ffi_stream::FFI_ArrowArrayStream;
use arrow::record_batch::{RecordBatch, RecordBatchIterator};
use duckdb::{ffi, Connection};

/// Database handle plus two connections: `conn` (duckdb-rs) for DDL and
/// queries, `raw` for the Arrow scan and the insert that reads it (a scan
/// view is private to the connection that registered it). Fields drop in
/// order, so both connections close before the database.
pub struct Session {
    pub conn: Connection,
    raw: RawConn,
    _db: RawDb,
}

struct RawDb(ffi::duckdb_database);
struct RawConn(ffi::duckdb_connection);

// The handles are used by one thread at a time (the sink sits behind a mutex).
unsafe impl Send for RawDb {}
unsafe impl Send for RawConn {}

impl Drop for RawDb {
    fn drop(&mut self) {
        unsafe { ffi::duckdb_close(&mut self.0) }
    }
}

impl Drop for RawConn {
    fn drop(&mut self) {
        unsafe { ffi::duckdb_disconnect(&mut self.0) }
    }
}

fn cstring(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("{s:?} contains a NUL byte"))
}

impl Session {
    /// Opens `path` (":memory:" or a file) with the given settings.
    pub fn open(path: &str, settings: &[(&str, &str)]) -> Result<Session, String> {
        unsafe {
            let mut config: ffi::duckdb_config = ptr::null_mut();
            if ffi::duckdb_create_config(&mut config) != ffi::DuckDBSuccess {
                return Err("duckdb_create_config failed".into());
            }
            for (k, v) in settings {
                let (k, v) = (cstring(k)?, cstring(v)?);
                if ffi::duckdb_set_config(config, k.as_ptr(), v.as_ptr()) != ffi::DuckDBSuccess {
                    ffi::duckdb_destroy_config(&mut config);
                    return Err(format!("invalid DuckDB setting {k:?}"));
                }
            }
            let cpath = cstring(path)?;
            let mut db: ffi::duckdb_database = ptr::null_mut();
            let mut err: *mut c_char = ptr::null_mut();
            let state = ffi::duckdb_open_ext(cpath.as_ptr(), &mut db, config, &mut err);
            ffi::duckdb_destroy_config(&mut config);
            if state != ffi::DuckDBSuccess {
                let msg = if err.is_null() {
                    "unknown error".to_owned()
                } else {
                    let m = CStr::from_ptr(err).to_string_lossy().into_owned();
                    ffi::duckdb_free(err.cast());
                    m
                };
                return Err(msg);
            }
            let db = RawDb(db);
            let mut raw: ffi::duckdb_connection = ptr::null_mut();
            if ffi::duckdb_connect(db.0, &mut raw) != ffi::DuckDBSuccess {
                return Err("duckdb_connect failed".into());
            }
            let raw = RawConn(raw);
            let conn = Connection::open_from_raw(db.0).map_err(|e| e.to_string())?;
            Ok(Session { conn, raw, _db: db })
        }
    }

    /// Runs SQL on the scan connection.
    pub fn execute_raw(&self, sql: &str) -> Result<(), String> {
        let c = cstring(sql)?;
        unsafe {
            let mut res: ffi::duckdb_result = std::mem::zeroed();
            let state = ffi::duckdb_query(self.raw.0, c.as_ptr(), &mut res);
            let out = if state == ffi::DuckDBSuccess {
                Ok(())
            } else {
                let e = ffi::duckdb_result_error(&mut res);
                Err(if e.is_null() {
                    "unknown error".to_owned()
                } else {
                    CStr::from_ptr(e).to_string_lossy().into_owned()
                })
            };
            ffi::duckdb_destroy_result(&mut res);
            out
        }
    }

    /// Makes `batches` readable as the view `name` on the scan connection.
    /// The returned stream must outlive every query reading the view.
    pub fn register_arrow(
        &self,
        name: &str,
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
    ) -> Result<Box<FFI_ArrowArrayStream>, String> {
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
        let mut stream = Box::new(FFI_ArrowArrayStream::new(Box::new(reader)));
        let cname = cstring(name)?;
        let state = unsafe {
            ffi::duckdb_arrow_scan(
                self.raw.0,
                cname.as_ptr(),
                (&mut *stream as *mut FFI_ArrowArrayStream).cast(),
            )
        };
        if state != ffi::DuckDBSuccess {
            return Err(format!("registering the Arrow scan {name} failed"));
        }
        Ok(stream)
    }
}
