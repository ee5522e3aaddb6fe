//! Uploading data files to the catalog's S3 data path with `object_store`.
//!
//! Objects are named as pyhoglake's prepared appends name them
//! ([`crate::registration::object_uri`]):
//! `{data_path}/data/{namespace}/{table}/{idempotency_key}/{uuid4}-{index}.parquet`.
//! One `PutObject` per file. An endpoint override (MinIO, moto) switches to
//! path-style addressing, and `http://` endpoints are allowed.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use millpond_shared::deadline::Deadline;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// How to reach the bucket. Keys are optional, as a pair; without them the
/// AWS default credential chain (environment, IRSA web identity) is used.
#[derive(Clone, Default)]
pub struct S3Config {
    /// `HOGLAKE_S3_ENDPOINT`; `host:port` without a scheme means `http://`.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
}

// The keys never reach logs: Debug names only whether they are set.
impl fmt::Debug for S3Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Config")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("credentials", &self.credential_source())
            .finish()
    }
}

impl S3Config {
    /// `static keys` or `default credential chain`, for logs.
    pub fn credential_source(&self) -> &'static str {
        if self.access_key_id.is_some() {
            "static keys (HOGLAKE_S3_ACCESS_KEY)"
        } else {
            "default credential chain"
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("data path `{0}` is not an s3://bucket[/prefix] URI; fix HOGLAKE_DATA_PATH or the catalog's data_path")]
    DataPath(String),
    #[error("object URI `{uri}` is outside the data path `{data_path}`")]
    OutsideDataPath { uri: String, data_path: String },
    #[error("S3 configuration: {0}")]
    Config(String),
    #[error("upload of {uri} failed ({credentials}): {source}")]
    Upload {
        uri: String,
        credentials: &'static str,
        #[source]
        source: Box<object_store::Error>,
    },
    /// The write's deadline came before the upload's answer (the object
    /// may exist).
    #[error("upload of {uri} cut at {deadline}")]
    Cut { uri: String, deadline: String },
    #[error("object store probe: cannot write the marker {uri} ({credentials}): {source}; {hint}")]
    Probe {
        uri: String,
        credentials: &'static str,
        hint: &'static str,
        #[source]
        source: Box<object_store::Error>,
    },
    #[error("read of {uri} failed: {source}")]
    Read {
        uri: String,
        #[source]
        source: Box<object_store::Error>,
    },
}

/// `s3://bucket/prefix/` -> (`bucket`, `prefix` without slashes at the ends).
pub fn split_s3_uri(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix("s3://")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    (!bucket.is_empty()).then_some((bucket, prefix.trim_matches('/')))
}

/// The bucket of one catalog data path.
#[derive(Clone)]
pub struct DataStore {
    store: Arc<dyn ObjectStore>,
    bucket: String,
    data_path: String,
    credentials: &'static str,
}

impl fmt::Debug for DataStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataStore")
            .field("data_path", &self.data_path)
            .field("credentials", &self.credentials)
            .finish()
    }
}

impl DataStore {
    pub fn new(data_path: &str, config: &S3Config) -> Result<Self, StoreError> {
        let (bucket, _) =
            split_s3_uri(data_path).ok_or_else(|| StoreError::DataPath(data_path.to_string()))?;
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        if let Some(endpoint) = config.endpoint.as_deref().filter(|e| !e.trim().is_empty()) {
            let endpoint = if endpoint.contains("://") {
                endpoint.to_string()
            } else {
                format!("http://{endpoint}")
            };
            builder = builder
                .with_allow_http(endpoint.starts_with("http://"))
                .with_endpoint(endpoint)
                .with_virtual_hosted_style_request(false);
        }
        if let Some(region) = config.region.as_deref().filter(|r| !r.trim().is_empty()) {
            builder = builder.with_region(region);
        }
        match (&config.access_key_id, &config.secret_access_key) {
            (Some(key), Some(secret)) => {
                builder = builder
                    .with_access_key_id(key)
                    .with_secret_access_key(secret);
            }
            (None, None) => {}
            _ => {
                return Err(StoreError::Config(
                    "set both HOGLAKE_S3_ACCESS_KEY and HOGLAKE_S3_SECRET_KEY, or neither".into(),
                ))
            }
        }
        let store = builder
            .build()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        Ok(Self {
            store: Arc::new(store),
            bucket: bucket.to_string(),
            data_path: data_path.trim_end_matches('/').to_string(),
            credentials: config.credential_source(),
        })
    }

    pub fn data_path(&self) -> &str {
        &self.data_path
    }

    /// The object key of an `s3://` URI under this data path.
    fn key(&self, uri: &str) -> Result<Path, StoreError> {
        let outside = || StoreError::OutsideDataPath {
            uri: uri.to_string(),
            data_path: self.data_path.clone(),
        };
        if !uri
            .strip_prefix(&self.data_path)
            .is_some_and(|r| r.starts_with('/'))
        {
            return Err(outside());
        }
        let (bucket, key) = split_s3_uri(uri).ok_or_else(outside)?;
        if bucket != self.bucket {
            return Err(outside());
        }
        Path::parse(key).map_err(|_| outside())
    }

    /// One PutObject of `bytes` at `uri`, cut at the write's deadline
    /// ([`Deadline::current`]) if there is one.
    pub async fn put(&self, uri: &str, bytes: Bytes) -> Result<(), StoreError> {
        let key = self.key(uri)?;
        let deadline = Deadline::current().unwrap_or_else(Deadline::none);
        let put = self.store.put(&key, PutPayload::from_bytes(bytes));
        match deadline.cut(put).await {
            Some(Ok(_)) => Ok(()),
            Some(Err(source)) => Err(StoreError::Upload {
                uri: uri.to_string(),
                credentials: self.credentials,
                source: Box::new(source),
            }),
            None => Err(StoreError::Cut {
                uri: uri.to_string(),
                deadline: deadline.to_string(),
            }),
        }
    }

    /// The startup credential probe (millpond.md "Credential probe"): a
    /// zero-byte PutObject of `{data_path}/_millpond/probe`, the same call
    /// the write path makes, so a missing grant, a wrong bucket or region
    /// fails before the first flush. The marker is overwritten on every
    /// start (one object per data path, never registered).
    pub async fn probe(&self) -> Result<String, StoreError> {
        let uri = format!("{}/_millpond/probe", self.data_path);
        let key = self.key(&uri)?;
        match self.store.put(&key, PutPayload::new()).await {
            Ok(_) => Ok(uri),
            Err(source) => {
                let text = source.to_string();
                let hint = if text.contains("NoSuchBucket") {
                    "the bucket does not exist: check HOGLAKE_DATA_PATH / the catalog's data_path"
                } else if text.contains("AuthorizationHeaderMalformed")
                    || text.contains("PermanentRedirect")
                {
                    "the bucket is in another region: check HOGLAKE_S3_REGION / AWS_REGION"
                } else if text.contains("InvalidAccessKeyId")
                    || text.contains("SignatureDoesNotMatch")
                {
                    "the keys are wrong: check HOGLAKE_S3_ACCESS_KEY / HOGLAKE_S3_SECRET_KEY"
                } else {
                    "check the s3:PutObject grant, HOGLAKE_S3_ENDPOINT and the bucket"
                };
                Err(StoreError::Probe {
                    uri,
                    credentials: self.credentials,
                    hint,
                    source: Box::new(source),
                })
            }
        }
    }

    /// The whole object at `uri` (read-back checks).
    pub async fn get(&self, uri: &str) -> Result<Bytes, StoreError> {
        let key = self.key(uri)?;
        let read = |source| StoreError::Read {
            uri: uri.to_string(),
            source: Box::new(source),
        };
        self.store
            .get(&key)
            .await
            .map_err(read)?
            .bytes()
            .await
            .map_err(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_uris_split_into_bucket_and_prefix() {
        assert_eq!(split_s3_uri("s3://lake/demo/"), Some(("lake", "demo")));
        assert_eq!(split_s3_uri("s3://lake"), Some(("lake", "")));
        assert_eq!(split_s3_uri("s3:///x"), None);
        assert_eq!(split_s3_uri("gs://lake/x"), None);
    }

    #[test]
    fn debug_never_prints_keys() {
        let config = S3Config {
            endpoint: Some("127.0.0.1:9000".into()),
            region: None,
            access_key_id: Some("AKIA-SECRET-ID".into()),
            secret_access_key: Some("very-secret".into()),
        };
        let text = format!("{config:?}");
        assert!(
            !text.contains("AKIA-SECRET-ID") && !text.contains("very-secret"),
            "{text}"
        );
        let store = DataStore::new("s3://lake/demo", &config).unwrap();
        let text = format!("{store:?}");
        assert!(!text.contains("very-secret"), "{text}");
    }

    #[test]
    fn keys_stay_inside_the_data_path() {
        let store = DataStore::new("s3://lake/demo/", &S3Config::default()).unwrap();
        assert_eq!(
            store
                .key("s3://lake/demo/data/a/b/k/f-0.parquet")
                .unwrap()
                .as_ref(),
            "demo/data/a/b/k/f-0.parquet"
        );
        assert!(store.key("s3://lake/demox/data/f.parquet").is_err());
        assert!(store.key("s3://other/demo/data/f.parquet").is_err());
        assert!(DataStore::new("lake/demo", &S3Config::default()).is_err());
        let half = S3Config {
            access_key_id: Some("k".into()),
            ..S3Config::default()
        };
        assert!(DataStore::new("s3://lake", &half).is_err());
    }
}
