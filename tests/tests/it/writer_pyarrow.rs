//! A Flight client nobody here wrote: pyarrow.flight pushes a flush.
use std::process::Command;

use millpond_tests::lake::{Backend, Lake};
use millpond_tests::required_env;
use millpond_tests::writer::Writer;

fn py_put(addr: &str, id: &str, partition: i32, first: i64, n: i64) -> serde_json::Value {
    py_put_with(
        addr,
        &[
            id,
            &partition.to_string(),
            &first.to_string(),
            &n.to_string(),
        ],
    )
}

fn py_put_with(addr: &str, args: &[&str]) -> serde_json::Value {
    py_put_env(addr, args, &[])
}

fn py_put_env(addr: &str, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let script = millpond_tests::manifest_path("/python/put_flush.py");
    let out = Command::new(required_env("MILLPOND_PYTHON"))
        .envs(env.iter().copied())
        .arg(script)
        .arg(addr)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pyarrow client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON ack")
}

#[test]
fn pyarrow_client_puts_unsplit_batches_and_reads_the_ack() {
    for backend in [Backend::Embedded, Backend::PostgresS3] {
        let lake = Lake::new(backend, "events");
        let writer = Writer::start(&lake);
        // 300k rows in one batch: well over gRPC's default 4 MiB message limit.
        let ack = py_put(&writer.addr, "py-1", 0, 0, 300_000);
        assert_eq!(ack["flush_id"], "py-1");
        assert_eq!(ack["rows_written"], 300_000);
        assert_eq!(ack["outcome"], "written");
        assert_eq!(ack["recorded"][0]["last"], 299_999);
        let again = py_put(&writer.addr, "py-1", 0, 0, 300_000);
        assert_eq!(again["outcome"], "already_recorded");
        // The JSON descriptor can carry dead letters too.
        let ack = py_put_with(&writer.addr, &["py-2", "1", "300000", "10", "{not json"]);
        assert_eq!(ack["rows_written"], 10);
        assert_eq!(ack["dead_letters_written"], 1);
        assert_eq!(ack["recorded"][0]["last"], 300_010);
        writer.stop();
        assert_eq!(
            lake.query(
                "SELECT kafka_partition, kafka_offset, reason, decode(original), kafka_key IS NULL, \
                 epoch_ms(kafka_timestamp) FROM lake.main.events_dead_letters"
            ),
            ["1|300010|invalid_json|{not json|true|1700000000000"],
            "{backend:?}"
        );
        assert_eq!(lake.count(), 300_010, "{backend:?}");
        assert_eq!(lake.column_text("max(name)"), vec![Some("py-99999".into())]);
        assert_eq!(
            lake.column_text("(sum(score) FILTER (WHERE id < 300000))::BIGINT"),
            vec![Some("22499925000".into())]
        );
    }
}

/// The streamed form from pyarrow: the trailing descriptor is
/// `write_metadata`, after batches of 1,000 rows; a resend of the same
/// ranges is recognised as one flush.
#[test]
fn pyarrow_client_streams_a_flush_with_a_trailing_descriptor() {
    let lake = Lake::new(Backend::Embedded, "events");
    let writer = Writer::start(&lake);
    let streamed = [("STREAMED", "1")];
    let ack = py_put_env(
        &writer.addr,
        &["st-1", "2", "0", "25000", "{not json"],
        &streamed,
    );
    assert_eq!(ack["flush_id"], "st-1");
    assert_eq!(ack["rows_written"], 25_000);
    assert_eq!(ack["dead_letters_written"], 1);
    assert_eq!(ack["outcome"], "written");
    assert_eq!(ack["recorded"][0]["last"], 25_000);
    let again = py_put_env(
        &writer.addr,
        &["st-1", "2", "0", "25000", "{not json"],
        &streamed,
    );
    assert_eq!(again["outcome"], "already_recorded");
    writer.stop();
    assert_eq!(lake.count(), 25_000);
    assert_eq!(
        lake.column_text("count(DISTINCT id) || '/' || max(name)"),
        vec![Some("25000/py-9999".into())]
    );
}
