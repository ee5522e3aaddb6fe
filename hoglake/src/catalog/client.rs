//! The REST calls of the publish path (hoglake-api.md sections 4-7), each
//! cut at the write's [`Deadline`].
use std::time::Duration;

use reqwest::{Method, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;

use millpond_shared::config::SecretUrl;
use millpond_shared::deadline::Deadline;

use super::error::{api_error, truncate};
use super::{
    parse_retry_after, AlterOp, Catalog, CatalogError, CommitResult, DataFile, USER_AGENT,
};
use crate::schema::{ColumnDef, Table};

/// A client for one catalog on one hoglake server.
#[derive(Clone)]
pub struct CatalogClient {
    http: reqwest::Client,
    /// Per-request timeout (HOGLAKE_REQUEST_TIMEOUT_S), clipped to the time
    /// left under a write's [`Deadline`].
    timeout: Duration,
    /// `{server}/v1`.
    base: Url,
    catalog: String,
}

/// The server's URL masked (HOGLAKE_URL may carry credentials).
impl std::fmt::Debug for CatalogClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogClient")
            .field("base", &SecretUrl::from(self.base.clone()))
            .field("catalog", &self.catalog)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl CatalogClient {
    /// `server` is the control-plane root (HOGLAKE_URL); `/v1` is appended.
    pub fn new(server: &str, catalog: &str, timeout: Duration) -> Result<Self, CatalogError> {
        let mut base = SecretUrl::parse(server.trim_end_matches('/'))
            .map_err(|e| CatalogError::Config(format!("HOGLAKE_URL {e}")))?
            .expose()
            .clone();
        base.path_segments_mut()
            .map_err(|_| CatalogError::Config("HOGLAKE_URL cannot be a base".into()))?
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
    pub(super) fn url(&self, segments: &[&str]) -> Url {
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
        // The URL masked, and not in the client's error: HOGLAKE_URL may
        // carry a user, a password or a token.
        let transport = |source: reqwest::Error| CatalogError::Transport {
            what: what.to_string(),
            url: SecretUrl::from(url.clone()).masked(),
            source: source.without_url(),
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

    /// `POST …/commit/mutations/prepared` with an already-serialised
    /// payload (appends plus delete groups), sent byte for byte as given.
    pub async fn commit_mutation(&self, payload: &[u8]) -> Result<CommitResult, CatalogError> {
        let what = format!("commit/mutations/prepared to catalog {}", self.catalog);
        self.send(
            &what,
            Method::POST,
            self.url(&["commit", "mutations", "prepared"]),
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

    /// The file registered last at `snapshot` whose partition value at
    /// `key_index` is `value` (`?partition=&sort=begin_snapshot&order=desc&limit=1`),
    /// `Ok(None)` when there is none.
    pub async fn last_file_in_partition(
        &self,
        namespace: &str,
        table: &str,
        snapshot: i64,
        (key_index, value): (usize, &str),
    ) -> Result<Option<DataFile>, CatalogError> {
        let mut url = self.url(&["namespaces", namespace, "tables", table, "files"]);
        url.query_pairs_mut()
            .append_pair("snapshot", &snapshot.to_string())
            .append_pair("partition", &format!("{key_index}:{value}"))
            .append_pair("sort", "begin_snapshot")
            .append_pair("order", "desc")
            .append_pair("limit", "1");
        let what = format!("list the last file of {namespace}.{table}");
        let files: Vec<DataFile> = self.send(&what, Method::GET, url, None).await?;
        Ok(files.into_iter().next())
    }

    /// `GET …/namespaces/{ns}/tables`: the names of the namespace's tables
    /// (an absent namespace has none).
    pub async fn table_names(&self, namespace: &str) -> Result<Vec<String>, CatalogError> {
        #[derive(serde::Deserialize)]
        struct Summary {
            name: String,
        }
        let url = self.url(&["namespaces", namespace, "tables"]);
        let what = format!("list tables of {namespace}");
        match self
            .send::<Vec<Summary>>(&what, Method::GET, url, None)
            .await
        {
            Ok(rows) => Ok(rows.into_iter().map(|t| t.name).collect()),
            Err(e) if e.status() == Some(404) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }
}
