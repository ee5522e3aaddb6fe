//! Every `helm upgrade` completes by itself: the chart's StatefulSet played
//! with the real binaries (`statefulset.rs`), events flowing throughout,
//! through 2 -> 4 and 4 -> 2 replicas, a redeploy and a canary, on DuckLake
//! (a Postgres catalog and S3) and on hoglake (the emulator and S3). Each
//! change completes within its bound, no process exits except by SIGTERM,
//! each pod's counts conserve its records, and every record lands exactly
//! once.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use millpond_tests::hoglake::Hoglake;
use millpond_tests::kafka::{committed, produce_events, BrokerProcess};
use millpond_tests::lake::{Backend, Lake};
use millpond_tests::statefulset::{Destination, Spec, StatefulSet};

const TOPIC: &str = "events";
const GROUP: &str = "millpond-events-events";
const PARTITIONS: i32 = 8;
/// The chart's default lease (DUCKLAKE_PARTITION_LEASE_S).
const LEASE: Duration = Duration::from_secs(60);

/// Events, 100 every 200 ms, each with a unique `seq`, until stopped.
struct Producer {
    running: Arc<AtomicBool>,
    produced: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl Producer {
    fn start(bootstrap: &str) -> Producer {
        let running = Arc::new(AtomicBool::new(true));
        let produced = Arc::new(AtomicU64::new(0));
        let (r, p, bs) = (running.clone(), produced.clone(), bootstrap.to_owned());
        let thread = std::thread::spawn(move || {
            while r.load(Ordering::SeqCst) {
                let start = p.load(Ordering::SeqCst);
                produce_events(&bs, TOPIC, PARTITIONS, start, 100);
                p.store(start + 100, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Producer {
            running,
            produced,
            thread,
        }
    }

    fn produced(&self) -> u64 {
        self.produced.load(Ordering::SeqCst)
    }

    fn stop(self) -> u64 {
        self.running.store(false, Ordering::SeqCst);
        self.thread.join().unwrap();
        self.produced.load(Ordering::SeqCst)
    }
}

fn total_committed(bootstrap: &str) -> i64 {
    committed(bootstrap, GROUP, TOPIC, PARTITIONS)
        .into_iter()
        .map(|o| o.unwrap_or(0))
        .sum()
}

/// What the lake holds: rows, and distinct `seq` values.
struct Landed {
    rows: i64,
    distinct: i64,
}

#[test]
fn every_helm_upgrade_completes_by_itself_and_lands_each_record_once() {
    let broker = BrokerProcess::start(TOPIC, PARTITIONS);
    let lake = Lake::new(Backend::PostgresS3, "events");
    // Each change may take a few lease periods: a handover waits at most
    // one lease for a pod killed mid-way, and a clean stop releases at once.
    roll(
        &broker,
        &lake,
        &[("DUCKLAKE_PARTITION_LEASE_S", "60")],
        3 * LEASE,
        || {
            let distinct: i64 = lake.column_text("count(DISTINCT seq)")[0]
                .clone()
                .unwrap()
                .parse()
                .unwrap();
            Landed {
                rows: lake.count(),
                distinct,
            }
        },
    );
}

/// The same upgrades on hoglake, which has no leases: two owners of a
/// partition race, the offsets tables refuse the loser's commit (the
/// partition fence), and its ingest sends only what was not recorded.
/// Nothing waits out a lease, so each change has a bound of one lease
/// period. (With HOGLAKE_PARTITION_FENCE=false this run lands duplicates.)
#[test]
fn every_helm_upgrade_on_hoglake_completes_by_itself_and_lands_each_record_once() {
    let broker = BrokerProcess::start(TOPIC, PARTITIONS);
    let lake = Hoglake::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    roll(&broker, &lake, &[], LEASE, || {
        let mut seen: BTreeMap<i64, u32> = BTreeMap::new();
        runtime.block_on(async {
            for file in &lake.files().await {
                let batch = lake.read(file).await;
                let seq = batch
                    .column_by_name("seq")
                    .unwrap()
                    .as_primitive::<Int64Type>();
                for id in seq.values() {
                    *seen.entry(*id).or_default() += 1;
                }
            }
        });
        Landed {
            rows: seen.values().map(|n| i64::from(*n)).sum(),
            distinct: seen.len() as i64,
        }
    });
}

/// Plays the five upgrades on `destination` with `env` in every pod, each
/// within `bound`, and checks every event landed once (`landed`).
fn roll<'a>(
    broker: &BrokerProcess,
    destination: impl Into<Destination<'a>>,
    env: &[(&str, &str)],
    bound: Duration,
    landed: impl FnOnce() -> Landed,
) {
    let producer = Producer::start(&broker.bootstrap);
    let spec = |replicas, revision, partition| Spec {
        replicas,
        revision,
        partition,
    };
    let mut set = StatefulSet::create(destination, &broker.bootstrap, TOPIC, env, spec(2, 1, 0));
    let bs = broker.bootstrap.clone();
    set.wait_until(Duration::from_secs(60), "the first pods commit", || {
        total_committed(&bs) > 0
    });

    let mut took = Vec::new();
    for (what, next) in [
        ("scale 2 -> 4", spec(4, 2, 0)),
        ("scale 4 -> 2", spec(2, 3, 0)),
        ("redeploy", spec(2, 4, 0)),
        ("canary: the highest ordinal only", spec(2, 5, 1)),
        ("canary: the rest", spec(2, 5, 0)),
    ] {
        // Events keep flowing into the pods before each change.
        let before = producer.produced();
        set.wait_until(Duration::from_secs(60), "events flow", || {
            producer.produced() >= before + 1000
        });
        took.push((what, set.upgrade(next, bound)));
    }

    let total = producer.stop();
    set.wait_until(Duration::from_secs(120), "every event committed", || {
        total_committed(&bs) == total as i64
    });
    let events = set.events.join("\n");
    let pods = set.drain();
    eprintln!("{events}");
    for (what, t) in &took {
        eprintln!("{what}: completed in {:.1} s", t.as_secs_f64());
    }

    // Each pod's counts conserve its records.
    let mut consumed = 0.0;
    for pod in &pods {
        let (got, accounted) = pod.conservation();
        assert_eq!(
            got, accounted,
            "conservation in {}: {:?} {:?}\n{}",
            pod.pod, pod.ingest, pod.writer, pod.logs
        );
        consumed += got;
    }
    assert!(consumed >= total as f64, "every event consumed by some pod");
    // Every record once: as many rows as events, none twice.
    assert_eq!(total_committed(&bs), total as i64);
    let Landed { rows, distinct } = landed();
    assert_eq!(rows, total as i64, "rows in the lake");
    assert_eq!(distinct, total as i64, "distinct events in the lake");
}
