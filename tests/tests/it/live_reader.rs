//! The embedded lake (SQLite catalog, the default) can be queried by another
//! process while the writer is writing, as a person would with DuckDB.
use std::process::Command;

use millpond_proto::OffsetRange;
use millpond_tests::flight::{client, descriptor, put, rows};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::writer::Writer;

fn count(conn: &duckdb::Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM lake.main.events", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_lake_is_read_by_other_processes_while_the_writer_writes() {
    let lake = Lake::new(Backend::Embedded, "events");
    let mut writer = Writer::start(&lake);
    let mut c = client(&writer.addr).await;
    let first = descriptor("f0", vec![OffsetRange::new("events", 0, 0, 99)], 100);
    put(&mut c, &first, vec![rows(0, 100)]).await.unwrap();

    // A reader that stays attached across the writer's next commits.
    let held = lake.reader();
    assert_eq!(count(&held), 100);
    for i in 1..6_i64 {
        let d = descriptor(
            &format!("f{i}"),
            vec![OffsetRange::new("events", 0, i * 100, i * 100 + 99)],
            100,
        );
        put(&mut c, &d, vec![rows(i * 100, 100)]).await.unwrap();
        // Both the held reader and a fresh one see each commit at once.
        assert_eq!(count(&held), (i + 1) * 100);
        assert_eq!(count(&lake.reader()), (i + 1) * 100);
    }

    // The README's command, from yet another process, with the writer up.
    let out = Command::new("bash")
        .arg(millpond_tests::manifest_path("/../scripts/query-lake.sh"))
        .args(["--value", "SELECT count(DISTINCT id) FROM events"])
        .env(
            "MILLPOND_LAKE_DIR",
            lake.env_value("MILLPOND_LAKE_DIR").unwrap(),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "query-lake.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "600");
    assert!(writer.proc.is_running(), "writer stopped during the reads");
    assert_eq!(writer.metric("millpond_records_written_total", &[]), 600.0);
    writer.stop();
    assert_eq!(lake.count(), 600);
}
