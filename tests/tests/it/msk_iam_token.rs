//! The MSK IAM token ingest signs, checked independently: botocore's
//! SigV4QueryAuth (what AWS's aws-msk-iam-sasl-signer-python signs with)
//! re-signs the same request with the same credentials and time
//! (tests/python/check_msk_iam_token.py), and every parameter is checked.
//! And the real ingest re-authenticates its open connections when the
//! broker grants a session lifetime (KIP-368), consuming all along.
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use base64::Engine;
use millpond_ingest::kafka::msk_iam::{token, AwsKeys};
use millpond_shared::config::Secret;
use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{committed, produce_events};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::nisshi::Nisshi;
use millpond_tests::process::free_port;
use millpond_tests::required_env;
use millpond_tests::sasl::SaslCapture;
use millpond_tests::sasl_proxy::SaslProxy;
use millpond_tests::writer::Writer;

const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

/// Runs the Python check on `token`, claiming it was signed with `secret`.
fn check(token: &str, secret: &str, session: Option<&str>, region: &str) -> (bool, String) {
    check_at(token, secret, session, region, "20240501T123456Z")
}

fn check_at(
    token: &str,
    secret: &str,
    session: Option<&str>,
    region: &str,
    signing_time: &str,
) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let case = dir.path().join("case.json");
    let body = serde_json::json!({
        "token": token,
        "access_key_id": "AKIAIOSFODNN7EXAMPLE",
        "secret_access_key": secret,
        "session_token": session,
        "region": region,
        "signing_time": signing_time,
    });
    std::fs::write(&case, body.to_string()).unwrap();
    let script = millpond_tests::manifest_path("/python/check_msk_iam_token.py");
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

/// MSK IAM settings with static keys, as an operator sets them.
fn msk_iam_env(session: &str) -> Vec<(&'static str, String)> {
    vec![
        ("KAFKA_CONSUMER_SECURITY_PROTOCOL", "SASL_PLAINTEXT".into()),
        ("KAFKA_CONSUMER_SASL_MECHANISM", "OAUTHBEARER".into()),
        ("AWS_REGION", "eu-west-1".into()),
        ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE".into()),
        ("AWS_SECRET_ACCESS_KEY", SECRET.into()),
        ("AWS_SESSION_TOKEN", session.into()),
    ]
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

/// The real binary: with SASL/OAUTHBEARER it signs a token with the keys
/// from its environment (through the AWS credential chain) on the consumer's
/// poll thread and sends it in the SASL handshake; botocore verifies what
/// went over the wire. The stand-in broker then hangs up, so ingest fails
/// within KAFKA_STARTUP_TIMEOUT_S naming the SASL failure.
#[test]
fn ingest_sends_a_token_botocore_verifies_and_logs_no_credential() {
    let broker = SaslCapture::start();
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let session = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+test/token==";
    let o = IngestOpts {
        bootstrap: &broker.bootstrap,
        topic: "events",
        table: "events",
        writer_addr: &w.addr,
        replicas: 1,
        ordinal: 0,
        extra: [
            msk_iam_env(session),
            vec![("KAFKA_STARTUP_TIMEOUT_S", "5".into())],
        ]
        .concat(),
    };
    let mut ingest = Ingest::start(&o, lake.dir.path());
    eventually(
        Duration::from_secs(30),
        "a token in a SASL handshake",
        || !broker.tokens().is_empty(),
    );
    let status = ingest.proc.wait_exit(Duration::from_secs(60));
    let logs = ingest.proc.logs();
    assert!(!status.success(), "{logs}");
    let exit_line = logs
        .lines()
        .find(|l| l.contains("exiting with failure"))
        .unwrap_or_else(|| panic!("no exit line:\n{logs}"));
    assert!(
        exit_line.contains("within 5 s (KAFKA_STARTUP_TIMEOUT_S)"),
        "{exit_line}"
    );
    assert!(exit_line.contains("SASL"), "{exit_line}");
    assert!(logs.contains("signed a new MSK IAM token"), "{logs}");

    let token = broker.tokens().remove(0);
    let url = String::from_utf8(
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&token)
            .unwrap(),
    )
    .unwrap();
    let signed_at = url
        .split(['?', '&'])
        .find_map(|p| p.strip_prefix("X-Amz-Date="))
        .expect("X-Amz-Date");
    let (ok, out) = check_at(&token, SECRET, Some(session), "eu-west-1", signed_at);
    assert!(ok, "{out}");
    for secret in [SECRET, session, &token, "wJalrXUtnFEMI"] {
        assert!(!logs.contains(secret), "a credential in the logs:\n{logs}");
    }
    w.stop();
}

/// A broker that grants 3 s sessions (KIP-368's session_lifetime_ms, what
/// a broker with connections.max.reauth.ms sends): librdkafka
/// re-authenticates each open connection at 90 % of its session, with the
/// token our callback signed, and ingest keeps consuming through it.
#[test]
fn ingest_re_authenticates_open_connections_before_the_session_ends() {
    const N: u64 = 500;
    const SESSION: Duration = Duration::from_secs(3);
    let broker_port = free_port();
    let proxy = SaslProxy::start(format!("127.0.0.1:{broker_port}"), SESSION);
    let bootstrap = format!("127.0.0.1:{}", proxy.port);
    let broker = Nisshi::start_advertising(broker_port, &bootstrap);
    broker.create_topic("events", 1);
    produce_events(&bootstrap, "events", 1, 0, N);
    let lake = Lake::new(Backend::Embedded, "events");
    let w = Writer::start(&lake);
    let session = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+test/token==";
    let o = IngestOpts {
        bootstrap: &bootstrap,
        topic: "events",
        table: "events",
        writer_addr: &w.addr,
        replicas: 1,
        ordinal: 0,
        extra: msk_iam_env(session),
    };
    let ingest = Ingest::start(&o, lake.dir.path());
    let total = || -> i64 {
        committed(&bootstrap, "millpond-events-events", "events", 1)
            .into_iter()
            .map(|o| o.unwrap_or(0))
            .sum()
    };
    eventually(
        Duration::from_secs(60),
        "the first records committed",
        || total() == N as i64,
    );
    // Three authentications on one connection: two re-authentications.
    let most_on_one = |auths: &[millpond_tests::sasl_proxy::Authentication]| {
        let mut per: std::collections::BTreeMap<usize, Vec<std::time::Instant>> =
            Default::default();
        for a in auths {
            per.entry(a.connection).or_default().push(a.at);
        }
        per.into_values().max_by_key(Vec::len).unwrap_or_default()
    };
    eventually(Duration::from_secs(30), "two re-authentications", || {
        most_on_one(&proxy.authentications()).len() >= 3
    });
    let times = most_on_one(&proxy.authentications());
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap < SESSION && gap > SESSION / 2,
            "re-authenticated {gap:?} after the last, the session is {SESSION:?}"
        );
    }
    // Consuming carries on across re-authentications.
    produce_events(&bootstrap, "events", 1, N, N);
    eventually(Duration::from_secs(60), "all records committed", || {
        total() == 2 * N as i64
    });
    let auths = proxy.authentications();
    assert!(
        auths
            .iter()
            .all(|a| a.token.as_deref().is_some_and(|t| t.len() > 300)),
        "{auths:?}"
    );
    let token = auths.last().unwrap().token.clone().unwrap();
    let url = String::from_utf8(
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&token)
            .unwrap(),
    )
    .unwrap();
    let signed_at = url
        .split(['?', '&'])
        .find_map(|p| p.strip_prefix("X-Amz-Date="))
        .expect("X-Amz-Date");
    let (ok, out) = check_at(&token, SECRET, Some(session), "eu-west-1", signed_at);
    assert!(ok, "{out}");
    assert_eq!(
        (
            ingest.metric("millpond_records_consumed_total", &[]),
            w.metric("millpond_records_written_total", &[]),
        ),
        (2.0 * N as f64, 2.0 * N as f64)
    );
    let logs = ingest.proc.logs();
    assert!(!logs.contains("SASL authentication error"), "{logs}");
    ingest.stop();
    w.stop();
    assert_eq!(lake.count(), 2 * N as i64);
}
