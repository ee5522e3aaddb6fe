//! A hoglake destination for tests: the project's emulator (a Python
//! subprocess on a free port) as the catalog, a fresh prefix of the moto
//! bucket from scripts/services.sh as its data path, the HOGLAKE_* settings
//! of a writer publishing there, and the table read back (the catalog's file
//! listing and request log, the parquet from S3).
use std::process::Child;
use std::time::Duration;

use arrow::record_batch::RecordBatch;
use millpond_hoglake::catalog::{CatalogClient, DataFile};
use millpond_hoglake::store::{DataStore, S3Config};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::required_env;

#[path = "../hoglake-emulator/launch.rs"]
mod launch;

pub const CATALOG: &str = "it";
pub const NAMESPACE: &str = "analytics";
pub const TABLE: &str = "events";

/// The emulator process; killed on drop.
pub struct Emulator {
    child: Child,
    /// `http://127.0.0.1:<port>` (HOGLAKE_URL).
    pub root: String,
}

impl Emulator {
    pub fn start() -> Self {
        let script = crate::manifest_path("/hoglake-emulator/hoglake_emulator.py");
        let (child, root) = launch::launch(&script);
        Self { child, root }
    }

    /// Arms a fault rule (or a list of them) of the emulator's control API
    /// (tests/hoglake-emulator/README.md): e.g. every commit answered 409.
    pub fn fault(&self, rule: serde_json::Value) {
        let url = format!("{}/_emulator/faults", self.root);
        let (status, body) =
            crate::scrape::post_json(&url, &rule.to_string()).expect("emulator reachable");
        assert_eq!(status, 200, "{url}: {body}");
    }

    /// The request log's entries whose path matches the regex `path`,
    /// oldest first (`status` is set once the request was answered).
    pub fn requests(&self, path: &str) -> Vec<serde_json::Value> {
        let url = format!("{}/_emulator/requests?path={path}", self.root);
        let (status, body) = crate::scrape::get(&url).expect("emulator reachable");
        assert_eq!(status, 200, "{url}: {body}");
        match serde_json::from_str(&body).expect("request log is JSON") {
            serde_json::Value::Array(entries) => entries,
            other => panic!("request log is an array: {other}"),
        }
    }

    /// Every `POST …/commit/prepared` received so far, oldest first, as the
    /// emulator's request log shows it.
    pub fn commits(&self) -> Vec<CommitRequest> {
        let url = format!("{}/_emulator/requests?path=/prepared$", self.root);
        let (status, body) = crate::scrape::get(&url).expect("emulator reachable");
        assert_eq!(status, 200, "{url}: {body}");
        let log: serde_json::Value = serde_json::from_str(&body).expect("request log is JSON");
        log.as_array()
            .unwrap_or_else(|| panic!("request log is an array: {body}"))
            .iter()
            .map(CommitRequest::from_log)
            .collect()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One prepared commit the emulator received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitRequest {
    /// HTTP status answered (None: the request was dropped by a fault).
    pub status: Option<u16>,
    pub idempotency_key: String,
    /// Data files registered by the payload (the target table's), and
    /// their rows.
    pub files: usize,
    pub rows: u64,
    /// Rows appended to the dead-letter table in the same commit.
    pub dead_letters: u64,
}

impl CommitRequest {
    fn from_log(entry: &serde_json::Value) -> Self {
        let body = &entry["body"];
        let appends = body["appends"]
            .as_array()
            .unwrap_or_else(|| panic!("commit without appends: {entry}"));
        // The dead-letter table's appends (the partition fence's offsets
        // tables are neither rows nor dead letters).
        let dead_letters = format!("{TABLE}_dead_letters");
        let files_of = |data: bool| -> Vec<&serde_json::Value> {
            appends
                .iter()
                .filter(|a| {
                    if data {
                        a["table"] == TABLE
                    } else {
                        a["table"] == dead_letters.as_str()
                    }
                })
                .flat_map(|a| a["files"].as_array().into_iter().flatten())
                .collect()
        };
        let rows = |files: &[&serde_json::Value]| -> u64 {
            files
                .iter()
                .map(|f| f["record_count"].as_u64().expect("record_count"))
                .sum()
        };
        let files = files_of(true);
        CommitRequest {
            dead_letters: rows(&files_of(false)),
            status: entry["status"].as_u64().map(|s| s as u16),
            idempotency_key: body["idempotency_key"]
                .as_str()
                .unwrap_or_else(|| panic!("commit without a key: {entry}"))
                .to_owned(),
            files: files.len(),
            rows: rows(&files),
        }
    }
}

/// The emulator plus a fresh data path in the moto bucket.
pub struct Hoglake {
    pub emulator: Emulator,
    /// `s3://<bucket>/hoglake-e2e/<uuid>`: the catalog is created with it.
    pub data_path: String,
    pub s3: S3Config,
    /// Logs of the processes a test runs against this destination.
    pub dir: tempfile::TempDir,
}

impl Hoglake {
    pub fn start() -> Hoglake {
        let bucket = required_env("MILLPOND_TEST_S3_BUCKET");
        Hoglake {
            emulator: Emulator::start(),
            data_path: format!("s3://{bucket}/hoglake-e2e/{}", uuid::Uuid::new_v4()),
            s3: S3Config {
                endpoint: Some(required_env("MILLPOND_TEST_S3_ENDPOINT")),
                region: Some(required_env("MILLPOND_TEST_S3_REGION")),
                access_key_id: Some(required_env("MILLPOND_TEST_S3_KEY_ID")),
                secret_access_key: Some(required_env("MILLPOND_TEST_S3_SECRET")),
            },
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// The settings of a writer publishing to this table
    /// (MILLPOND_DESTINATION=hoglake).
    pub fn writer_env(&self) -> Vec<(String, String)> {
        let s3 = |v: &Option<String>| v.clone().expect("set in start()");
        [
            ("MILLPOND_DESTINATION", "hoglake".to_owned()),
            ("HOGLAKE_URL", self.emulator.root.clone()),
            ("HOGLAKE_CATALOG", CATALOG.to_owned()),
            ("HOGLAKE_NAMESPACE", NAMESPACE.to_owned()),
            ("HOGLAKE_TABLE", TABLE.to_owned()),
            ("HOGLAKE_DATA_PATH", self.data_path.clone()),
            ("HOGLAKE_S3_ENDPOINT", s3(&self.s3.endpoint)),
            ("HOGLAKE_S3_REGION", s3(&self.s3.region)),
            ("HOGLAKE_S3_ACCESS_KEY", s3(&self.s3.access_key_id)),
            ("HOGLAKE_S3_SECRET_KEY", s3(&self.s3.secret_access_key)),
            ("HOGLAKE_REQUEST_TIMEOUT_S", "10".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    pub fn catalog(&self) -> CatalogClient {
        CatalogClient::new(&self.emulator.root, CATALOG, Duration::from_secs(10)).unwrap()
    }

    /// The table's registered files at the latest snapshot.
    pub async fn files(&self) -> Vec<DataFile> {
        self.catalog()
            .list_files(NAMESPACE, TABLE, None)
            .await
            .expect("files listing")
    }

    /// Record counts of the registered files, sorted.
    pub async fn record_counts(&self) -> Vec<u64> {
        let mut counts: Vec<u64> = self.files().await.iter().map(|f| f.record_count).collect();
        counts.sort_unstable();
        counts
    }

    /// A registered file's rows, fetched from S3 and decoded with the
    /// parquet crate.
    pub async fn read(&self, file: &DataFile) -> RecordBatch {
        let store = DataStore::new(&self.data_path, &self.s3).unwrap();
        let bytes = store
            .get(&file.path)
            .await
            .unwrap_or_else(|e| panic!("registered file {} not in S3: {e}", file.path));
        let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap_or_else(|e| panic!("{} is not parquet: {e}", file.path))
            .build()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let schema = batches
            .first()
            .map(|b| b.schema())
            .unwrap_or_else(|| panic!("{} holds no row group", file.path));
        arrow::compute::concat_batches(&schema, &batches).unwrap()
    }
}
