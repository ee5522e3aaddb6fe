//! The partition fence against the emulator: two owners of one Kafka
//! partition, however they cut it and however late one of them commits,
//! publish each offset once.
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use millpond_hoglake::layout::Layout;
use millpond_hoglake::publish::{
    offsets_table, Outcome, PublishError, Publisher, MUTATION_CAPABILITY,
};
use millpond_proto::OffsetRange;
use serde_json::json;

use crate::support::*;

/// `ids` as rows covering offsets `first..=last` of partition 0.
fn ids(first: i64, last: i64) -> Vec<i64> {
    (first..=last).collect()
}

/// Every `id` the table holds, read back from its files.
async fn ids_in_table(p: &Publisher) -> Vec<i64> {
    let mut all = Vec::new();
    for f in p.catalog().list_files(NS, TABLE, None).await.unwrap() {
        let batch = read_back(p, &f.path).await;
        let col = batch
            .column_by_name("id")
            .unwrap()
            .as_primitive::<Int64Type>();
        all.extend(col.values().iter().copied());
    }
    all.sort_unstable();
    all
}

async fn publish(
    p: &mut Publisher,
    flush: &str,
    first: i64,
    last: i64,
) -> Result<Outcome, PublishError> {
    let rows = ids(first, last);
    let teams = vec![1; rows.len()];
    p.publish(flush, &[batch(&rows, &teams)], &ranges(first, last))
        .await
        .map(|r| r.outcome)
}

/// A second owner that cut the partition differently (a replica-count
/// change, a restart with another FLUSH_SIZE) is refused as an overlap, not
/// published; what lies past the recorded offsets is then published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_owner_cutting_the_partition_differently_is_refused_as_an_overlap() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut a = publisher(&emu, &s3, &bucket).await;
    let mut b = publisher(&emu, &s3, &bucket).await;
    assert_eq!(
        publish(&mut a, "a-1", 0, 9).await.unwrap(),
        Outcome::Published
    );

    let err = publish(&mut b, "b-1", 5, 14).await.unwrap_err();
    assert!(matches!(err, PublishError::Overlap(_)), "{err}");
    assert!(err.to_string().contains("up to 9"), "{err}");
    assert_eq!(b.orphans().total(), 0, "refused before uploading");

    // What ingest does next: read the recorded offsets, send the rest.
    let recorded = b.recorded_offsets("events").await.unwrap();
    assert_eq!(recorded, [OffsetRange::new("events", 0, 0, 9)]);
    assert_eq!(
        publish(&mut b, "b-2", 10, 14).await.unwrap(),
        Outcome::Published
    );
    // The first owner, still running, reaches into what b recorded.
    let err = publish(&mut a, "a-2", 10, 19).await.unwrap_err();
    assert!(matches!(err, PublishError::Overlap(_)), "{err}");

    assert_eq!(ids_in_table(&a).await, ids(0, 14), "every offset once");
}

/// An old owner frozen between its read and its commit (a paused pod, a
/// request stuck in the server's queue): a new owner publishes the same
/// offsets meanwhile, and the old commit, when it lands, is refused whole
/// and then found overlapping. Nothing of it is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_owner_whose_commit_lands_late_writes_nothing() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut old = publisher(&emu, &s3, &bucket).await;
    let mut new = publisher(&emu, &s3, &bucket).await;
    assert_eq!(
        publish(&mut old, "old-1", 0, 4).await.unwrap(),
        Outcome::Published
    );
    emu.fault(json!({"method": "POST", "path": "/mutations/prepared$", "action": "delay", "delay_ms": 1500, "count": 1}))
        .await;
    let task = tokio::spawn(async move {
        let outcome = publish(&mut old, "old-2", 5, 14).await;
        (old, outcome)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while emu.commits().await.len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the old owner's commit never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // While the old commit waits: the new owner, which read the partition
    // after it, publishes the same records cut another way.
    assert_eq!(
        publish(&mut new, "new-1", 5, 9).await.unwrap(),
        Outcome::Published
    );

    let (old, outcome) = task.await.unwrap();
    let err = outcome.unwrap_err();
    assert!(matches!(err, PublishError::Overlap(_)), "{err}");
    let mut statuses: Vec<u64> = emu
        .commits()
        .await
        .iter()
        .map(|c| c["status"].as_u64().unwrap())
        .collect();
    statuses.sort_unstable();
    assert_eq!(
        statuses,
        [200, 200, 409],
        "the late commit is refused, not retried"
    );
    assert_eq!(old.commit_conflicts(), 1);
    assert_eq!(
        ids_in_table(&old).await,
        ids(0, 9),
        "nothing of the late commit"
    );
}

/// The fence's record: each partition's last range and the record it ended
/// on, for the live incarnation only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_offsets_are_each_partitions_last_range_in_the_live_table() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher(&emu, &s3, &bucket).await;
    assert!(p.recorded_offsets("events").await.unwrap().is_empty());
    let mark = Some(millpond_proto::LastRecord {
        timestamp_ms: Some(1_700_000_000_123),
        checksum: 0xfeed_beef_0000_0001,
    });
    let two = [
        OffsetRange::new("events", 0, 0, 3).with_last_record(mark),
        OffsetRange::new("events", 3, 10, 11),
    ];
    p.publish("f1", &[batch(&ids(0, 5), &[1; 6])], &two)
        .await
        .unwrap();
    p.publish(
        "f2",
        &[batch(&ids(6, 7), &[1; 2])],
        &[OffsetRange::new("events", 0, 4, 5)],
    )
    .await
    .unwrap();
    assert_eq!(
        p.recorded_offsets("events").await.unwrap(),
        [OffsetRange::new("events", 0, 4, 5), two[1].clone()]
    );
    assert!(p.recorded_offsets("other").await.unwrap().is_empty());
    let names: BTreeSet<String> = p
        .catalog()
        .table_names(NS)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert!(names.contains(&offsets_table(TABLE, 0)) && names.contains(&offsets_table(TABLE, 3)));

    // Dropped and recreated: the old incarnation's offsets are not its.
    let (status, body) = emu
        .call(
            reqwest::Method::DELETE,
            &format!("/v1/catalogs/{CATALOG}/namespaces/{NS}/tables/{TABLE}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    assert!(p.recorded_offsets("events").await.unwrap().is_empty());
    assert_eq!(
        publish(&mut p, "f3", 0, 5).await.unwrap(),
        Outcome::Published
    );
}

/// A server that cannot guard a commit with its offsets tables is refused
/// at connect, naming the variable, unless the fence is turned off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_guarded_mutations_is_refused_while_the_fence_is_on() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start_with(&[
        "--capabilities",
        "atomic-table-creation-v1,idempotent-append-v1",
    ]);
    let client = millpond_hoglake::catalog::CatalogClient::new(
        &emu.root,
        CATALOG,
        millpond_hoglake::catalog::DEFAULT_REQUEST_TIMEOUT,
    )
    .unwrap();
    let mut config = publisher_config(&s3, &bucket, Layout::default(), true);
    let err = Publisher::connect(client.clone(), config.clone())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("HOGLAKE_PARTITION_FENCE") && text.contains(MUTATION_CAPABILITY),
        "{text}"
    );
    config.partition_fence = false;
    let mut p = Publisher::connect(client, config).await.unwrap();
    assert_eq!(
        publish(&mut p, "f", 0, 1).await.unwrap(),
        Outcome::Published
    );
}
