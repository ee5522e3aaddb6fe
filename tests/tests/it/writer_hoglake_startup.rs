//! The hoglake writer refuses to start, naming the setting to fix, when its
//! catalog or its object store cannot work: a wrong HOGLAKE_URL, a catalog
//! that does not exist (and no HOGLAKE_DATA_PATH to create it), keys the
//! object store does not know, and a bucket that does not exist. Each is
//! found before the writer accepts a flush, not on the first write.
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use millpond_tests::hoglake::Hoglake;
use millpond_tests::process::{free_port, Proc};

/// Runs the writer with `env` changed by `set` (a `None` value removes the
/// variable) until it exits; answers its exit code and log.
fn refusal(lake: &Hoglake, set: &[(&str, Option<String>)]) -> (Option<i32>, String) {
    let mut env = lake.writer_env();
    for (k, v) in set {
        env.retain(|(ek, _)| ek != k);
        if let Some(v) = v {
            env.push((k.to_string(), v.clone()));
        }
    }
    env.push((
        "MILLPOND_WRITER_ADDR".into(),
        format!("127.0.0.1:{}", free_port()),
    ));
    env.push(("MILLPOND_WRITER_HTTP_PORT".into(), free_port().to_string()));
    env.push(("HOGLAKE_REQUEST_TIMEOUT_S".into(), "5".into()));
    let mut w = Proc::spawn("millpond-writer", &env, lake.dir.path());
    let status = w.wait_exit(Duration::from_secs(60));
    (status.code(), w.logs())
}

fn assert_refused(what: &str, (code, log): (Option<i32>, String), names: &[&str]) {
    assert!(
        matches!(code, Some(c) if c != 0),
        "{what}: the writer must exit non-zero, got {code:?}\n{log}"
    );
    for n in names {
        assert!(
            log.contains(n),
            "{what}: the refusal does not name {n}:\n{log}"
        );
    }
}

/// A moto S3 server that checks credentials (no key is known to it).
struct StrictS3 {
    child: Child,
    endpoint: String,
}

impl StrictS3 {
    fn start() -> StrictS3 {
        let python = std::env::var("MILLPOND_PYTHON").expect("MILLPOND_PYTHON (scripts/env.sh)");
        let moto = std::path::Path::new(&python).with_file_name("moto_server");
        let port = free_port();
        let child = Command::new(&moto)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", moto.display()));
        // Owned first, so a panic below still stops it (Drop).
        let s3 = StrictS3 {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return s3;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("strict moto did not listen on {port}");
    }
}

impl Drop for StrictS3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn startup_refusals_name_the_setting_to_fix() {
    let lake = Hoglake::start();

    let closed = format!("http://127.0.0.1:{}", free_port());
    assert_refused(
        "unreachable catalog",
        refusal(&lake, &[("HOGLAKE_URL", Some(closed))]),
        &["HOGLAKE_URL"],
    );

    assert_refused(
        "missing catalog",
        refusal(
            &lake,
            &[
                ("HOGLAKE_CATALOG", Some("nosuchcatalog".into())),
                ("HOGLAKE_DATA_PATH", None),
            ],
        ),
        &["nosuchcatalog", "HOGLAKE_CATALOG", "HOGLAKE_DATA_PATH"],
    );

    let typo = lake.data_path.replacen("s3://", "s3://no-such-bucket-", 1);
    assert_refused(
        "bucket typo",
        refusal(
            &lake,
            &[
                ("HOGLAKE_CATALOG", Some("typo".into())),
                ("HOGLAKE_DATA_PATH", Some(typo)),
            ],
        ),
        &["NoSuchBucket", "HOGLAKE_DATA_PATH", "_millpond/probe"],
    );

    let strict = StrictS3::start();
    let (code, log) = refusal(
        &lake,
        &[
            ("HOGLAKE_CATALOG", Some("strict".into())),
            ("HOGLAKE_S3_ENDPOINT", Some(strict.endpoint.clone())),
            ("HOGLAKE_S3_ACCESS_KEY", Some("AKIANOTAREALKEY".into())),
            ("HOGLAKE_S3_SECRET_KEY", Some("not-the-secret-value".into())),
        ],
    );
    assert!(
        !log.contains("not-the-secret-value"),
        "the secret key must never be logged:\n{log}"
    );
    assert_refused(
        "bad credentials",
        (code, log),
        &["HOGLAKE_S3_ACCESS_KEY", "HOGLAKE_S3_SECRET_KEY"],
    );
}
