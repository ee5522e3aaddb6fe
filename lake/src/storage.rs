//! Moving a file of the lake aside, byte for byte: a rename on a local data
//! path, a copy and then a delete of the source in the bucket (with the
//! session's own DUCKDB_S3_* settings). A move never overwrites: a
//! destination that exists is an error and the source stays.
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt};

use millpond_writer::lake_api::s3_store as store;
use millpond_writer::lake_api::LakeConfig;

pub enum Storage {
    Local,
    S3(Box<Bucket>),
}

pub struct Bucket {
    bucket: String,
    store: Box<dyn ObjectStore>,
    runtime: tokio::runtime::Runtime,
    cfg: LakeConfig,
}

impl Storage {
    /// The storage of the lake's data path.
    pub fn for_lake(cfg: &LakeConfig) -> anyhow::Result<Storage> {
        let Some(rest) = cfg.data_path.strip_prefix("s3://") else {
            return Ok(Storage::Local);
        };
        let s3 = cfg.s3.as_ref().ok_or_else(|| {
            anyhow::anyhow!("DUCKDB_S3_* settings are required for an s3:// data path")
        })?;
        let bucket = rest.split('/').next().unwrap_or_default().to_owned();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Storage::S3(Box::new(Bucket {
            store: Box::new(store(&bucket, s3).map_err(anyhow::Error::msg)?),
            bucket,
            runtime,
            cfg: cfg.clone(),
        })))
    }

    /// Moves `from` to `to` (both in this storage); fails, leaving `from`
    /// where it is, if `to` exists.
    pub fn move_file(&self, from: &str, to: &str) -> anyhow::Result<()> {
        match self {
            Storage::Local => {
                let to_path = std::path::Path::new(to);
                if to_path.exists() {
                    anyhow::bail!("{to} exists; {from} not moved");
                }
                if let Some(dir) = to_path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::rename(from, to).or_else(|_| {
                    std::fs::copy(from, to)?;
                    std::fs::remove_file(from)
                })?;
                Ok(())
            }
            Storage::S3(b) => {
                let Bucket {
                    bucket,
                    store,
                    runtime,
                    cfg,
                } = b.as_ref();
                let key = |url: &str| {
                    url.strip_prefix(&format!("s3://{bucket}/"))
                        .map(Key::from)
                        .ok_or_else(|| anyhow::anyhow!("{url} is not in bucket {bucket}"))
                };
                let (src, dst) = (key(from)?, key(to)?);
                let scrub = |e: object_store::Error| {
                    anyhow::anyhow!(
                        "{}",
                        millpond_writer::lake_api::scrub(
                            cfg,
                            &format!("moving {from} to {to}: {e}")
                        )
                    )
                };
                runtime.block_on(async {
                    match store.head(&dst).await {
                        Ok(_) => anyhow::bail!("{to} exists; {from} not moved"),
                        Err(object_store::Error::NotFound { .. }) => {}
                        Err(e) => return Err(scrub(e)),
                    }
                    let size = store.head(&src).await.map_err(scrub)?.size;
                    store.copy(&src, &dst).await.map_err(scrub)?;
                    let copied = store.head(&dst).await.map_err(scrub)?.size;
                    if copied != size {
                        anyhow::bail!("the copy of {from} at {to} has {copied} bytes, not {size}; the source stays");
                    }
                    store.delete(&src).await.map_err(scrub)
                })
            }
        }
    }
}
