//! AWS credentials for MSK IAM from the standard chain (static keys, IRSA
//! web identity, ECS/EKS pod identity, instance metadata), through
//! object_store's provider: the workspace already builds it for hoglake's
//! S3 path, and it caches and renews credentials. Only this chain signs
//! Kafka tokens; no S3 setting reaches it.
//!
//! librdkafka asks for a token on the thread that polls the consumer, which
//! may be a tokio blocking thread: the provider runs on a thread and runtime
//! of its own and the caller waits on a channel, never `block_on`.
use std::sync::mpsc;
use std::time::Duration;

use millpond_shared::config::Secret;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, AwsCredentialProvider};
use object_store::RetryConfig;

use crate::config::MskIamConfig;

/// One set of AWS credentials. Debug shows the key id only.
#[derive(Clone, Debug)]
pub struct AwsKeys {
    pub key_id: String,
    pub secret: Secret,
    pub session_token: Option<Secret>,
}

/// Where signing keys come from (the chain, or fixed keys in tests).
pub trait CredentialSource: Send + Sync {
    /// Errors never include credential values.
    fn keys(&self) -> Result<AwsKeys, String>;
}

/// How long one token request waits for credentials; librdkafka retries a
/// failed refresh after 10 s.
const FETCH_TIMEOUT: Duration = Duration::from_secs(20);

type Reply = mpsc::Sender<Result<AwsKeys, String>>;

pub struct ChainCredentials {
    requests: mpsc::Sender<Reply>,
    /// The chain's own secrets, scrubbed from any error text.
    settings: Vec<Secret>,
}

impl ChainCredentials {
    pub fn start(cfg: &MskIamConfig) -> Result<ChainCredentials, String> {
        let mut builder = AmazonS3Builder::new()
            // Required by the builder; no bucket is ever touched.
            .with_bucket_name("millpond-msk-iam")
            .with_region(&cfg.region)
            .with_retry(RetryConfig {
                max_retries: 3,
                retry_timeout: FETCH_TIMEOUT,
                ..Default::default()
            });
        for (var, value) in &cfg.chain_env {
            if let Ok(key) = var.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                builder = builder.with_config(key, value.expose());
            }
        }
        if let Some(name) = &cfg.role_session_name {
            builder = builder.with_config(AmazonS3ConfigKey::RoleSessionName, name);
        }
        // A library error may echo a setting: secrets are scrubbed.
        let provider = builder
            .build()
            .map_err(|e| {
                let text = format!(
                    "the AWS credential chain could not be set up: {}",
                    describe(e)
                );
                secrets(cfg).iter().fold(text, |t, s| s.scrub(&t))
            })?
            .credentials()
            .clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("starting the AWS credential runtime failed: {e}"))?;
        let (requests, inbox) = mpsc::channel::<Reply>();
        std::thread::Builder::new()
            .name("msk-iam-credentials".into())
            .spawn(move || {
                for reply in inbox {
                    let got = runtime.block_on(fetch(&provider));
                    let _ = reply.send(got);
                }
            })
            .map_err(|e| format!("starting the AWS credential thread failed: {e}"))?;
        let settings = secrets(cfg);
        Ok(ChainCredentials { requests, settings })
    }

    fn scrub(&self, text: String) -> String {
        self.settings.iter().fold(text, |t, s| s.scrub(&t))
    }
}

/// Not "Generic S3 error": this chain serves Kafka.
fn describe(e: object_store::Error) -> String {
    match e {
        object_store::Error::Generic { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

/// The chain's settings that are credentials (paths and ARNs are not).
fn secrets(cfg: &MskIamConfig) -> Vec<Secret> {
    cfg.chain_env
        .iter()
        .filter(|(k, _)| matches!(*k, "AWS_SECRET_ACCESS_KEY" | "AWS_SESSION_TOKEN"))
        .map(|(_, v)| v.clone())
        .collect()
}

async fn fetch(provider: &AwsCredentialProvider) -> Result<AwsKeys, String> {
    let c = provider.get_credential().await.map_err(describe)?;
    Ok(AwsKeys {
        key_id: c.key_id.clone(),
        secret: Secret::new(c.secret_key.clone()),
        session_token: c.token.clone().map(Secret::new),
    })
}

impl CredentialSource for ChainCredentials {
    fn keys(&self) -> Result<AwsKeys, String> {
        let (reply, answer) = mpsc::channel();
        self.requests
            .send(reply)
            .map_err(|_| "the AWS credential thread stopped".to_string())?;
        answer
            .recv_timeout(FETCH_TIMEOUT)
            .map_err(|_| format!("no AWS credentials within {} s", FETCH_TIMEOUT.as_secs()))?
            .map_err(|e| self.scrub(e))
    }
}

/// Fixed keys (tests).
pub struct FixedCredentials(pub AwsKeys);

impl CredentialSource for FixedCredentials {
    fn keys(&self) -> Result<AwsKeys, String> {
        Ok(self.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(vars: &[(&'static str, &str)]) -> MskIamConfig {
        MskIamConfig {
            region: "eu-west-1".into(),
            role_session_name: Some("millpond-test".into()),
            chain_env: vars.iter().map(|(k, v)| (*k, Secret::new(*v))).collect(),
        }
    }

    #[test]
    fn static_keys_come_through_the_chain_even_when_asked_inside_a_runtime() {
        let chain = ChainCredentials::start(&cfg(&[
            ("AWS_ACCESS_KEY_ID", "AKIDTEST"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t-value"),
            ("AWS_SESSION_TOKEN", "sess-token"),
        ]))
        .unwrap();
        // librdkafka may ask on a thread that runs inside a runtime.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let keys = rt.block_on(async { chain.keys() }).unwrap();
        assert_eq!(keys.key_id, "AKIDTEST");
        assert_eq!(keys.secret.expose(), "s3cr3t-value");
        assert_eq!(keys.session_token.unwrap().expose(), "sess-token");
    }

    #[test]
    fn failures_name_the_problem_but_no_value() {
        let err = ChainCredentials::start(&cfg(&[("AWS_SECRET_ACCESS_KEY", "s3cr3t-value")]))
            .err()
            .unwrap();
        assert!(err.contains("AccessKeyId"), "{err}");
        assert!(!err.contains("s3cr3t-value"), "{err}");
        // Web identity with an unreadable token file: an error, no hang.
        let chain = ChainCredentials::start(&cfg(&[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent/millpond/token"),
            ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/millpond"),
        ]))
        .unwrap();
        let err = chain.keys().unwrap_err();
        assert!(err.contains("/nonexistent/millpond/token"), "{err}");
    }
}
