//! The MSK IAM SASL/OAUTHBEARER token, as AWS's aws-msk-iam-sasl-signer
//! makes it: a SigV4-presigned `kafka-cluster:Connect` URL for the
//! region's Kafka endpoint, valid 900 s, with a `User-Agent` parameter
//! appended after signing, base64url-encoded without padding.
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
};
use aws_sigv4::sign::v4;
use base64::Engine;

pub use super::aws_credentials::AwsKeys;
use super::aws_credentials::CredentialSource;

/// How long a token is valid (X-Amz-Expires).
pub const EXPIRES: Duration = Duration::from_secs(900);
const SERVICE: &str = "kafka-cluster";
/// Appended after signing, like the AWS signers do (`/` is `%2F`).
const USER_AGENT_PARAM: &str = concat!("User-Agent=millpond-ingest%2F", env!("CARGO_PKG_VERSION"));

/// A signed token; it carries a signature and maybe a session token, so
/// Debug shows only its expiry.
pub struct MskToken {
    pub token: String,
    /// Signing time + 900 s, in ms since the Unix epoch.
    pub expires_at_ms: i64,
}

impl fmt::Debug for MskToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MskToken")
            .field("token", &"***")
            .field("expires_at_ms", &self.expires_at_ms)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("fetching AWS credentials for MSK IAM failed: {0}")]
    Credentials(String),
    #[error("signing the MSK IAM token failed: {0}")]
    Sign(String),
}

/// The presigned URL, before base64 (what the token decodes to).
pub fn presigned_url(keys: &AwsKeys, region: &str, at: SystemTime) -> Result<String, TokenError> {
    let sign_err = |e: &dyn fmt::Display| TokenError::Sign(e.to_string());
    let url = format!("https://kafka.{region}.amazonaws.com/?Action=kafka-cluster%3AConnect");
    let identity = Credentials::new(
        &keys.key_id,
        keys.secret.expose(),
        keys.session_token.as_ref().map(|t| t.expose().to_owned()),
        None,
        "millpond-msk-iam",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(EXPIRES);
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(SERVICE)
        .time(at)
        .settings(settings)
        .build()
        .map_err(|e| sign_err(&e))?
        .into();
    let signable = SignableRequest::new("GET", &url, std::iter::empty(), SignableBody::Bytes(&[]))
        .map_err(|e| sign_err(&e))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| sign_err(&e))?
        .into_parts();
    let mut request = http::Request::get(&url)
        .body(())
        .map_err(|e| sign_err(&e))?;
    instructions.apply_to_request_http1x(&mut request);
    Ok(format!("{}&{USER_AGENT_PARAM}", request.uri()))
}

/// The token for `keys`, signed at `at`.
pub fn token(keys: &AwsKeys, region: &str, at: SystemTime) -> Result<MskToken, TokenError> {
    let url = presigned_url(keys, region, at)?;
    let signed_ms = at
        .duration_since(UNIX_EPOCH)
        .map_err(|e| TokenError::Sign(e.to_string()))?
        .as_secs() as i64
        * 1000;
    Ok(MskToken {
        token: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url),
        expires_at_ms: signed_ms + EXPIRES.as_millis() as i64,
    })
}

/// Signs tokens with credentials from a source; librdkafka asks for a new
/// one before the current one expires.
pub struct MskIamTokens {
    pub region: String,
    pub credentials: Box<dyn CredentialSource>,
    pub clock: fn() -> SystemTime,
}

impl MskIamTokens {
    pub fn token(&self) -> Result<MskToken, TokenError> {
        let keys = self.credentials.keys().map_err(TokenError::Credentials)?;
        token(&keys, &self.region, (self.clock)())
    }
}

#[cfg(test)]
mod tests;
