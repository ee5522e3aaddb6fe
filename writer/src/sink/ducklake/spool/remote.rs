//! A lake whose data path is on S3: the spool writes each file to a local
//! folder, and uploads it to the table's folder in the bucket, where
//! DuckLake would have put it, before the files are registered. The local
//! copies are deleted once the upload is done with.
//!
//! The bucket is reached with the session's own settings (DUCKDB_S3_*), so
//! the writer and DuckDB (which reads each file's footer when it is
//! registered) see the same objects.
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::stream::{FuturesUnordered, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};

use super::private_dir;
use crate::sink::ducklake::config::S3Config;

fn upload_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the upload runtime: {e}"))
}

/// `prefix/folder`, without empty parts or slashes at the ends.
fn key_folder(prefix: &str, folder: &str) -> String {
    [prefix, folder.trim_matches('/')]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("/")
}

/// Files up to this size are one PUT; larger ones a multipart upload of
/// parts this size (S3's smallest part is 5 MiB), two parts in flight.
const PART: usize = 8 << 20;

pub struct Remote {
    store: Arc<dyn ObjectStore>,
    /// The uploads run here; the sink's calls block, off the writer's
    /// runtime. Shut down without waiting when dropped (also from async
    /// code, where dropping a runtime would panic).
    runtime: Option<tokio::runtime::Runtime>,
    bucket: String,
    /// The data path's key in the bucket, without slashes at the ends.
    prefix: String,
    /// The table folder's key in the bucket, without slashes at the ends.
    folder: String,
    /// Where files wait for their upload.
    pub staging: PathBuf,
    /// Held while this writer runs: the staging folder is in use.
    _lock: File,
    /// Masked out of every error (an S3 error body can name the key id).
    s3: S3Config,
}

impl Drop for Remote {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("bucket", &self.bucket)
            .field("folder", &self.folder)
            .field("staging", &self.staging)
            .finish()
    }
}

impl Remote {
    /// `None` unless `data_path` is an `s3://` URL. `staging` is the local
    /// folder for files before their upload; `folder` the table's path
    /// under the data path (`schema/table`).
    pub fn for_data_path(
        data_path: &str,
        s3: Option<&S3Config>,
        folder: &str,
        staging_base: &Path,
    ) -> Result<Option<Remote>, String> {
        let Some(rest) = data_path.strip_prefix("s3://") else {
            return Ok(None);
        };
        let s3 = s3.ok_or("DUCKDB_S3_* settings are required for an s3:// data path")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(format!("data path {data_path} names no bucket"));
        }
        let prefix = prefix.trim_matches('/').to_owned();
        let (staging, lock) = staging(staging_base)?;
        Ok(Some(Remote {
            store: Arc::new(store(bucket, s3)?),
            runtime: Some(upload_runtime()?),
            bucket: bucket.to_owned(),
            folder: key_folder(&prefix, folder),
            prefix,
            staging,
            _lock: lock,
            s3: s3.clone(),
        }))
    }

    /// The same bucket and staging folder, for another table's folder
    /// (`schema/table` under the data path).
    pub fn for_folder(&self, folder: &str) -> Result<Remote, String> {
        Ok(Remote {
            store: self.store.clone(),
            runtime: Some(upload_runtime()?),
            bucket: self.bucket.clone(),
            folder: key_folder(&self.prefix, folder),
            prefix: self.prefix.clone(),
            staging: self.staging.clone(),
            _lock: self
                ._lock
                .try_clone()
                .map_err(|e| format!("sharing the staging folder's lock: {e}"))?,
            s3: self.s3.clone(),
        })
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime
            .as_ref()
            .expect("a runtime until dropped")
            .block_on(f)
    }

    fn scrub(&self, msg: &str) -> String {
        self.s3.secret.scrub(&self.s3.key_id.scrub(msg))
    }

    /// The URL a local file gets in the bucket: the table's folder, the
    /// same file name.
    pub fn url(&self, local: &Path) -> String {
        format!("s3://{}/{}", self.bucket, self.key(local))
    }

    fn key(&self, local: &Path) -> String {
        let name = local.file_name().map(|n| n.to_string_lossy().into_owned());
        format!("{}/{}", self.folder, name.unwrap_or_default())
    }

    /// Uploads the local file to [`Remote::url`], which it returns.
    pub fn upload(&self, local: &Path) -> Result<String, String> {
        let url = self.url(local);
        let key = Key::from(self.key(local));
        let err = |e: &dyn std::fmt::Display| {
            self.scrub(&format!("uploading {} to {url}: {e}", local.display()))
        };
        let mut file = File::open(local).map_err(|e| err(&e))?;
        let size = file.metadata().map_err(|e| err(&e))?.len() as usize;
        self.block_on(async {
            if size <= PART {
                let mut all = Vec::with_capacity(size);
                file.read_to_end(&mut all)?;
                self.store.put(&key, PutPayload::from(all)).await?;
                return Ok::<(), Box<dyn std::error::Error>>(());
            }
            let mut upload = self.store.put_multipart(&key).await?;
            let sent: Result<(), Box<dyn std::error::Error>> = async {
                let mut in_flight = FuturesUnordered::new();
                loop {
                    let mut part = vec![0u8; PART];
                    let n = read_full(&mut file, &mut part)?;
                    if n == 0 {
                        break;
                    }
                    part.truncate(n);
                    if in_flight.len() >= 2 {
                        in_flight.try_next().await?;
                    }
                    in_flight.push(upload.put_part(PutPayload::from(part)));
                }
                while in_flight.try_next().await?.is_some() {}
                upload.complete().await?;
                Ok(())
            }
            .await;
            if sent.is_err() {
                // No parts left behind in the bucket, whichever step failed.
                let _ = upload.abort().await;
            }
            sent
        })
        .map_err(|e| err(&e))?;
        Ok(url)
    }

    /// Deletes an uploaded file no commit can have made part of the lake.
    pub fn delete(&self, url: &str) -> Result<(), String> {
        let key = url
            .strip_prefix(&format!("s3://{}/", self.bucket))
            .ok_or_else(|| format!("{url} is not in bucket {}", self.bucket))?;
        self.block_on(self.store.delete(&Key::from(key)))
            .map_err(|e| self.scrub(&format!("deleting {url}: {e}")))
    }
}

/// The folder under `base` where this writer's files wait for their
/// upload (`<uuid>`), and the lock that marks it in use while the writer
/// runs. `base` must be a private folder of this user ([`private_dir`]),
/// made when missing. Folders whose lock no one holds were left by writers
/// no longer running (killed with files waiting) and are removed: their
/// files were never registered from there, only uploaded copies are. Only
/// the writer's own folders are removed (a UUID name, this user's, not a
/// symbolic link); anything else in `base` is left alone. Locks rather
/// than pids, so that writers sharing the folder across containers are safe.
pub fn staging(base: &Path) -> Result<(PathBuf, File), String> {
    private_dir::ensure(base)?;
    let err = |e: std::io::Error| format!("the spool folder {}: {e}", base.display());
    for entry in std::fs::read_dir(base).map_err(err)?.flatten() {
        let folder = entry.path();
        if !private_dir::is_own_folder(&folder) {
            continue;
        }
        let held = match File::open(folder.join(LOCK)) {
            Ok(lock) => lock.try_lock().is_err(),
            // Another writer's folder an instant before its lock exists.
            Err(_) => entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < JUST_MADE)),
        };
        if held {
            continue;
        }
        // remove_dir_all removes symbolic links inside, never what they
        // point to.
        if let Err(e) = std::fs::remove_dir_all(&folder) {
            tracing::warn!(folder = %folder.display(), error = %e, "could not remove a spool folder left by a writer no longer running");
        }
    }
    let id = uuid::Uuid::new_v4().to_string();
    let own = base.join(&id);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&own)
        .map_err(err)?;
    // Locked under another name first: a writer starting meanwhile sees
    // either no lock (a folder being made) or a held one, never a free one.
    let made = own.join(format!("{LOCK}.{id}"));
    let lock = private_dir::new_file(&made).map_err(err)?;
    lock.try_lock()
        .map_err(|e| format!("locking {}: {e}", made.display()))?;
    std::fs::rename(&made, own.join(LOCK)).map_err(err)?;
    Ok((own, lock))
}

/// The lock file of a staging folder.
const LOCK: &str = ".lock";
/// A staging folder younger than this without its lock is being made.
const JUST_MADE: std::time::Duration = std::time::Duration::from_secs(60);

/// Fills `buf` from `r` unless the file ends first; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The endpoint DuckDB sends a request for `bucket` to: `host:port` over
/// https unless DUCKDB_S3_USE_SSL=false, the bucket a subdomain of the host
/// unless DUCKDB_S3_URL_STYLE=path. With the bucket in the host,
/// object_store takes the endpoint as it is. `None`: AWS's own endpoint
/// for the region.
fn endpoint_url(bucket: &str, s3: &S3Config) -> Option<String> {
    let endpoint = s3.endpoint.as_deref().filter(|e| !e.trim().is_empty())?;
    let (scheme, host) = match endpoint.split_once("://") {
        Some((scheme, host)) => (scheme, host),
        None if s3.use_ssl.unwrap_or(true) => ("https", endpoint),
        None => ("http", endpoint),
    };
    let host = host.trim_end_matches('/');
    Some(if s3.url_style.as_deref() == Some("path") {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{bucket}.{host}")
    })
}

/// The bucket as DuckDB's settings describe it: an endpoint is `host:port`
/// over https unless DUCKDB_S3_USE_SSL=false; `path` URL style addresses
/// the bucket in the path.
pub(crate) fn store(bucket: &str, s3: &S3Config) -> Result<object_store::aws::AmazonS3, String> {
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_access_key_id(s3.key_id.expose())
        .with_secret_access_key(s3.secret.expose())
        .with_region(s3.region.as_deref().unwrap_or("us-east-1"))
        // A few quick retries per request; past them the flush's own retry
        // ladder takes over, so an outage ends in a crash Kafka replays.
        .with_retry(RetryConfig {
            max_retries: 3,
            retry_timeout: std::time::Duration::from_secs(60),
            ..Default::default()
        });
    if let Some(url) = endpoint_url(bucket, s3) {
        b = b
            .with_allow_http(url.starts_with("http://"))
            .with_endpoint(url);
    }
    b = b.with_virtual_hosted_style_request(s3.url_style.as_deref() != Some("path"));
    // The keys stay out of the message: the builder's errors name settings.
    b.build()
        .map_err(|e| format!("the S3 settings (DUCKDB_S3_*) do not make a client: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::config::Secret;

    fn s3() -> S3Config {
        S3Config {
            key_id: Secret::new("AKIDEXAMPLE"),
            secret: Secret::new("wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"),
            region: Some("eu-west-1".into()),
            endpoint: Some("127.0.0.1:9000".into()),
            use_ssl: Some(false),
            url_style: Some("path".into()),
        }
    }

    #[test]
    fn files_go_to_the_tables_folder_under_the_data_path() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("spool");
        let remote = |path: &str| Remote::for_data_path(path, Some(&s3()), "main/events", &base);
        let r = remote("s3://b/lake/").unwrap().unwrap();
        assert_eq!(
            r.url(Path::new("/tmp/x/ducklake-1.parquet")),
            "s3://b/lake/main/events/ducklake-1.parquet"
        );
        let bare = remote("s3://b").unwrap().unwrap();
        assert_eq!(
            bare.url(Path::new("f.parquet")),
            "s3://b/main/events/f.parquet"
        );
        assert!(remote("/data/").unwrap().is_none());
        assert!(remote("s3:///x").is_err());
    }

    #[test]
    fn the_endpoint_is_the_one_duckdb_uses() {
        let mut c = s3();
        assert_eq!(endpoint_url("b", &c).unwrap(), "http://127.0.0.1:9000");
        c.url_style = None;
        c.use_ssl = None;
        c.endpoint = Some("s3.eu-west-1.amazonaws.com".into());
        assert_eq!(
            endpoint_url("b", &c).unwrap(),
            "https://b.s3.eu-west-1.amazonaws.com"
        );
        c.url_style = Some("vhost".into());
        c.endpoint = Some("http://minio:9000/".into());
        assert_eq!(endpoint_url("b", &c).unwrap(), "http://b.minio:9000");
        c.endpoint = None;
        assert_eq!(endpoint_url("b", &c), None);
    }

    #[test]
    fn staging_keeps_live_folders_and_removes_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("spool");
        let (live, _held) = staging(&base).unwrap();
        std::fs::write(live.join("ducklake-a.parquet"), b"a").unwrap();
        // A writer killed with a file waiting: its lock is no longer held.
        let (dead, lock) = staging(&base).unwrap();
        std::fs::write(dead.join("ducklake-b.parquet"), b"b").unwrap();
        drop(lock);
        let (own, _lock) = staging(&base).unwrap();
        assert!(
            live.join("ducklake-a.parquet").exists(),
            "a running writer's folder stays"
        );
        assert!(!dead.exists(), "the dead writer's folder is gone");
        assert!(own.exists() && own != live);
    }

    #[test]
    fn debug_and_errors_name_no_key() {
        let tmp = tempfile::tempdir().unwrap();
        let r = Remote::for_data_path(
            "s3://b/lake/",
            Some(&s3()),
            "main/events",
            &tmp.path().join("spool"),
        )
        .unwrap()
        .unwrap();
        let shown = format!("{r:?}");
        assert!(
            !shown.contains("AKIDEXAMPLE") && !shown.contains("EXAMPLEKEY"),
            "{shown}"
        );
        assert_eq!(
            r.scrub("body <AWSAccessKeyId>AKIDEXAMPLE</AWSAccessKeyId>"),
            "body <AWSAccessKeyId>***</AWSAccessKeyId>"
        );
    }
}
