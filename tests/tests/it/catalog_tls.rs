//! The Postgres catalog over TLS (DUCKLAKE_RDS_SSLMODE,
//! DUCKLAKE_RDS_SSLROOTCERT), against a throwaway cluster that takes TLS
//! connections only, its certificate signed by a CA made for the test: the
//! postgres extension's own libpq checks the certificate against the root
//! certificate the writer names, so the right CA lands a flush and another
//! CA is refused at startup.
use std::path::Path;
use std::time::Duration;

use millpond_proto::{AckOutcome, OffsetRange};
use millpond_tests::flight::{client, descriptor, put, rows};
use millpond_tests::lake::extension_dir;
use millpond_tests::pg_cluster::{TlsCluster, USER};
use millpond_tests::process::{free_port, Proc};
use millpond_tests::tls::TestCa;
use millpond_tests::writer::Writer;

/// A writer's settings for a lake with its catalog in `pg` over TLS and its
/// data in `data`.
fn env(pg: &TlsCluster, data: &Path, tls: &[(&str, &str)]) -> Vec<(String, String)> {
    let port = pg.port.to_string();
    let data = format!("{}/", data.display());
    let mut env: Vec<(&str, &str)> = vec![
        ("DUCKLAKE_TABLE", "events"),
        ("DUCKLAKE_RDS_HOST", "127.0.0.1"),
        ("DUCKLAKE_RDS_PORT", &port),
        ("DUCKLAKE_RDS_DATABASE", "postgres"),
        ("DUCKLAKE_RDS_USERNAME", USER),
        ("DUCKLAKE_RDS_PASSWORD", &pg.password),
        ("DUCKLAKE_DATA_PATH", &data),
    ];
    env.extend(tls);
    let mut env: Vec<(String, String)> = env
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    env.push(("DUCKDB_EXTENSION_DIR".into(), extension_dir()));
    env
}

/// Rows of the lake's table, read by DuckDB over verify-full too.
fn count(pg: &TlsCluster, root: &Path, data: &Path) -> i64 {
    let cfg = duckdb::Config::default()
        .with("extension_directory", extension_dir())
        .unwrap()
        .with("allow_unsigned_extensions", "true")
        .unwrap();
    let conn = duckdb::Connection::open_in_memory_with_flags(cfg).unwrap();
    conn.execute_batch("LOAD ducklake; LOAD postgres_scanner")
        .unwrap();
    let conninfo = format!(
        "host=127.0.0.1 port={} dbname=postgres user={USER} password={} sslmode=verify-full sslrootcert='{}'",
        pg.port,
        pg.password,
        root.display().to_string().replace('\'', "\\'")
    );
    let sql = format!(
        "ATTACH 'ducklake:postgres:{}' AS lake (DATA_PATH '{}/', READ_ONLY)",
        conninfo.replace('\'', "''"),
        data.display()
    );
    conn.execute_batch(&sql).unwrap();
    conn.query_row("SELECT count(*) FROM lake.main.events", [], |r| r.get(0))
        .unwrap()
}

/// `millpond-lake --yes <args>` with `env`: a changing command takes the
/// maintenance lock on a connection of its own, over the same TLS.
fn lake_cli(env: &[(String, String)], args: &[&str]) -> std::process::Output {
    std::process::Command::new(millpond_tests::process::binary("millpond-lake"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// The log of a writer that must refuse to start.
fn refused(mut env: Vec<(String, String)>, log_dir: &Path) -> String {
    env.push((
        "MILLPOND_WRITER_ADDR".into(),
        format!("127.0.0.1:{}", free_port()),
    ));
    env.push(("MILLPOND_WRITER_HTTP_PORT".into(), free_port().to_string()));
    let mut writer = Proc::spawn("millpond-writer", &env, log_dir);
    let status = writer.wait_exit(Duration::from_secs(60));
    let log = writer.logs();
    assert!(!status.success(), "the writer trusted the server:\n{log}");
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_lands_with_the_catalog_ca_and_refuses_another() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::generate(dir.path(), "catalog-ca");
    let other = TestCa::generate(dir.path(), "other-ca");
    let (cert, key) = ca.server_pem(&["127.0.0.1", "localhost"]);
    let pg = TlsCluster::start(&cert, &key);
    // A path that the connection string must quote.
    let root = dir.path().join("catalog ca's root.pem");
    std::fs::copy(&ca.pem_path, &root).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();

    let verify = |root: &Path| {
        let root = root.to_str().unwrap().to_owned();
        env(
            &pg,
            &data,
            &[
                ("DUCKLAKE_RDS_SSLMODE", "verify-full"),
                ("DUCKLAKE_RDS_SSLROOTCERT", &root),
            ],
        )
    };

    // The catalog's CA: the writer starts and a flush lands.
    let w = Writer::start_env(&verify(&root), dir.path(), &[]);
    let mut c = client(&w.addr).await;
    let d = descriptor("tls-1", vec![OffsetRange::new("events", 0, 0, 99)], 100);
    let ack = put(&mut c, &d, vec![rows(0, 100)]).await.unwrap();
    assert_eq!(ack.outcome(), AckOutcome::Written, "{ack:?}");
    w.stop();
    assert_eq!(count(&pg, &root, &data), 100);
    // The maintenance lock's own connection checks the certificate too.
    let expire = ["--yes", "--lock-wait", "0s", "expire", "--keep-last", "100"];
    let out = lake_cli(&verify(&root), &expire);
    assert!(out.status.success(), "{out:?}");
    let out = lake_cli(&verify(&other.pem_path), &expire);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("for the maintenance lock"),
        "{stderr}"
    );
    assert!(stderr.contains("certificate verify failed"), "{stderr}");

    // Another CA: the writer refuses to start, naming both settings, and
    // the password stays out of the message.
    let log = refused(verify(&other.pem_path), dir.path());
    assert!(
        log.contains("certificate verify failed"),
        "libpq did not check the certificate:\n{log}"
    );
    for named in [
        "DUCKLAKE_RDS_SSLMODE=verify-full",
        &format!("DUCKLAKE_RDS_SSLROOTCERT={}", other.pem_path.display()),
    ] {
        assert!(
            log.contains(named),
            "the refusal does not name {named}:\n{log}"
        );
    }
    assert!(!log.contains(&pg.password), "the password leaked:\n{log}");

    // `system`: OpenSSL's default roots, which SSL_CERT_FILE replaces
    // (here with the catalog's CA; without it, the test CA is unknown).
    let system = env(
        &pg,
        &data,
        &[
            ("DUCKLAKE_RDS_SSLMODE", "verify-full"),
            ("DUCKLAKE_RDS_SSLROOTCERT", "system"),
        ],
    );
    let trusted = root.to_str().unwrap();
    Writer::start_env(&system, dir.path(), &[("SSL_CERT_FILE", trusted)]).stop();
    let log = refused(system, dir.path());
    assert!(
        log.contains("DUCKLAKE_RDS_SSLROOTCERT=system"),
        "the refusal does not name the setting:\n{log}"
    );
}
