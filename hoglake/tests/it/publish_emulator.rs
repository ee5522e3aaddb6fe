//! The publish path against the project's hoglake emulator (a Python
//! subprocess on a free port) and the moto S3 server from
//! `scripts/services.sh` (`eval "$(bash scripts/services.sh env)"`).
//!
//! Every test reads real state back: the emulator's request log and files
//! listing, and the uploaded parquet from S3.

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::TimestampMicrosecondType;
use millpond_hoglake::catalog::{CatalogClient, DEFAULT_REQUEST_TIMEOUT};
use millpond_hoglake::layout::{parse_partition_by, Layout};
use millpond_hoglake::publish::{
    idempotency_key, Outcome, Publisher, PublisherConfig, INSERTED_AT,
};
use millpond_hoglake::schema::{ColumnDef, ColumnType};
use millpond_shared::deadline::Deadline;
use serde_json::{json, Value};

use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_creates_namespace_and_table_and_batches_new_columns() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher(&emu, &s3, &bucket).await;
    let table = p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();

    let names: Vec<(&str, ColumnType, i64)> = table
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.column_type, c.field_id))
        .collect();
    assert_eq!(
        names,
        [
            ("id", ColumnType::Long, 1),
            ("name", ColumnType::String, 2),
            ("team", ColumnType::Long, 3),
            (INSERTED_AT, ColumnType::Timestamptz, 4)
        ]
    );
    assert!(table.read_snapshot_id.is_some());
    assert_eq!(
        emu.requests("^/v1/catalogs$").await.len(),
        1,
        "catalog created once"
    );
    assert_eq!(
        emu.requests("/namespaces$").await.len(),
        1,
        "namespace created once"
    );
    assert_eq!(
        emu.requests("/tables$").await.len(),
        1,
        "table created once"
    );

    // Again: nothing is created twice.
    let again = p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    assert_eq!(again.table_uuid, table.table_uuid);
    assert_eq!(emu.requests("/tables$").await.len(), 1);

    // Two new columns arrive: ONE alter with two add_column ops.
    let wider = RecordBatch::try_from_iter(vec![
        ("id", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
        (
            "browser",
            Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
        ),
        (
            "score",
            Arc::new(arrow::array::Float64Array::from(vec![1.5])) as ArrayRef,
        ),
    ])
    .unwrap();
    let altered = p.bootstrap(&wider.schema()).await.unwrap();
    let alters = emu.requests("/alter$").await;
    assert_eq!(alters.len(), 1, "one batched alter");
    let ops = alters[0]["body"]["ops"].as_array().unwrap();
    assert_eq!(ops.len(), 2);
    assert_eq!(
        alters[0]["query"]["expected_table_uuid"],
        table.table_uuid.as_str()
    );
    let added: Vec<(&str, i64)> = altered
        .columns
        .iter()
        .filter(|c| c.field_id > 4)
        .map(|c| (c.name.as_str(), c.field_id))
        .collect();
    assert_eq!(added, [("browser", 5), ("score", 6)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_lands_its_rows_in_s3_and_the_catalog() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher(&emu, &s3, &bucket).await;
    let r = ranges(100, 102);
    let receipt = p
        .publish("flush-1", &[batch(&[1, 2], &[7, 7]), batch(&[3], &[8])], &r)
        .await
        .unwrap();
    assert_eq!(receipt.outcome, Outcome::Published);
    assert_eq!((receipt.rows, receipt.files, receipt.attempts), (3, 1, 1));

    let table_uuid = receipt.table_uuid.clone().unwrap();
    assert_eq!(
        receipt.idempotency_key,
        Some(idempotency_key(&table_uuid, &r))
    );
    let commits = emu.commits().await;
    assert_eq!(commits.len(), 1);
    let body = &commits[0]["body"];
    assert_eq!(key_of(body), receipt.idempotency_key.unwrap().to_string());
    assert_eq!(
        body["appends"][0]["expected_table_uuid"],
        table_uuid.as_str()
    );
    assert!(
        body["read_snapshot"].as_i64().is_some(),
        "read_snapshot is sent"
    );

    let files = p
        .catalog()
        .list_files(NS, TABLE, receipt.snapshot_id)
        .await
        .unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].record_count, 3);
    assert_eq!(files[0].path, receipt.paths[0]);
    assert_eq!(files[0].stats_state.as_deref(), Some("provided"));
    let key = receipt.idempotency_key.unwrap().to_string();
    assert!(
        files[0]
            .path
            .contains(&format!("/data/{NS}/{TABLE}/{key}/"))
            && files[0].path.ends_with("-0.parquet"),
        "{}",
        files[0].path
    );

    let back = read_back(&p, &files[0].path).await;
    assert_eq!(back.num_rows(), 3);
    assert_eq!(
        files[0].file_size_bytes,
        p.store().get(&files[0].path).await.unwrap().len() as u64
    );
    assert_eq!(ints(&back, "id"), [1, 2, 3]);
    let inserted = back
        .column_by_name(INSERTED_AT)
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>();
    assert_eq!(inserted.null_count(), 0);
    assert!(
        inserted.values().iter().all(|v| *v == inserted.value(0)),
        "one stamp per flush"
    );
    let id_field = back.schema().field_with_name("id").unwrap().clone();
    assert_eq!(
        id_field
            .metadata()
            .get("PARQUET:field_id")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(p.orphans().total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_flush_writes_one_file_per_tuple_in_one_commit() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let layout = Layout {
        partition_by: parse_partition_by("team").unwrap(),
        sort_by: vec![],
    };
    let mut p = publisher_with(&emu, &s3, &bucket, layout).await;

    let receipt = p
        .publish(
            "flush-p",
            &[batch(&[1, 2, 3, 4], &[10, 20, 10, 30])],
            &ranges(0, 3),
        )
        .await
        .unwrap();
    assert_eq!((receipt.rows, receipt.files), (4, 3));
    let commits = emu.commits().await;
    assert_eq!(commits.len(), 1, "one commit for all tuples");
    let sent: Vec<Value> = commits[0]["body"]["appends"][0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["partition_values"].clone())
        .collect();
    assert_eq!(sent, [json!(["10"]), json!(["20"]), json!(["30"])]);

    let files = p
        .catalog()
        .list_files(NS, TABLE, receipt.snapshot_id)
        .await
        .unwrap();
    assert_eq!(files.len(), 3);
    let mut seen = Vec::new();
    for f in &files {
        let value: i64 = f.partition_values.as_ref().unwrap()[0]
            .as_ref()
            .unwrap()
            .parse()
            .unwrap();
        let back = read_back(&p, &f.path).await;
        let teams = ints(&back, "team");
        assert!(
            teams.iter().all(|t| *t == value),
            "file {} mixes tuples: {teams:?}",
            f.path
        );
        assert_eq!(back.num_rows() as u64, f.record_count);
        seen.push((value, ints(&back, "id")));
    }
    seen.sort();
    assert_eq!(seen, [(10, vec![1, 3]), (20, vec![2]), (30, vec![4])]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_commit_response_replays_and_publishes_exactly_once() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher(&emu, &s3, &bucket).await;
    p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    emu.fault(json!({"method": "POST", "path": "/prepared$", "action": "drop_response_after_commit", "count": 1}))
        .await;

    let receipt = p
        .publish(
            "flush-lost",
            &[batch(&[1, 2, 3], &[1, 1, 1])],
            &ranges(0, 2),
        )
        .await
        .unwrap();
    assert_eq!(receipt.outcome, Outcome::Replayed);
    assert_eq!((receipt.rows, receipt.attempts), (3, 2));

    let commits = emu.commits().await;
    assert_eq!(commits.len(), 2, "the original and one replay");
    assert_eq!(
        commits[0]["dropped"], "response",
        "the first answer was lost"
    );
    assert_eq!(
        commits[0]["body"], commits[1]["body"],
        "the replay is the identical request"
    );
    assert_eq!(commits[1]["status"], 200);
    assert_eq!(
        commits[1]["response"]["snapshot_id"],
        commits[0]["response"]["snapshot_id"]
    );
    assert_eq!(
        commits[1]["response"]["snapshot_id"].as_i64(),
        receipt.snapshot_id
    );

    assert_eq!(emu.data_snapshots().await, 1, "no second data snapshot");
    let files = p.catalog().list_files(NS, TABLE, None).await.unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].record_count, 3);
    assert_eq!(p.orphans().total(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_waits_at_least_retry_after_then_resends_the_identical_request() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher(&emu, &s3, &bucket).await;
    p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    emu.fault(json!({"method": "POST", "path": "/prepared$", "action": "status", "status": 503, "retry_after": "1", "count": 1}))
        .await;

    let started = Instant::now();
    let receipt = p
        .publish("flush-503", &[batch(&[1, 2], &[1, 1])], &ranges(0, 1))
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!((receipt.outcome, receipt.attempts), (Outcome::Published, 2));

    let commits = emu.commits().await;
    assert_eq!(commits.len(), 2);
    assert_eq!(commits[0]["status"], 503);
    assert_eq!(commits[0]["response"]["error"], "commit_queue_timeout");
    assert_eq!(commits[0]["body"], commits[1]["body"]);
    let gap = commits[1]["time"].as_f64().unwrap() - commits[0]["time"].as_f64().unwrap();
    // The ladder alone would pause 20-25 ms here; Retry-After: 1 is the floor.
    assert!(gap >= 1.0, "resent after {gap:.3}s, before Retry-After");
    assert!(gap < 5.0, "waited {gap:.3}s, far past Retry-After");
    assert!(elapsed >= Duration::from_secs(1));
    assert_eq!(emu.data_snapshots().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_table_is_refused_and_never_answered_from_the_old_receipt() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher(&emu, &s3, &bucket).await;
    let r1 = ranges(0, 2);
    let first = p
        .publish("flush-a", &[batch(&[1, 2, 3], &[1, 1, 1])], &r1)
        .await
        .unwrap();
    let t1 = first.table_uuid.clone().unwrap();
    let table_path = format!("/v1/catalogs/{CATALOG}/namespaces/{NS}/tables/{TABLE}");

    // (a) Dropped between flushes; Kafka replays the same offsets. The key
    // names the new incarnation, so the old receipt cannot answer it.
    let (status, body) = emu.call(reqwest::Method::DELETE, &table_path, None).await;
    assert_eq!(status, 200, "{body}");
    let second = p
        .publish("flush-a-again", &[batch(&[1, 2, 3], &[1, 1, 1])], &r1)
        .await
        .unwrap();
    let t2 = second.table_uuid.clone().unwrap();
    assert_ne!(t1, t2);
    assert_eq!(
        second.outcome,
        Outcome::Published,
        "not replayed from the old incarnation's receipt"
    );
    assert_ne!(second.idempotency_key, first.idempotency_key);
    assert_eq!(second.idempotency_key, Some(idempotency_key(&t2, &r1)));
    assert_eq!(p.recreations(), 1);
    let files = p.catalog().list_files(NS, TABLE, None).await.unwrap();
    assert_eq!(
        files.iter().map(|f| f.record_count).sum::<u64>(),
        3,
        "the rows are in the new table"
    );

    // (b) Recreated while the commit is in flight: the server refuses the
    // old incarnation (409 table_recreated), the payload is orphaned and
    // the flush is rebuilt against the new table under a new key.
    emu.fault(json!({"method": "POST", "path": "/prepared$", "action": "delay", "delay_ms": 1500, "count": 1}))
        .await;
    let r2 = ranges(3, 4);
    let task = tokio::spawn(async move {
        let receipt = p
            .publish("flush-b", &[batch(&[4, 5], &[2, 2])], &ranges(3, 4))
            .await;
        (p, receipt)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while emu.commits().await.len() < 3 {
        assert!(
            Instant::now() < deadline,
            "the delayed commit never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, body) = emu.call(reqwest::Method::DELETE, &table_path, None).await;
    assert_eq!(status, 200, "{body}");
    let defs: Vec<ColumnDef> = [
        ("id", ColumnType::Long),
        ("name", ColumnType::String),
        ("team", ColumnType::Long),
        (INSERTED_AT, ColumnType::Timestamptz),
    ]
    .into_iter()
    .map(|(name, column_type)| ColumnDef {
        name: name.into(),
        column_type,
        nullable: true,
        type_params: None,
        children: None,
        comment: None,
    })
    .collect();
    let client = CatalogClient::new(&emu.root, CATALOG, DEFAULT_REQUEST_TIMEOUT).unwrap();
    let t3 = client
        .create_table(NS, TABLE, &defs)
        .await
        .unwrap()
        .table_uuid;

    let (p, receipt) = task.await.unwrap();
    let receipt = receipt.unwrap();
    assert_eq!(receipt.outcome, Outcome::Published);
    assert_eq!(receipt.table_uuid.as_deref(), Some(t3.as_str()));
    assert_eq!(receipt.idempotency_key, Some(idempotency_key(&t3, &r2)));

    let commits = emu.commits().await;
    assert_eq!(commits.len(), 4);
    let refused = &commits[2];
    assert_eq!(refused["status"], 409);
    assert_eq!(refused["response"]["error"], "table_recreated");
    assert_eq!(
        refused["body"]["appends"][0]["expected_table_uuid"],
        t2.as_str()
    );
    assert_eq!(
        key_of(&refused["body"]),
        idempotency_key(&t2, &r2).to_string()
    );
    assert_eq!(commits[3]["status"], 200);
    assert_eq!(
        commits[3]["body"]["appends"][0]["expected_table_uuid"],
        t3.as_str()
    );
    assert_eq!(
        p.orphans().get("table_recreated"),
        2,
        "the refused payload's data file and its offsets file"
    );

    let files = p.catalog().list_files(NS, TABLE, None).await.unwrap();
    assert_eq!(
        files.len(),
        1,
        "only the rebuilt flush is in the recreated table"
    );
    assert_eq!(files[0].record_count, 2);
    assert_eq!(ints(&read_back(&p, &files[0].path).await, "id"), [4, 5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_after_the_read_re_prepares_under_the_same_key() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher(&emu, &s3, &bucket).await;
    let table = p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    emu.fault(json!({"method": "POST", "path": "/prepared$", "action": "delay", "delay_ms": 1000, "count": 1}))
        .await;
    let r = ranges(10, 11);
    let task = tokio::spawn(async move {
        let receipt = p
            .publish("flush-ddl", &[batch(&[1, 2], &[1, 1])], &ranges(10, 11))
            .await;
        (p, receipt)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while emu.commits().await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the delayed commit never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Another writer evolves the table while our commit is in flight.
    let client = CatalogClient::new(&emu.root, CATALOG, DEFAULT_REQUEST_TIMEOUT).unwrap();
    let extra = ColumnDef {
        name: "extra".into(),
        column_type: ColumnType::String,
        nullable: true,
        type_params: None,
        children: None,
        comment: None,
    };
    client
        .add_columns(NS, TABLE, Some(&table.table_uuid), &[extra])
        .await
        .unwrap();

    let (p, receipt) = task.await.unwrap();
    let receipt = receipt.unwrap();
    assert_eq!(
        (receipt.outcome, receipt.rows, receipt.attempts),
        (Outcome::Published, 2, 2)
    );
    let commits = emu.commits().await;
    assert_eq!(commits.len(), 2);
    assert_eq!(commits[0]["status"], 409);
    assert_eq!(commits[0]["response"]["error"], "ddl_since_read_snapshot");
    assert_eq!(commits[1]["status"], 200);
    let key = idempotency_key(&table.table_uuid, &r).to_string();
    assert_eq!(key_of(&commits[0]["body"]), key);
    assert_eq!(
        key_of(&commits[1]["body"]),
        key,
        "a refusal stores no receipt: the key is reused"
    );
    assert!(
        commits[1]["body"]["read_snapshot"].as_i64() > commits[0]["body"]["read_snapshot"].as_i64(),
        "the rebuilt payload is planned against the new read"
    );
    // The data file and the partition's offsets file.
    assert_eq!(p.orphans().get("ddl_since_read_snapshot"), 2);
    let files = p.catalog().list_files(NS, TABLE, None).await.unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].path, receipt.paths[0]);
    let back = read_back(&p, &files[0].path).await;
    assert!(
        back.column_by_name("extra").is_some(),
        "the rebuilt file follows the altered table"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_422_fails_at_once_and_orphans_the_upload() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher(&emu, &s3, &bucket).await;
    p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    emu.fault(json!({"method": "POST", "path": "/prepared$", "action": "status", "status": 422, "count": 1}))
        .await;
    let err = p
        .publish("flush-422", &[batch(&[1], &[1])], &ranges(0, 0))
        .await
        .unwrap_err();
    assert_eq!(
        err.class(),
        millpond_hoglake::catalog::ErrorClass::Permanent
    );
    assert!(err.to_string().contains("HTTP 422"), "{err}");
    assert_eq!(
        emu.commits().await.len(),
        1,
        "no retry of a permanent refusal"
    );
    // The data file and the partition's offsets file.
    assert_eq!(p.orphans().get("commit_refused"), 2);
    assert_eq!(emu.data_snapshots().await, 0);
}

/// A new process rebuilds the same flush (fresh stamp, fresh object names,
/// another flush id): the offsets tables end at exactly its ranges, so it
/// is acknowledged without uploading or committing anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_flush_after_a_restart_is_recognised_as_already_recorded() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let r = ranges(50, 52);
    let mut first = publisher(&emu, &s3, &bucket).await;
    let published = first
        .publish("flush-x", &[batch(&[1, 2, 3], &[1, 1, 1])], &r)
        .await
        .unwrap();
    assert_eq!(published.outcome, Outcome::Published);

    let mut second = publisher(&emu, &s3, &bucket).await;
    let again = second
        .publish("flush-y", &[batch(&[1, 2, 3], &[1, 1, 1])], &r)
        .await
        .unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyRecorded);
    assert!(again.recorded_by_another_flush);
    assert_eq!((again.rows, again.files), (0, 0));
    assert_eq!(emu.commits().await.len(), 1, "nothing sent again");
    assert_eq!(second.orphans().total(), 0, "nothing uploaded");
    assert_eq!(emu.data_snapshots().await, 1);
    let files = second.catalog().list_files(NS, TABLE, None).await.unwrap();
    assert_eq!(files.iter().map(|f| f.record_count).sum::<u64>(), 3);

    // The same flush id again (a resend after a lost ack) is this flush's.
    let mut third = publisher(&emu, &s3, &bucket).await;
    let resent = third
        .publish("flush-x", &[batch(&[1, 2, 3], &[1, 1, 1])], &r)
        .await
        .unwrap();
    assert_eq!(resent.outcome, Outcome::AlreadyRecorded);
    assert!(!resent.recorded_by_another_flush);
}

/// Without the fence, the commit key stands in: the rebuilt payload under
/// the used key is declined and the receipt says the rows are in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_fence_a_rebuilt_flush_is_recognised_by_its_key() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let r = ranges(50, 52);
    let unfenced = || publisher_fenced(&emu, &s3, &bucket, Layout::default(), false);
    let mut first = unfenced().await;
    let published = first
        .publish("flush-x", &[batch(&[1, 2, 3], &[1, 1, 1])], &r)
        .await
        .unwrap();
    assert_eq!(published.outcome, Outcome::Published);

    let mut second = unfenced().await;
    let again = second
        .publish("flush-y", &[batch(&[1, 2, 3], &[1, 1, 1])], &r)
        .await
        .unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyPublished);
    assert_eq!((again.rows, again.files), (0, 0));
    assert_eq!(again.snapshot_id, published.snapshot_id);
    assert_eq!(again.idempotency_key, published.idempotency_key);
    let commits = emu.commits().await;
    assert_eq!(commits.len(), 2);
    assert!(
        commits
            .iter()
            .all(|c| c["path"].as_str().unwrap().ends_with("/commit/prepared")),
        "{commits:?}"
    );
    assert_eq!(
        commits[1]["status"], 422,
        "the server declined the different payload under the used key"
    );
    assert_eq!(second.orphans().get("already_published"), 1);
    assert_eq!(emu.data_snapshots().await, 1);
    let files = second.catalog().list_files(NS, TABLE, None).await.unwrap();
    assert_eq!(files.iter().map(|f| f.record_count).sum::<u64>(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_budget_fails_with_every_attempt_identical() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let client = CatalogClient::new(&emu.root, CATALOG, DEFAULT_REQUEST_TIMEOUT).unwrap();
    let mut retry = fast_retry();
    retry.attempts = 3;
    let mut p = Publisher::connect(
        client,
        PublisherConfig {
            ladder: retry,
            dead_letter_table: None,
            ..publisher_config(&s3, &bucket, Layout::default(), true)
        },
    )
    .await
    .unwrap();
    p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    emu.fault(json!({"method": "POST", "path": "/prepared$", "action": "status", "status": 503, "retry_after": "0", "count": 0}))
        .await;
    let err = p
        .publish("flush-busy", &[batch(&[1], &[1])], &ranges(0, 0))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            millpond_hoglake::publish::PublishError::Exhausted { attempts: 3, .. }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("HOGLAKE_MAX_RETRY_COUNT"), "{err}");
    let commits = emu.commits().await;
    assert_eq!(commits.len(), 3);
    assert!(commits.iter().all(|c| c["body"] == commits[0]["body"]));
    // The data file and the partition's offsets file.
    assert_eq!(p.orphans().get("retries_exhausted"), 2);
    assert_eq!(emu.data_snapshots().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_read_snapshot_re_prepares_from_a_fresh_read() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher(&emu, &s3, &bucket).await;
    let table = p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    emu.fault(json!({"method": "POST", "path": "/prepared$", "action": "delay", "delay_ms": 1000, "count": 1}))
        .await;
    let task = tokio::spawn(async move {
        let receipt = p
            .publish("flush-410", &[batch(&[7], &[1])], &ranges(70, 70))
            .await;
        (p, receipt)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while emu.commits().await.is_empty() {
        assert!(
            Instant::now() < deadline,
            "the delayed commit never arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Another namespace's DDL moves head; expiry then moves the floor to it.
    let client = CatalogClient::new(&emu.root, CATALOG, DEFAULT_REQUEST_TIMEOUT).unwrap();
    client.ensure_namespace("other").await.unwrap();
    let head = client.get_catalog().await.unwrap().head_snapshot_id;
    assert!(head > table.read_snapshot_id.unwrap());
    let (status, body) = emu
        .call(
            reqwest::Method::POST,
            &format!("/_emulator/catalogs/{CATALOG}/floor"),
            Some(json!({"earliest_snapshot_id": head})),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let (p, receipt) = task.await.unwrap();
    let receipt = receipt.unwrap();
    assert_eq!((receipt.outcome, receipt.attempts), (Outcome::Published, 2));
    let commits = emu.commits().await;
    assert_eq!(commits.len(), 2);
    assert_eq!(commits[0]["status"], 410);
    assert_eq!(commits[1]["status"], 200);
    assert!(commits[1]["body"]["read_snapshot"].as_i64().unwrap() >= head);
    // The data file and the partition's offsets file.
    assert_eq!(p.orphans().get("read_snapshot_expired"), 2);
    assert_eq!(emu.data_snapshots().await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_timeout_while_the_server_commits_still_publishes_once() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let client = CatalogClient::new(&emu.root, CATALOG, Duration::from_millis(400)).unwrap();
    let mut p = Publisher::connect(
        client,
        PublisherConfig {
            dead_letter_table: None,
            ..publisher_config(&s3, &bucket, Layout::default(), true)
        },
    )
    .await
    .unwrap();
    p.bootstrap(&batch(&[1], &[1]).schema()).await.unwrap();
    // The first commit is served (and applied) only after the client gave up.
    emu.fault(json!({"method": "POST", "path": "/prepared$", "action": "delay", "delay_ms": 1200, "count": 1}))
        .await;
    let receipt = p
        .publish("flush-slow", &[batch(&[1, 2], &[1, 1])], &ranges(0, 1))
        .await
        .unwrap();
    assert!(receipt.attempts >= 2, "the first send timed out");
    tokio::time::sleep(Duration::from_millis(1500)).await; // let the slow one land
    let commits = emu.commits().await;
    assert!(commits.len() >= 2);
    assert!(
        commits.iter().all(|c| c["body"] == commits[0]["body"]),
        "every send identical"
    );
    assert!(commits.iter().all(|c| c["status"] == 200), "{commits:?}");
    assert!(commits
        .iter()
        .all(|c| c["response"]["snapshot_id"].as_i64() == receipt.snapshot_id));
    assert_eq!(emu.data_snapshots().await, 1, "published exactly once");
    let files = p.catalog().list_files(NS, TABLE, None).await.unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].record_count, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_refuses_a_data_path_whose_bucket_does_not_exist() {
    let Some((s3, _)) = s3_from_env() else { return };
    let emu = Emulator::start();
    let client = CatalogClient::new(&emu.root, CATALOG, DEFAULT_REQUEST_TIMEOUT).unwrap();
    let bucket = format!("no-such-bucket-{}", uuid::Uuid::new_v4().simple());
    let err = Publisher::connect(
        client,
        PublisherConfig {
            create_data_path: Some(format!("s3://{bucket}/lake")),
            dead_letter_table: None,
            ..publisher_config(&s3, &bucket, Layout::default(), true)
        },
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(&format!("s3://{bucket}/lake/_millpond/probe")),
        "{err}"
    );
    assert!(err.contains("HOGLAKE_DATA_PATH"), "{err}");
}

fn letters(offsets: &[i64]) -> RecordBatch {
    RecordBatch::try_from_iter(vec![
        (
            "kafka_offset",
            Arc::new(Int64Array::from(offsets.to_vec())) as ArrayRef,
        ),
        (
            "reason",
            Arc::new(StringArray::from(vec!["type_mismatch"; offsets.len()])) as ArrayRef,
        ),
    ])
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_land_in_their_table_in_the_same_commit() {
    let Some((s3, bucket)) = s3_from_env() else {
        return;
    };
    let emu = Emulator::start();
    let mut p = publisher_with(&emu, &s3, &bucket, Layout::default()).await;
    let receipt = p
        .publish_with_dead_letters(
            "f1",
            &[batch(&[1, 2], &[1, 1])],
            &[letters(&[2])],
            &ranges(0, 2),
            Deadline::none(),
        )
        .await
        .unwrap();
    assert_eq!(
        (receipt.rows, receipt.dead_letters, receipt.files),
        (2, 1, 1)
    );
    assert_eq!(receipt.file_rows, [2]);
    let commits = emu.commits().await;
    assert_eq!(commits.len(), 1);
    let appended: Vec<&str> = commits[0]["body"]["appends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["table"].as_str().unwrap())
        .collect();
    assert_eq!(
        appended,
        [TABLE, "events_dead_letters", "_millpond_offsets_events_0"]
    );
    let dl = format!("{TABLE}_dead_letters");
    let files = p.catalog().list_files(NS, &dl, None).await.unwrap();
    assert_eq!(files.len(), 1);
    let back = read_back(&p, &files[0].path).await;
    assert_eq!(ints(&back, "kafka_offset"), [2]);
    assert!(back.column_by_name(INSERTED_AT).is_some());

    // A flush of dead letters only still commits them, once.
    let only = p
        .publish_with_dead_letters(
            "f2",
            &[],
            &[letters(&[3, 4])],
            &ranges(3, 4),
            Deadline::none(),
        )
        .await
        .unwrap();
    assert_eq!(
        (only.outcome, only.rows, only.dead_letters),
        (Outcome::Published, 0, 2)
    );
    let again = p
        .publish_with_dead_letters(
            "f2",
            &[],
            &[letters(&[3, 4])],
            &ranges(3, 4),
            Deadline::none(),
        )
        .await
        .unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyRecorded);
    let files = p.catalog().list_files(NS, &dl, None).await.unwrap();
    assert_eq!(files.iter().map(|f| f.record_count).sum::<u64>(), 3);
}
