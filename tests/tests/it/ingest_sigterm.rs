//! SIGTERM ends every wait of the real ingest binary: at startup (the
//! writer, the brokers, the authoritative allowlist) it exits 0 at once,
//! having consumed nothing; with records consumed and a writer that does
//! not acknowledge, it gives the flush SHUTDOWN_GRACE, commits nothing and
//! exits 0 (the records are read again at the next start).
use std::time::{Duration, Instant};

use millpond_ingest::flight::SHUTDOWN_GRACE;
use millpond_tests::fake_writer::{Mute, SilentOnFlush};
use millpond_tests::ingest::{eventually, Ingest, IngestOpts};
use millpond_tests::kafka::{committed, produce_events};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::process::free_port;
use millpond_tests::writer::Writer;
use rdkafka::mocking::MockCluster;

const TOPIC: &str = "events";
const GROUP: &str = "millpond-events-events";

/// How soon a startup wait must end after SIGTERM.
const PROMPT: Duration = Duration::from_secs(5);

/// A port nothing listens on.
fn closed() -> String {
    format!("127.0.0.1:{}", free_port())
}

fn start(bootstrap: &str, writer: &str, extra: Vec<(&str, String)>, logs: &Lake) -> Ingest {
    // Far longer than any bound below: only SIGTERM ends these waits.
    let mut defaults = vec![
        ("MILLPOND_WRITER_SEND_DEADLINE_S", "300".into()),
        ("KAFKA_STARTUP_TIMEOUT_S", "300".into()),
        ("FLUSH_INTERVAL_MS", "600000".into()),
    ];
    defaults.extend(extra);
    let extra = defaults;
    let o = IngestOpts {
        bootstrap,
        topic: TOPIC,
        table: "events",
        writer_addr: writer,
        replicas: 1,
        ordinal: 0,
        extra,
    };
    let ingest = Ingest::start(&o, logs.dir.path());
    eventually(Duration::from_secs(30), "ingest's HTTP up", || {
        ingest.health() != 0
    });
    ingest
}

/// SIGTERM, then asserts a clean exit within `bound`; how long it took.
fn sigterm_exits_zero_within(ingest: &mut Ingest, bound: Duration) -> Duration {
    assert!(ingest.proc.is_running(), "{}", ingest.proc.logs());
    let sent = Instant::now();
    ingest.proc.signal("TERM");
    let status = ingest.proc.wait_exit(bound);
    let took = sent.elapsed();
    assert!(
        status.success(),
        "ingest exited with {status} after SIGTERM: {}",
        ingest.proc.logs()
    );
    took
}

fn logs_say(ingest: &Ingest, what: &str) {
    let logs = ingest.proc.logs();
    assert!(logs.contains(what), "logs lack {what:?}:\n{logs}");
}

/// Waits a few seconds into startup, SIGTERM, exit 0 promptly.
fn stopped_at_startup(mut ingest: Ingest) -> Ingest {
    std::thread::sleep(Duration::from_secs(3));
    sigterm_exits_zero_within(&mut ingest, PROMPT);
    logs_say(&ingest, "ingest stopped before consuming anything");
    ingest
}

/// (a) The writer's port refuses connections: ingest is retrying
/// recorded-offsets on its ladder when SIGTERM comes.
#[test]
fn sigterm_ends_the_wait_for_a_writer_that_refuses_connections() {
    let logs = Lake::new(Backend::Embedded, "events");
    let ingest = start(&closed(), &closed(), vec![], &logs);
    let ingest = stopped_at_startup(ingest);
    logs_say(&ingest, "writer did not acknowledge; resending");
}

/// (b) The writer's port takes connections and never answers.
#[test]
fn sigterm_ends_the_wait_for_a_writer_that_never_answers() {
    let logs = Lake::new(Backend::Embedded, "events");
    let mute = Mute::start();
    stopped_at_startup(start(&closed(), &mute.addr, vec![], &logs));
}

/// (c) The writer answers; the brokers cannot be reached.
#[test]
fn sigterm_ends_the_wait_for_unreachable_brokers() {
    let logs = Lake::new(Backend::Embedded, "events");
    let writer = SilentOnFlush::start();
    let ingest = stopped_at_startup(start(&closed(), &writer.addr, vec![], &logs));
    logs_say(&ingest, "read offsets recorded in the lake");
}

/// (d) Authoritative allowlist whose URL never answers: ingest waits for
/// its first poll.
#[test]
fn sigterm_ends_the_wait_for_the_allowlists_first_poll() {
    let logs = Lake::new(Backend::Embedded, "events");
    let writer = SilentOnFlush::start();
    let url = Mute::start();
    let extra = vec![
        ("MILLPOND_FILTER_KEEP_FIELD_NAME", "team_id".into()),
        ("MILLPOND_FILTER_VALUES", "1".into()),
        (
            "MILLPOND_INCLUDE_VALUES_URL",
            format!("http://{}/allow.json", url.addr),
        ),
        ("MILLPOND_INCLUDE_VALUES_MODE", "authoritative".into()),
        ("MILLPOND_INCLUDE_VALUES_STARTUP_TIMEOUT_S", "300".into()),
        ("MILLPOND_INCLUDE_VALUES_REQUEST_TIMEOUT_S", "300".into()),
    ];
    let ingest = stopped_at_startup(start(&closed(), &writer.addr, extra, &logs));
    logs_say(&ingest, "dynamic allowlist source");
}

/// How long a flush may take after SIGTERM: the grace, and a margin for
/// the exit itself.
fn flush_bound() -> Duration {
    SHUTDOWN_GRACE + Duration::from_secs(5)
}

/// Ingest gave the flush its grace, committed nothing, and said so.
fn gave_up(ingest: &Ingest, bootstrap: &str, took: Duration) {
    assert!(
        took >= SHUTDOWN_GRACE - Duration::from_secs(1),
        "the flush was given up after {took:?}, before its grace"
    );
    assert_eq!(committed(bootstrap, GROUP, TOPIC, 1), vec![None]);
    logs_say(ingest, "will be read again from Kafka");
}

/// (e) Records consumed and streamed to a writer that takes the data and
/// never acknowledges the flush.
#[test]
fn sigterm_gives_an_unacknowledged_flush_its_grace_and_commits_nothing() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let logs = Lake::new(Backend::Embedded, "events");
    produce_events(&bs, TOPIC, 1, 0, 100);
    let writer = SilentOnFlush::start();
    let mut ingest = start(&bs, &writer.addr, vec![], &logs);
    eventually(Duration::from_secs(30), "consumed and streamed", || {
        ingest.metric("millpond_records_consumed_total", &[]) == 100.0
            && writer.messages_taken() > 0
    });
    let took = sigterm_exits_zero_within(&mut ingest, flush_bound());
    gave_up(&ingest, &bs, took);
}

/// (e) Records consumed, then the writer is killed: the final flush's
/// resends find no writer. The records are read again at the next start.
#[test]
fn sigterm_after_the_writer_died_commits_nothing_and_the_restart_delivers() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let lake = Lake::new(Backend::Embedded, "events");
    produce_events(&bs, TOPIC, 1, 0, 100);
    let mut w = Writer::start(&lake);
    let mut ingest = start(&bs, &w.addr, vec![], &lake);
    eventually(Duration::from_secs(30), "consumed", || {
        ingest.metric("millpond_records_consumed_total", &[]) == 100.0
    });
    w.proc.kill9();
    let took = sigterm_exits_zero_within(&mut ingest, flush_bound());
    gave_up(&ingest, &bs, took);

    let w = Writer::start(&lake);
    let ingest = start(
        &bs,
        &w.addr,
        vec![("FLUSH_INTERVAL_MS", "1000".into())],
        &lake,
    );
    eventually(Duration::from_secs(60), "read again and committed", || {
        committed(&bs, GROUP, TOPIC, 1) == vec![Some(100)]
    });
    ingest.stop();
    w.stop();
    assert_eq!(lake.count(), 100);
}
