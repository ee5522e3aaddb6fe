//! A Flight client nobody here wrote: pyarrow.flight pushes a flush.
use std::process::Command;

use millpond_tests::lake::{Backend, Lake};
use millpond_tests::required_env;
use millpond_tests::writer::Writer;

fn py_put(addr: &str, id: &str, partition: i32, first: i64, n: i64) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/put_flush.py");
    let out = Command::new(required_env("MILLPOND_PYTHON"))
        .args([
            script,
            addr,
            id,
            &partition.to_string(),
            &first.to_string(),
            &n.to_string(),
        ])
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
        writer.stop();
        assert_eq!(lake.count(), 300_000, "{backend:?}");
        assert_eq!(lake.column_text("max(name)"), vec![Some("py-99999".into())]);
        assert_eq!(
            lake.column_text("sum(score)::BIGINT"),
            vec![Some("22499925000".into())]
        );
    }
}
