//! The MSK IAM token ingest signs, checked independently: botocore's
//! SigV4QueryAuth (what AWS's aws-msk-iam-sasl-signer-python signs with)
//! re-signs the same request with the same credentials and time
//! (tests/python/check_msk_iam_token.py), and every parameter is checked.
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use millpond_ingest::kafka::msk_iam::{token, AwsKeys};
use millpond_shared::config::Secret;
use millpond_tests::required_env;

const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

/// Runs the Python check on `token`, claiming it was signed with `secret`.
fn check(token: &str, secret: &str, session: Option<&str>, region: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let case = dir.path().join("case.json");
    let body = serde_json::json!({
        "token": token,
        "access_key_id": "AKIAIOSFODNN7EXAMPLE",
        "secret_access_key": secret,
        "session_token": session,
        "region": region,
        "signing_time": "20240501T123456Z",
    });
    std::fs::write(&case, body.to_string()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/check_msk_iam_token.py");
    let out = Command::new(required_env("MILLPOND_PYTHON"))
        .arg(script)
        .arg(&case)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && text.contains(" 0 failed"), text)
}

fn sign(secret: &str, session: Option<&str>, region: &str) -> String {
    let keys = AwsKeys {
        key_id: "AKIAIOSFODNN7EXAMPLE".into(),
        secret: Secret::new(secret),
        session_token: session.map(Secret::new),
    };
    // 2024-05-01T12:34:56Z
    let at = UNIX_EPOCH + Duration::from_secs(1_714_566_896);
    token(&keys, region, at).unwrap().token
}

#[test]
fn botocore_agrees_with_the_msk_iam_token() {
    let session = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+test/token==";
    for (region, session) in [("eu-west-1", Some(session)), ("us-east-1", None)] {
        let (ok, out) = check(&sign(SECRET, session, region), SECRET, session, region);
        assert!(ok, "{region}: {out}");
        assert!(out.contains("ok   signature matches botocore"), "{out}");
    }
}

#[test]
fn the_check_fails_on_a_token_botocore_would_not_sign() {
    let session = Some("session-token");
    // Another secret: every parameter is right, the signature is not.
    let (ok, out) = check(
        &sign("another-secret", session, "eu-west-1"),
        SECRET,
        session,
        "eu-west-1",
    );
    assert!(!ok, "{out}");
    assert!(out.contains("FAIL signature matches botocore"), "{out}");
    // Signed for another region.
    let (ok, out) = check(
        &sign(SECRET, session, "us-east-2"),
        SECRET,
        session,
        "eu-west-1",
    );
    assert!(!ok, "{out}");
    assert!(out.contains("FAIL scheme and host"), "{out}");
    // The session token left out of the token.
    let (ok, out) = check(
        &sign(SECRET, None, "eu-west-1"),
        SECRET,
        session,
        "eu-west-1",
    );
    assert!(!ok, "{out}");
    assert!(out.contains("FAIL X-Amz-Security-Token"), "{out}");
}
