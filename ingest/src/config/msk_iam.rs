//! MSK IAM: SASL/OAUTHBEARER with a token signed by AWS credentials.
use millpond_shared::config::{EnvReader, Secret};

/// The variables of the standard AWS credential chain that the Kafka
/// credentials come from (static keys, IRSA web identity, ECS and EKS pod
/// identity, instance metadata). Read here so nothing else reads the
/// environment; any of them may be a credential.
pub const CREDENTIAL_VARS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_METADATA_ENDPOINT",
    "AWS_IMDSV1_FALLBACK",
];

#[derive(Debug, Clone)]
pub struct MskIamConfig {
    /// AWS_REGION: the token is signed for `kafka.<region>.amazonaws.com`.
    pub region: String,
    /// AWS_ROLE_SESSION_NAME, for the web identity role session (default
    /// `millpond`, as the original's).
    pub role_session_name: Option<String>,
    /// The credential chain's variables that are set (Debug shows only keys).
    pub chain_env: Vec<(&'static str, Secret)>,
}

/// `sasl.mechanism` or `sasl.mechanisms` is OAUTHBEARER and neither of
/// librdkafka's own token sources (OIDC, unsecured JWT) is asked for.
pub fn wanted(overrides: &[(String, Secret)]) -> bool {
    let get = |key: &str| {
        overrides
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.expose().trim().to_ascii_uppercase())
    };
    let oauth = ["sasl.mechanism", "sasl.mechanisms"]
        .iter()
        .any(|k| get(k).as_deref() == Some("OAUTHBEARER"));
    oauth
        && get("sasl.oauthbearer.method").as_deref() != Some("OIDC")
        && get("enable.sasl.oauthbearer.unsecure.jwt").as_deref() != Some("TRUE")
}

fn valid_region(r: &str) -> bool {
    !r.is_empty()
        && r.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

impl MskIamConfig {
    pub fn from_env(r: &mut EnvReader<'_>) -> MskIamConfig {
        let region = match r.optional("AWS_REGION") {
            Some(v) if valid_region(&v) => v,
            Some(v) => {
                r.errors.push(
                    "AWS_REGION",
                    format!("is not an AWS region (got {v:?}); it names the MSK endpoint the IAM token is signed for"),
                );
                String::new()
            }
            None => {
                r.errors.push(
                    "AWS_REGION",
                    "is required with SASL/OAUTHBEARER (MSK IAM): the token is signed for the cluster's region",
                );
                String::new()
            }
        };
        let chain_env = CREDENTIAL_VARS
            .iter()
            .filter_map(|k| r.optional_secret(k).map(|v| (*k, v)))
            .collect();
        MskIamConfig {
            region,
            role_session_name: Some(r.string_or("AWS_ROLE_SESSION_NAME", "millpond")),
            chain_env,
        }
    }
}
