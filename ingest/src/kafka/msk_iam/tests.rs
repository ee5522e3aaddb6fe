//! Fixed credentials and signing time. The expected signatures were computed
//! by botocore's SigV4QueryAuth (what aws-msk-iam-sasl-signer-python uses)
//! on the same inputs; tests/tests/msk_iam_token.rs re-checks live with it.
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use millpond_shared::config::Secret;

use super::*;
use crate::kafka::aws_credentials::FixedCredentials;

const KEY_ID: &str = "AKIAIOSFODNN7EXAMPLE";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const SESSION: &str = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+test/token==";
/// 2024-05-01T12:34:56Z
const SIGNED_AT_S: u64 = 1_714_566_896;

fn at() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(SIGNED_AT_S)
}

fn keys(session: Option<&str>) -> AwsKeys {
    AwsKeys {
        key_id: KEY_ID.into(),
        secret: Secret::new(SECRET),
        session_token: session.map(Secret::new),
    }
}

fn decode(token: &str) -> String {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .expect("base64url without padding");
    String::from_utf8(bytes).unwrap()
}

fn expected_url(security_token: Option<&str>, signature: &str) -> String {
    let mut url = String::from(
        "https://kafka.eu-west-1.amazonaws.com/?Action=kafka-cluster%3AConnect\
         &X-Amz-Algorithm=AWS4-HMAC-SHA256\
         &X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20240501%2Feu-west-1%2Fkafka-cluster%2Faws4_request\
         &X-Amz-Date=20240501T123456Z\
         &X-Amz-Expires=900\
         &X-Amz-SignedHeaders=host",
    );
    // aws-sigv4 lists the session token after the signature; it is signed
    // all the same (the signature is botocore's, which signs it).
    url.push_str("&X-Amz-Signature=");
    url.push_str(signature);
    if let Some(t) = security_token {
        url.push_str("&X-Amz-Security-Token=");
        url.push_str(t);
    }
    url.push_str("&User-Agent=millpond-ingest%2F");
    url.push_str(env!("CARGO_PKG_VERSION"));
    url
}

#[test]
fn token_decodes_to_the_presigned_url_with_every_parameter() {
    let tokens = MskIamTokens {
        region: "eu-west-1".into(),
        credentials: Box::new(FixedCredentials(keys(Some(SESSION)))),
        clock: at,
    };
    let t = tokens.token().unwrap();
    assert!(!t.token.contains('='), "no padding: {}", t.token);
    assert_eq!(
        decode(&t.token),
        expected_url(
            Some("IQoJb3JpZ2luX2VjEJr%2F%2F%2F%2F%2F%2F%2F%2F%2F%2FwEaCXVzLWVhc3QtMSJHMEUCIQ%2Btest%2Ftoken%3D%3D"),
            "7253096bfbe6947f112cf3c10ca30a206958684773ea14fde99a6acaa1173b2b",
        )
    );
    assert_eq!(t.expires_at_ms, (SIGNED_AT_S as i64 + 900) * 1000);
}

#[test]
fn without_a_session_token_no_security_token_is_signed() {
    let t = token(&keys(None), "eu-west-1", at()).unwrap();
    assert_eq!(
        decode(&t.token),
        expected_url(
            None,
            "d9a19c9a2d8561386564ff20a4c2fdd6a857e924f0bfe97eff037e38cd02830b"
        )
    );
}

#[test]
fn another_secret_or_time_changes_the_signature() {
    let base = presigned_url(&keys(None), "eu-west-1", at()).unwrap();
    let mut other = keys(None);
    other.secret = Secret::new("another-secret");
    assert_ne!(presigned_url(&other, "eu-west-1", at()).unwrap(), base);
    let later = at() + Duration::from_secs(1);
    assert_ne!(
        presigned_url(&keys(None), "eu-west-1", later).unwrap(),
        base
    );
}

#[test]
fn debug_output_shows_no_credential() {
    let t = token(&keys(Some(SESSION)), "eu-west-1", at()).unwrap();
    let shown = format!("{t:?} {:?}", keys(Some(SESSION)));
    for secret in [SECRET, SESSION, t.token.as_str()] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(shown.contains(KEY_ID), "{shown}");
}
