//! `kafka::reread` against librdkafka's mock cluster: exactly the records
//! of the ranges, once each, and a quick error for records that are gone.
use std::time::{Duration, Instant};

use millpond_ingest::kafka::{reread, Consumer, KafkaContext};
use millpond_proto::OffsetRange;
use millpond_shared::metrics::IngestMetrics;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;

const TOPIC: &str = "t";

fn cluster_with(
    records_per_partition: i64,
) -> (
    MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    String,
) {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 2, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bs)
        .create()
        .unwrap();
    for p in 0..2 {
        for i in 0..records_per_partition {
            let body = format!("{{\"p\":{p},\"i\":{i}}}");
            producer
                .send(BaseRecord::<(), _>::to(TOPIC).partition(p).payload(&body))
                .unwrap();
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    (cluster, bs)
}

fn consumer(bs: &str) -> Consumer {
    let metrics = IngestMetrics::new(&millpond_shared::metrics::new_registry("test", "mock"));
    ClientConfig::new()
        .set("bootstrap.servers", bs)
        .set("group.id", "reread-test")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "error")
        .create_with_context(KafkaContext::new(metrics, None))
        .unwrap()
}

#[test]
fn rereads_exactly_the_ranges_once() {
    let (_cluster, bs) = cluster_with(100);
    let ranges = [
        OffsetRange::new(TOPIC, 0, 10, 19),
        OffsetRange::new(TOPIC, 1, 5, 5),
    ];
    let mut got = Vec::new();
    reread(
        &consumer(&bs),
        &ranges,
        Duration::from_secs(30),
        |records| {
            for r in records {
                let payload = String::from_utf8(r.payload.unwrap().to_vec()).unwrap();
                got.push((r.partition, r.offset, payload));
            }
        },
    )
    .unwrap();
    got.sort();
    let want: Vec<_> = (10..=19)
        .map(|o| (0, o, format!("{{\"p\":0,\"i\":{o}}}")))
        .chain([(1, 5, "{\"p\":1,\"i\":5}".to_owned())])
        .collect();
    assert_eq!(got, want);
}

#[test]
fn records_no_longer_in_kafka_fail_fast() {
    let (_cluster, bs) = cluster_with(10);
    let started = Instant::now();
    let err = reread(
        &consumer(&bs),
        &[OffsetRange::new(TOPIC, 0, 50, 60)],
        Duration::from_secs(60),
        |_| {},
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("no longer there"), "{err:#}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

/// A discovery round runs on the consume loop, which polls nothing while
/// it waits: it gives the lake's recorded offsets a short deadline, not
/// the flush's send deadline, and a round that gets no answer leaves the
/// new partition to the next round.
#[test]
fn discovery_waits_for_the_lake_briefly_and_tries_again_next_round() {
    use millpond_ingest::kafka::identity::Identity;
    use millpond_ingest::kafka::Discovery;
    use std::collections::HashMap;

    let (_cluster, bs) = cluster_with(10);
    let c = consumer(&bs);
    let metrics = IngestMetrics::new(&millpond_shared::metrics::new_registry("test", "mock"));
    // Partition 1 is new to this pod.
    let mut next: HashMap<i32, i64> = [(0, 0)].into();
    let stop = millpond_shared::shutdown::Stop::new();
    let mut asked = None;
    Discovery::due_now().maybe_assign(
        &c,
        TOPIC,
        1,
        0,
        &mut next,
        &metrics,
        &stop,
        |deadline| {
            asked = Some(deadline);
            anyhow::bail!("the writer does not answer")
        },
        &mut |_| Ok(Identity::Same),
    );
    let asked = asked.expect("the lake is read for a new partition");
    assert!(asked <= Duration::from_secs(10), "{asked:?}");
    assert!(
        !next.contains_key(&1),
        "not assigned without the lake's offsets"
    );
    Discovery::due_now().maybe_assign(
        &c,
        TOPIC,
        1,
        0,
        &mut next,
        &metrics,
        &stop,
        |_| Ok(vec![]),
        &mut |_| Ok(Identity::Same),
    );
    assert_eq!(next.get(&1), Some(&0), "assigned on the next round");
}
