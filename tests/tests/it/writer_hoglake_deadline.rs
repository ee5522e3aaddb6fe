//! One flush's write to hoglake is bounded by one deadline: as long as the
//! config check says a publish can take (HOGLAKE_MAX_RETRY_COUNT x
//! HOGLAKE_REQUEST_TIMEOUT_S plus the ladder's waits, at most the 480 s
//! liveness budget). Against the project's emulator refusing every commit
//! (409) or every request (503 with a Retry-After of an hour), the writer
//! gives up within it (table resolution and the publisher's ladder, the
//! one place the hoglake sink retries, included), answers UNAVAILABLE and
//! exits non-zero (the flush is read again from Kafka); nothing is
//! published.
use std::time::{Duration, Instant};

use millpond_proto::OffsetRange;
use millpond_tests::flight::{client, descriptor, put, rows, with_coordinates};
use millpond_tests::hoglake::{CommitRequest, Hoglake};
use millpond_tests::writer::Writer;
use millpond_writer::sink::hoglake::config::worst_case_publish;
use serde_json::{json, Value};

const RETRIES: u32 = 3;
const TIMEOUT_S: u64 = 2;
/// Over the deadline: receiving the flush, answering, a loaded machine.
/// The deadline is a behaviour bound, not a performance target.
const SLACK: Duration = Duration::from_secs(5);

/// The writer's deadline with these settings: 3 x 2 s plus waits of up to
/// 1.25 s and 2.5 s.
fn deadline() -> Duration {
    worst_case_publish(RETRIES, Duration::from_secs(TIMEOUT_S))
}

/// How a give-up reads: the answer's message and a setting the logs name.
struct Says {
    message: &'static str,
    setting: &'static str,
}

/// The deadline ended the write.
const AT_THE_DEADLINE: Says = Says {
    message: "deadline",
    setting: "HOGLAKE_MAX_RETRY_COUNT x HOGLAKE_REQUEST_TIMEOUT_S",
};

/// Starts a writer with small settings, arms `rule` on the emulator, sends
/// one flush and checks the writer gave it up within its deadline, loudly
/// (UNAVAILABLE, then a non-zero exit; both say why, as `says`), with
/// nothing published. Answers the lake, the commits the catalog received
/// and the writer's logs.
async fn gives_up_within_the_deadline(
    rule: Value,
    says: Says,
) -> (Hoglake, Vec<CommitRequest>, String) {
    let lake = Hoglake::start();
    let mut w = Writer::start_env(
        &lake.writer_env(),
        lake.dir.path(),
        &[
            ("HOGLAKE_MAX_RETRY_COUNT", &RETRIES.to_string()),
            ("HOGLAKE_REQUEST_TIMEOUT_S", &TIMEOUT_S.to_string()),
        ],
    );
    lake.emulator.fault(rule);
    let mut c = client(&w.addr).await;
    let flush = descriptor("f1", vec![OffsetRange::new("events", 0, 0, 9)], 10);
    let started = Instant::now();
    let answer = tokio::time::timeout(
        deadline() + SLACK,
        put(&mut c, &flush, vec![with_coordinates(rows(0, 10), 0, 0)]),
    )
    .await;
    let elapsed = started.elapsed();
    let refused = answer
        .unwrap_or_else(|_| {
            panic!(
                "the writer held the flush past its deadline ({:?} + {SLACK:?}); logs:\n{}",
                deadline(),
                w.proc.logs()
            )
        })
        .expect_err("a catalog that refuses everything cannot be written to");
    assert!(elapsed < deadline() + SLACK, "{elapsed:?}");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains(says.message), "{refused:?}");

    let status = w.proc.wait_exit(Duration::from_secs(30));
    let logs = w.proc.logs();
    assert!(!status.success(), "{status}: {logs}");
    assert!(
        logs.contains(says.setting),
        "the error names the settings that bound the write: {logs}"
    );
    let commits = lake.emulator.commits();
    assert!(
        commits.iter().all(|c| c.status != Some(200)),
        "nothing published: {commits:?}"
    );
    (lake, commits, logs)
}

/// Every commit refused with 409 commit_conflict: the publisher re-prepares
/// until its ladder (HOGLAKE_MAX_RETRY_COUNT attempts) is spent, within the
/// deadline, and the writer does not run the publish again: the sink
/// retries in one place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_409_catalog_is_given_up_within_the_deadline() {
    let (lake, commits, _) = gives_up_within_the_deadline(
        json!({
            "method": "POST", "path": "/prepared$", "action": "status",
            "status": 409, "count": 0
        }),
        Says {
            message: "failed after 3 attempts",
            setting: "HOGLAKE_MAX_RETRY_COUNT",
        },
    )
    .await;
    assert_eq!(
        commits.len(),
        RETRIES as usize,
        "one commit per attempt of the publisher's ladder, none more: {commits:?}"
    );
    assert!(commits.iter().all(|c| c.status == Some(409)), "{commits:?}");
    assert_eq!(lake.record_counts().await, Vec::<u64>::new());
}

/// Every commit answered 503 with Retry-After: 3600: the wait would end
/// past the deadline, so it is not waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_503_commit_with_a_long_retry_after_is_not_waited_for() {
    let (lake, commits, _) = gives_up_within_the_deadline(
        json!({
            "method": "POST", "path": "/prepared$", "action": "status",
            "status": 503, "retry_after": "3600", "count": 0
        }),
        AT_THE_DEADLINE,
    )
    .await;
    assert_eq!(commits.len(), 1, "never resent: {commits:?}");
    assert_eq!(commits[0].status, Some(503));
    assert_eq!(lake.record_counts().await, Vec::<u64>::new());
}

/// Every catalog request answered 503 with Retry-After: 3600: resolving the
/// table (before any publish) stops at the deadline too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_503_catalog_stops_resolving_the_table_at_the_deadline() {
    let (_lake, commits, logs) = gives_up_within_the_deadline(
        json!({
            "path": "^/v1/", "action": "status", "status": 503,
            "retry_after": "3600", "count": 0
        }),
        AT_THE_DEADLINE,
    )
    .await;
    assert!(commits.is_empty(), "{commits:?}");
    assert!(logs.contains("resolving the table"), "{logs}");
}
