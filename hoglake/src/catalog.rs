//! The hoglake catalog client: the REST calls the publish path needs
//! (hoglake-api.md sections 4-7), with typed errors.
//!
//! # Async, not blocking
//!
//! The client is async (reqwest's async client). The writer's `Sink` trait
//! is synchronous and runs inside `spawn_blocking`, so a blocking client
//! would look like the natural fit, but:
//! * the object store ([`crate::store`], `object_store`) is async-only, so
//!   the publish path needs a tokio runtime anyway; one async stack for both
//!   halves means one runtime, one connection pool implementation and one
//!   place where timeouts live;
//! * `reqwest::blocking` runs its own hidden runtime thread per client and
//!   panics if it is dropped inside an async context, a trap for a sink that
//!   is constructed and dropped from async code;
//! * a `spawn_blocking` thread may call `tokio::runtime::Handle::block_on`
//!   on the writer's runtime, so the synchronous sink drives
//!   [`crate::publish::Publisher::publish`] with one `block_on` per flush.
//!
//! # Errors
//!
//! Every non-2xx answer becomes [`CatalogError::Api`] carrying the status,
//! the machine code (`error`), the server's detail text (only for humans),
//! the `tables` it names and a parsed `Retry-After`. [`CatalogError::class`]
//! sorts failures into what the caller does next: retry the identical
//! request, re-prepare, or give up at once (section 2 of the API document and
//! millpond.md "Error Handling").

use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use millpond_shared::deadline::Deadline;

use crate::schema::{ColumnDef, ColumnType, PartitionField, SortField, Table};

/// `User-Agent` sent on every request (the server names clients from it).
pub const USER_AGENT: &str = concat!("millpond-hoglake/", env!("CARGO_PKG_VERSION"));

/// Default per-request timeout (HOGLAKE_REQUEST_TIMEOUT_S): above the
/// server's 30 s admission bound, so its 503 + Retry-After can arrive.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(45);

/// What the caller should do about a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Send the identical request again after a backoff (transport errors,
    /// 408, 429, 5xx, 503 `commit_queue_timeout`).
    Retry,
    /// The request was judged against a stale basis: re-read the table and
    /// build a new payload (409 `ddl_since_read_snapshot`, `table_recreated`,
    /// `table_dropped`, `commit_conflict`; 410 `expired`).
    RePrepare,
    /// Waiting cannot make it valid (400, 404, 422, 501, other 409s).
    Permanent,
}

/// A failed catalog call. `what` names the call (`GET table analytics.events`).
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// No answer: connect failure, reset, timeout. The outcome of a
    /// non-idempotent request is unknown.
    #[error("hoglake {what}: no response from {url} ({source}); check HOGLAKE_URL and that the control plane is reachable")]
    Transport {
        what: String,
        url: String,
        #[source]
        source: reqwest::Error,
    },

    /// A non-2xx answer.
    #[error("hoglake {what}: HTTP {status} {code}{}{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default(), hint(*status, code))]
    Api {
        what: String,
        status: u16,
        /// The machine code (`error` field); `http_<status>` if the body had none.
        code: String,
        detail: Option<String>,
        /// `ns.table` names the refusal is about.
        tables: Vec<String>,
        retry_after: Option<Duration>,
    },

    /// A 2xx answer whose body is not what the API document describes.
    #[error("hoglake {what}: unexpected response body ({message})")]
    Decode { what: String, message: String },

    /// The catalog does not exist and no data path was configured to create it.
    #[error("hoglake catalog `{catalog}` does not exist; check HOGLAKE_CATALOG, or set HOGLAKE_DATA_PATH so millpond creates it on first write")]
    MissingCatalog { catalog: String },

    /// A setting the client cannot work with (bad URL).
    #[error("hoglake client configuration: {0}")]
    Config(String),
}

fn hint(status: u16, code: &str) -> &'static str {
    match (status, code) {
        (422, _) => " (the request is invalid for this catalog; fix the data or configuration, retrying will not help)",
        (404, _) => " (check HOGLAKE_CATALOG / HOGLAKE_NAMESPACE / HOGLAKE_TABLE and the server version)",
        (409, "table_recreated") => " (the table was dropped and recreated; re-resolve it)",
        (409, "ddl_since_read_snapshot") => " (the table changed since it was read; re-read and rebuild)",
        (410, _) => " (the read snapshot fell below the retention floor; re-read and rebuild)",
        (503, _) => " (the catalog is shedding load; resend after Retry-After)",
        _ => "",
    }
}

impl CatalogError {
    pub fn class(&self) -> ErrorClass {
        match self {
            CatalogError::Transport { .. } => ErrorClass::Retry,
            CatalogError::Api { status, code, .. } => classify(*status, code),
            CatalogError::Decode { .. } => ErrorClass::Permanent,
            CatalogError::MissingCatalog { .. } | CatalogError::Config(_) => ErrorClass::Permanent,
        }
    }

    /// The server's `Retry-After`, if it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            CatalogError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The machine code of an API refusal.
    pub fn code(&self) -> Option<&str> {
        match self {
            CatalogError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    pub fn status(&self) -> Option<u16> {
        match self {
            CatalogError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True when the request may have been applied although no answer came
    /// back (the lost-response case).
    pub fn outcome_unknown(&self) -> bool {
        matches!(self, CatalogError::Transport { .. })
    }
}

/// Status + code -> what to do (section 2 of the API document).
pub fn classify(status: u16, code: &str) -> ErrorClass {
    match status {
        408 | 429 => ErrorClass::Retry,
        409 => match code {
            "ddl_since_read_snapshot" | "table_recreated" | "table_dropped" | "commit_conflict" => {
                ErrorClass::RePrepare
            }
            _ => ErrorClass::Permanent,
        },
        410 => ErrorClass::RePrepare,
        501 => ErrorClass::Permanent,
        500..=599 => ErrorClass::Retry,
        _ => ErrorClass::Permanent,
    }
}

/// `Retry-After` as delta-seconds (the server sends `1`); fractions are
/// accepted, anything else (an HTTP date) is ignored.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(3600.0)))
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    detail: Option<String>,
    #[serde(default)]
    tables: Vec<String>,
}

/// The Catalog object (only the fields the writer reads).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Catalog {
    pub name: String,
    pub data_path: String,
    pub head_snapshot_id: i64,
    #[serde(default)]
    pub schema_version: i64,
}

/// `{snapshot_id, schema_version}`: a commit's answer, and a receipt's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct CommitResult {
    pub snapshot_id: i64,
    pub schema_version: i64,
}

/// One alter op (only the ones the writer issues).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AlterOp {
    AddColumn {
        column: ColumnDef,
    },
    /// Widening only (int -> long, float -> double, ...).
    PromoteColumn {
        name: String,
        to: ColumnType,
    },
    SetPartitionSpec {
        fields: Vec<PartitionField>,
    },
    SetSortOrder {
        sort_fields: Vec<SortField>,
    },
}

/// One entry of `GET …/tables/{t}/files` (the fields tests and checks read).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DataFile {
    pub data_file_id: i64,
    pub path: String,
    pub record_count: u64,
    pub file_size_bytes: u64,
    #[serde(default)]
    pub stats_state: Option<String>,
    #[serde(default)]
    pub begin_snapshot: Option<i64>,
    #[serde(default)]
    pub partition_values: Option<Vec<Option<String>>>,
}

/// A client for one catalog on one hoglake server.
#[derive(Debug, Clone)]
pub struct CatalogClient {
    http: reqwest::Client,
    /// Per-request timeout (HOGLAKE_REQUEST_TIMEOUT_S), clipped to the time
    /// left under a write's [`Deadline`].
    timeout: Duration,
    /// `{server}/v1`.
    base: Url,
    catalog: String,
}

impl CatalogClient {
    /// `server` is the control-plane root (HOGLAKE_URL); `/v1` is appended.
    pub fn new(server: &str, catalog: &str, timeout: Duration) -> Result<Self, CatalogError> {
        let mut base = Url::parse(server.trim_end_matches('/')).map_err(|e| {
            CatalogError::Config(format!("HOGLAKE_URL `{server}` is not a URL: {e}"))
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(CatalogError::Config(format!(
                "HOGLAKE_URL `{server}` must be http:// or https://"
            )));
        }
        base.path_segments_mut()
            .map_err(|_| CatalogError::Config(format!("HOGLAKE_URL `{server}` cannot be a base")))?
            .pop_if_empty()
            .push("v1");
        let http = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .timeout(timeout)
            .build()
            .map_err(|e| CatalogError::Config(format!("HTTP client: {e}")))?;
        Ok(Self {
            http,
            timeout,
            base,
            catalog: catalog.to_string(),
        })
    }

    pub fn catalog_name(&self) -> &str {
        &self.catalog
    }

    /// `{base}/catalogs/{catalog}/{segments…}`, each segment percent-encoded.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        {
            let mut path = url.path_segments_mut().expect("base URL checked in new()");
            path.push("catalogs").push(&self.catalog);
            path.extend(segments);
        }
        url
    }

    async fn send<T: DeserializeOwned>(
        &self,
        what: &str,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
    ) -> Result<T, CatalogError> {
        let transport = |source| CatalogError::Transport {
            what: what.to_string(),
            url: url.to_string(),
            source,
        };
        let mut request = self.http.request(method, url.clone());
        if let Some(deadline) = Deadline::current() {
            // At least a moment: a zero timeout would not even try.
            request = request.timeout(deadline.clip(self.timeout).max(Duration::from_millis(1)));
        }
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
        }
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let bytes = response.bytes().await.map_err(transport)?;
        if !status.is_success() {
            return Err(api_error(what, status, &bytes, retry_after));
        }
        serde_json::from_slice(&bytes).map_err(|e| CatalogError::Decode {
            what: what.to_string(),
            message: format!("{e}; body: {}", truncate(&bytes)),
        })
    }

    async fn post_json<T: DeserializeOwned, B: Serialize>(
        &self,
        what: &str,
        url: Url,
        body: &B,
    ) -> Result<T, CatalogError> {
        let body = serde_json::to_vec(body).map_err(|e| CatalogError::Decode {
            what: what.to_string(),
            message: format!("cannot encode request: {e}"),
        })?;
        self.send(what, Method::POST, url, Some(body)).await
    }

    /// `GET /catalogs/{c}`.
    pub async fn get_catalog(&self) -> Result<Catalog, CatalogError> {
        let what = format!("GET catalog {}", self.catalog);
        self.send(&what, Method::GET, self.url(&[]), None).await
    }

    /// The catalog, created with `data_path` when it is missing and a data
    /// path is configured (GET, on 404 POST, on 409 GET again). Without a
    /// data path a missing catalog is [`CatalogError::MissingCatalog`].
    pub async fn resolve_catalog(&self, data_path: Option<&str>) -> Result<Catalog, CatalogError> {
        match self.get_catalog().await {
            Err(e) if e.status() == Some(404) => {}
            other => return other,
        }
        let Some(data_path) = data_path else {
            return Err(CatalogError::MissingCatalog {
                catalog: self.catalog.clone(),
            });
        };
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("base URL checked in new()")
            .push("catalogs");
        let what = format!("create catalog {}", self.catalog);
        let body = serde_json::json!({"name": self.catalog, "data_path": data_path});
        match self.post_json::<Catalog, _>(&what, url, &body).await {
            Err(e) if e.code() == Some("already_exists") => self.get_catalog().await,
            other => other,
        }
    }

    /// Creates the namespace unless it exists (409 `already_exists` is fine).
    pub async fn ensure_namespace(&self, namespace: &str) -> Result<(), CatalogError> {
        let what = format!("GET namespace {namespace}");
        match self
            .send::<serde_json::Value>(
                &what,
                Method::GET,
                self.url(&["namespaces", namespace]),
                None,
            )
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if e.status() == Some(404) => {}
            Err(e) => return Err(e),
        }
        let what = format!("create namespace {namespace}");
        let body = serde_json::json!({"name": namespace});
        match self
            .post_json::<serde_json::Value, _>(&what, self.url(&["namespaces"]), &body)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some("already_exists") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `GET …/tables/{t}?totals=false`: columns with field ids, the
    /// incarnation uuid and `read_snapshot_id`. `Ok(None)` when absent.
    pub async fn get_table(
        &self,
        namespace: &str,
        table: &str,
    ) -> Result<Option<Table>, CatalogError> {
        let mut url = self.url(&["namespaces", namespace, "tables", table]);
        url.query_pairs_mut().append_pair("totals", "false");
        let what = format!("GET table {namespace}.{table}");
        match self.send(&what, Method::GET, url, None).await {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates a table; on 409 `already_exists` (another writer won the
    /// race) the live table is returned instead.
    pub async fn create_table(
        &self,
        namespace: &str,
        table: &str,
        columns: &[ColumnDef],
    ) -> Result<Table, CatalogError> {
        let what = format!("create table {namespace}.{table}");
        let body = serde_json::json!({"name": table, "columns": columns});
        match self
            .post_json(&what, self.url(&["namespaces", namespace, "tables"]), &body)
            .await
        {
            Err(e) if e.code() == Some("already_exists") => self
                .get_table(namespace, table)
                .await?
                .ok_or_else(|| CatalogError::Decode {
                    what,
                    message: "the server said the table exists but GET found none".into(),
                }),
            other => other,
        }
    }

    /// The table, created from `columns` when it does not exist.
    pub async fn get_or_create_table(
        &self,
        namespace: &str,
        table: &str,
        columns: &[ColumnDef],
    ) -> Result<Table, CatalogError> {
        match self.get_table(namespace, table).await? {
            Some(t) => Ok(t),
            None => self.create_table(namespace, table, columns).await,
        }
    }

    /// All `ops` in ONE alter (one DDL snapshot), guarded by the incarnation
    /// the caller read. Answers the altered table.
    pub async fn alter_table(
        &self,
        namespace: &str,
        table: &str,
        expected_table_uuid: Option<&str>,
        ops: &[AlterOp],
    ) -> Result<Table, CatalogError> {
        let mut url = self.url(&["namespaces", namespace, "tables", table, "alter"]);
        if let Some(uuid) = expected_table_uuid {
            url.query_pairs_mut()
                .append_pair("expected_table_uuid", uuid);
        }
        let what = format!("alter table {namespace}.{table}");
        self.post_json(&what, url, &serde_json::json!({"ops": ops}))
            .await
    }

    /// Adds every column in `columns` with one batched alter.
    pub async fn add_columns(
        &self,
        namespace: &str,
        table: &str,
        expected_table_uuid: Option<&str>,
        columns: &[ColumnDef],
    ) -> Result<Table, CatalogError> {
        let ops: Vec<AlterOp> = columns
            .iter()
            .map(|c| AlterOp::AddColumn { column: c.clone() })
            .collect();
        self.alter_table(namespace, table, expected_table_uuid, &ops)
            .await
    }

    /// `POST …/commit/prepared` with an already-serialised payload, sent
    /// byte for byte as given (a retry must be the identical request).
    pub async fn commit_prepared(&self, payload: &[u8]) -> Result<CommitResult, CatalogError> {
        let what = format!("commit/prepared to catalog {}", self.catalog);
        self.send(
            &what,
            Method::POST,
            self.url(&["commit", "prepared"]),
            Some(payload.to_vec()),
        )
        .await
    }

    /// `GET …/commit/receipts/{key}`; `Ok(None)` when there is no receipt
    /// (which does not prove an in-flight commit will not land).
    pub async fn receipt(&self, key: &uuid::Uuid) -> Result<Option<CommitResult>, CatalogError> {
        let key = key.to_string();
        let what = format!("GET receipt {key}");
        match self
            .send(
                &what,
                Method::GET,
                self.url(&["commit", "receipts", &key]),
                None,
            )
            .await
        {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET …/tables/{t}/files[?snapshot=]`: the files visible at a snapshot.
    pub async fn list_files(
        &self,
        namespace: &str,
        table: &str,
        snapshot: Option<i64>,
    ) -> Result<Vec<DataFile>, CatalogError> {
        let mut url = self.url(&["namespaces", namespace, "tables", table, "files"]);
        if let Some(s) = snapshot {
            url.query_pairs_mut()
                .append_pair("snapshot", &s.to_string());
        }
        let what = format!("list files of {namespace}.{table}");
        self.send(&what, Method::GET, url, None).await
    }
}

fn api_error(
    what: &str,
    status: StatusCode,
    bytes: &[u8],
    retry_after: Option<Duration>,
) -> CatalogError {
    let body: Option<ErrorBody> = serde_json::from_slice(bytes).ok();
    let (code, detail, tables) = match body {
        Some(b) => (
            b.error
                .unwrap_or_else(|| format!("http_{}", status.as_u16())),
            b.detail,
            b.tables,
        ),
        None => (
            format!("http_{}", status.as_u16()),
            (!bytes.is_empty()).then(|| truncate(bytes)),
            Vec::new(),
        ),
    };
    CatalogError::Api {
        what: what.to_string(),
        status: status.as_u16(),
        code,
        detail,
        tables,
        retry_after,
    }
}

fn truncate(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: String = text.chars().take(500).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_follow_the_api_document() {
        assert_eq!(classify(503, "commit_queue_timeout"), ErrorClass::Retry);
        assert_eq!(classify(502, "http_502"), ErrorClass::Retry);
        assert_eq!(classify(429, "http_429"), ErrorClass::Retry);
        assert_eq!(
            classify(409, "ddl_since_read_snapshot"),
            ErrorClass::RePrepare
        );
        assert_eq!(classify(409, "table_recreated"), ErrorClass::RePrepare);
        assert_eq!(classify(410, "expired"), ErrorClass::RePrepare);
        assert_eq!(classify(409, "offset_regression"), ErrorClass::Permanent);
        assert_eq!(classify(422, "validation"), ErrorClass::Permanent);
        assert_eq!(classify(400, "bad_request"), ErrorClass::Permanent);
        assert_eq!(classify(501, "http_501"), ErrorClass::Permanent);
    }

    #[test]
    fn retry_after_is_delta_seconds() {
        assert_eq!(parse_retry_after("1"), Some(Duration::from_secs(1)));
        assert_eq!(
            parse_retry_after(" 2.5 "),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }

    #[test]
    fn urls_percent_encode_segments_and_append_v1() {
        let c = CatalogClient::new("http://h:1/root/", "demo", DEFAULT_REQUEST_TIMEOUT).unwrap();
        assert_eq!(
            c.url(&["namespaces", "a b", "tables", "t/x"]).as_str(),
            "http://h:1/root/v1/catalogs/demo/namespaces/a%20b/tables/t%2Fx"
        );
        assert!(CatalogClient::new("ftp://h", "demo", DEFAULT_REQUEST_TIMEOUT).is_err());
    }

    #[test]
    fn api_errors_carry_code_tables_and_retry_after() {
        let e = api_error(
            "commit",
            StatusCode::CONFLICT,
            br#"{"error":"table_recreated","detail":"x","tables":["a.b"],"retry":"re-prepare"}"#,
            None,
        );
        assert_eq!(e.class(), ErrorClass::RePrepare);
        assert!(matches!(&e, CatalogError::Api { tables, .. } if tables == &["a.b"]));
        let e = api_error(
            "commit",
            StatusCode::BAD_GATEWAY,
            b"<html>",
            Some(Duration::from_secs(3)),
        );
        assert_eq!(e.code(), Some("http_502"));
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(e.class(), ErrorClass::Retry);
    }
}
