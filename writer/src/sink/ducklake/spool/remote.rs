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
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};

use crate::sink::ducklake::config::S3Config;

/// Files up to this size are one PUT; larger ones a multipart upload of
/// parts this size (S3's smallest part is 5 MiB), two parts in flight.
const PART: usize = 8 << 20;

pub struct Remote {
    store: Arc<dyn ObjectStore>,
    /// The uploads run here; the sink's calls block, off the writer's runtime.
    runtime: tokio::runtime::Runtime,
    bucket: String,
    /// The table folder's key in the bucket, without slashes at the ends.
    folder: String,
    /// Where files wait for their upload.
    pub staging: PathBuf,
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
        staging: PathBuf,
    ) -> Result<Option<Remote>, String> {
        let Some(rest) = data_path.strip_prefix("s3://") else {
            return Ok(None);
        };
        let s3 = s3.ok_or("DUCKDB_S3_* settings are required for an s3:// data path")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(format!("data path {data_path} names no bucket"));
        }
        let folder = [prefix.trim_matches('/'), folder.trim_matches('/')]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("/");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("starting the upload runtime: {e}"))?;
        Ok(Some(Remote {
            store: Arc::new(store(bucket, s3)?),
            runtime,
            bucket: bucket.to_owned(),
            folder,
            staging,
        }))
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
        let err =
            |e: &dyn std::fmt::Display| format!("uploading {} to {url}: {e}", local.display());
        let mut file = File::open(local).map_err(|e| err(&e))?;
        let size = file.metadata().map_err(|e| err(&e))?.len() as usize;
        self.runtime
            .block_on(async {
                if size <= PART {
                    let mut all = Vec::with_capacity(size);
                    file.read_to_end(&mut all)?;
                    self.store.put(&key, PutPayload::from(all)).await?;
                    return Ok::<(), Box<dyn std::error::Error>>(());
                }
                let upload = self.store.put_multipart(&key).await?;
                let mut parts = WriteMultipart::new_with_chunk_size(upload, PART);
                let mut buf = vec![0u8; PART];
                loop {
                    let n = read_full(&mut file, &mut buf)?;
                    if n == 0 {
                        break;
                    }
                    parts.wait_for_capacity(2).await?;
                    parts.write(&buf[..n]);
                }
                parts.finish().await?;
                Ok(())
            })
            .map_err(|e| err(&e))?;
        Ok(url)
    }

    /// Deletes an uploaded file no commit can have made part of the lake.
    pub fn delete(&self, url: &str) -> Result<(), String> {
        let key = url
            .strip_prefix(&format!("s3://{}/", self.bucket))
            .ok_or_else(|| format!("{url} is not in bucket {}", self.bucket))?;
        self.runtime
            .block_on(self.store.delete(&Key::from(key)))
            .map_err(|e| format!("deleting {url}: {e}"))
    }
}

/// `$TMPDIR/millpond-writer-spool/<pid>`, empty: this process's files
/// waiting for their upload. Folders of processes no longer running (a
/// writer killed with files waiting; in a container, the writer restarted
/// under the same pid) go first: their files were never registered from
/// there, as only uploaded copies are.
pub fn staging() -> PathBuf {
    let base = std::env::temp_dir().join("millpond-writer-spool");
    let own = std::process::id().to_string();
    if let Ok(entries) = std::fs::read_dir(&base) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let running = name != own && Path::new("/proc").join(&name).exists();
            if !running {
                if let Err(err) = std::fs::remove_dir_all(e.path()) {
                    tracing::warn!(folder = %e.path().display(), error = %err, "could not remove a spool folder left by a writer no longer running");
                }
            }
        }
    }
    base.join(own)
}

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

/// The bucket as DuckDB's settings describe it: an endpoint is `host:port`
/// over https unless DUCKDB_S3_USE_SSL=false; `path` URL style addresses
/// the bucket in the path.
fn store(bucket: &str, s3: &S3Config) -> Result<object_store::aws::AmazonS3, String> {
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_access_key_id(s3.key_id.expose())
        .with_secret_access_key(s3.secret.expose())
        .with_region(s3.region.as_deref().unwrap_or("us-east-1"));
    if let Some(endpoint) = s3.endpoint.as_deref().filter(|e| !e.trim().is_empty()) {
        let https = s3.use_ssl.unwrap_or(true);
        let url = if endpoint.contains("://") {
            endpoint.to_owned()
        } else {
            format!("{}://{endpoint}", if https { "https" } else { "http" })
        };
        b = b
            .with_allow_http(url.starts_with("http://"))
            .with_endpoint(url);
    }
    let path_style = s3.url_style.as_deref() == Some("path");
    b = b.with_virtual_hosted_style_request(!path_style);
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
        let r = Remote::for_data_path("s3://b/lake/", Some(&s3()), "main/events", "/tmp/x".into())
            .unwrap()
            .unwrap();
        assert_eq!(
            r.url(Path::new("/tmp/x/ducklake-1.parquet")),
            "s3://b/lake/main/events/ducklake-1.parquet"
        );
        let bare = Remote::for_data_path("s3://b", Some(&s3()), "main/events", "/tmp/x".into())
            .unwrap()
            .unwrap();
        assert_eq!(
            bare.url(Path::new("f.parquet")),
            "s3://b/main/events/f.parquet"
        );
        assert!(
            Remote::for_data_path("/data/", None, "main/events", "/tmp/x".into())
                .unwrap()
                .is_none()
        );
        assert!(Remote::for_data_path("s3:///x", Some(&s3()), "m/e", "/tmp/x".into()).is_err());
    }

    #[test]
    fn staging_removes_the_folders_of_writers_no_longer_running() {
        let base = std::env::temp_dir().join("millpond-writer-spool");
        // Past the kernel's largest pid: no such process.
        let dead = base.join("4194305");
        std::fs::create_dir_all(&dead).unwrap();
        std::fs::write(dead.join("ducklake-x.parquet"), b"x").unwrap();
        let own = staging();
        assert_eq!(own, base.join(std::process::id().to_string()));
        assert!(!dead.exists(), "the dead writer's folder is gone");
    }

    #[test]
    fn debug_names_no_key() {
        let r = Remote::for_data_path("s3://b/lake/", Some(&s3()), "main/events", "/tmp/x".into())
            .unwrap()
            .unwrap();
        let shown = format!("{r:?}");
        assert!(
            !shown.contains("AKIDEXAMPLE") && !shown.contains("EXAMPLEKEY"),
            "{shown}"
        );
    }
}
