//! What the emulator-backed tests share: the emulator process, moto's
//! settings, a publisher, and small batch helpers.
#![allow(dead_code)]

use std::process::Child;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::Int64Type;
use bytes::Bytes;
use millpond_hoglake::catalog::{CatalogClient, DEFAULT_REQUEST_TIMEOUT};
use millpond_hoglake::layout::Layout;
use millpond_hoglake::publish::{Publisher, PublisherConfig};
use millpond_hoglake::store::S3Config;
use millpond_proto::OffsetRange;
use millpond_shared::retry::Ladder;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

#[path = "../../../../tests/hoglake-emulator/launch.rs"]
mod launch;

pub const CATALOG: &str = "it";
pub const NS: &str = "analytics";
pub const TABLE: &str = "events";

/// The emulator process; killed on drop.
pub struct Emulator {
    child: Child,
    pub root: String,
    http: reqwest::Client,
}

impl Emulator {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// An emulator started with more flags.
    pub fn start_with(flags: &[&str]) -> Self {
        let script = format!(
            "{}{}",
            std::env::var("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned()),
            "/../tests/hoglake-emulator/hoglake_emulator.py"
        );
        let (child, root) = launch::launch_with(&script, flags);
        Self {
            child,
            root,
            http: reqwest::Client::new(),
        }
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.root));
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("emulator reachable");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn fault(&self, rule: Value) {
        let (status, body) = self
            .call(reqwest::Method::POST, "/_emulator/faults", Some(rule))
            .await;
        assert_eq!(status, 200, "{body}");
    }

    /// Logged /v1 requests whose path matches `regex`.
    pub async fn requests(&self, regex: &str) -> Vec<Value> {
        let (status, body) = self
            .call(
                reqwest::Method::GET,
                &format!("/_emulator/requests?path={}", urlencode(regex)),
                None,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let list = match body {
            Value::Array(a) => a,
            Value::Object(mut o) => match o.remove("requests") {
                Some(Value::Array(a)) => a,
                other => panic!("request log shape: {other:?}"),
            },
            other => panic!("request log shape: {other}"),
        };
        list
    }

    pub async fn commits(&self) -> Vec<Value> {
        self.requests("/prepared$").await
    }

    /// How many snapshots carry a `data_appended` change.
    pub async fn data_snapshots(&self) -> usize {
        let (status, body) = self
            .call(
                reqwest::Method::GET,
                &format!("/v1/catalogs/{CATALOG}/snapshots?limit=10000"),
                None,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        body["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| {
                s["changes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["kind"] == "data_appended")
            })
            .count()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// moto's endpoint and keys, or None (the test then says why it skipped).
pub fn s3_from_env() -> Option<(S3Config, String)> {
    let Ok(endpoint) = std::env::var("MILLPOND_TEST_S3_ENDPOINT") else {
        eprintln!(
            "SKIPPED: MILLPOND_TEST_S3_ENDPOINT is unset; start moto and export its settings with \
             `bash scripts/services.sh start && eval \"$(bash scripts/services.sh env)\"`"
        );
        return None;
    };
    let var = |k: &str| std::env::var(k).ok();
    Some((
        S3Config {
            endpoint: Some(endpoint),
            region: var("MILLPOND_TEST_S3_REGION").or(Some("us-east-1".into())),
            access_key_id: var("MILLPOND_TEST_S3_KEY_ID"),
            secret_access_key: var("MILLPOND_TEST_S3_SECRET"),
        },
        var("MILLPOND_TEST_S3_BUCKET").unwrap_or_else(|| "millpond-test".into()),
    ))
}

/// The publish ladder's 8 attempts, on a 20 ms step.
pub fn fast_retry() -> Ladder {
    Ladder {
        attempts: 8,
        base: Duration::from_millis(20),
        jitter: 0.25,
    }
}

pub async fn publisher(emu: &Emulator, s3: &S3Config, bucket: &str) -> Publisher {
    publisher_with(emu, s3, bucket, Layout::default()).await
}

/// A publisher whose table layout is `layout`.
pub async fn publisher_with(
    emu: &Emulator,
    s3: &S3Config,
    bucket: &str,
    layout: Layout,
) -> Publisher {
    publisher_fenced(emu, s3, bucket, layout, true).await
}

/// A publisher with HOGLAKE_PARTITION_FENCE = `partition_fence`.
pub async fn publisher_fenced(
    emu: &Emulator,
    s3: &S3Config,
    bucket: &str,
    layout: Layout,
    partition_fence: bool,
) -> Publisher {
    let client = CatalogClient::new(&emu.root, CATALOG, DEFAULT_REQUEST_TIMEOUT).unwrap();
    Publisher::connect(
        client,
        publisher_config(s3, bucket, layout, partition_fence),
    )
    .await
    .expect("connect")
}

/// The tests' publisher settings, on a fresh data path.
pub fn publisher_config(
    s3: &S3Config,
    bucket: &str,
    layout: Layout,
    partition_fence: bool,
) -> PublisherConfig {
    PublisherConfig {
        namespace: NS.into(),
        table: TABLE.into(),
        create_data_path: Some(format!("s3://{bucket}/hoglake-it/{}", uuid::Uuid::new_v4())),
        s3: s3.clone(),
        ladder: fast_retry(),
        layout,
        dead_letter_table: Some(format!("{TABLE}_dead_letters")),
        partition_fence,
    }
}

pub fn batch(ids: &[i64], teams: &[i64]) -> RecordBatch {
    let names: Vec<String> = ids.iter().map(|i| format!("event-{i}")).collect();
    RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef),
        ("name", Arc::new(StringArray::from(names)) as ArrayRef),
        (
            "team",
            Arc::new(Int64Array::from(teams.to_vec())) as ArrayRef,
        ),
    ])
    .unwrap()
}

pub fn ranges(first: i64, last: i64) -> Vec<OffsetRange> {
    vec![OffsetRange::new("events", 0, first, last)]
}

/// Reads an uploaded object back: all rows as one batch.
pub async fn read_back(p: &Publisher, uri: &str) -> RecordBatch {
    let bytes: Bytes = p.store().get(uri).await.expect("object in S3");
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
    arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
}

pub fn ints(b: &RecordBatch, name: &str) -> Vec<i64> {
    b.column_by_name(name)
        .unwrap_or_else(|| panic!("column {name}"))
        .as_primitive::<Int64Type>()
        .values()
        .to_vec()
}

pub fn key_of(body: &Value) -> &str {
    body["idempotency_key"].as_str().unwrap()
}
