//! `kafka::Retention` against librdkafka's mock cluster (which keeps ~5 MiB
//! per partition): with `auto.offset.reset=error`, a log start past the
//! consumer's position arrives as a consume error; the answer counts the
//! span and the partition is read on from its log start.
use std::collections::HashMap;
use std::time::{Duration, Instant};

use millpond_ingest::kafka::{Consumer, KafkaContext, Retention};
use millpond_shared::metrics::{new_registry, sample, IngestMetrics};
use rdkafka::consumer::Consumer as _;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

const TOPIC: &str = "t";

#[test]
fn an_offset_retention_took_is_an_error_answered_at_the_log_start() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bs = cluster.bootstrap_servers();
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bs)
        .set("message.max.bytes", "10000000")
        .create()
        .unwrap();
    let pad = "x".repeat(100_000);
    for _ in 0..90 {
        producer
            .send(BaseRecord::<(), _>::to(TOPIC).partition(0).payload(&pad))
            .unwrap();
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).unwrap();

    let registry = new_registry("test", "mock");
    let metrics = IngestMetrics::new(&registry);
    let consumer: Consumer = ClientConfig::new()
        .set("bootstrap.servers", &bs)
        .set("group.id", "retention-test")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "error")
        .create_with_context(KafkaContext::new(metrics.clone(), None))
        .unwrap();
    let (low, high) = consumer
        .fetch_watermarks(TOPIC, 0, Duration::from_secs(10))
        .unwrap();
    assert!(low > 0, "the log start moved (low {low})");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Offset(0))
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let assigned = HashMap::from([(0, 0)]);
    let mut retention = Retention::new(&assigned);

    let until = Instant::now() + Duration::from_secs(30);
    let error = loop {
        assert!(Instant::now() < until, "no out-of-range error");
        match consumer.poll(Duration::from_millis(200)) {
            Some(Err(e)) => break e,
            Some(Ok(m)) => panic!("a record at {} below the log start", m.offset()),
            None => {}
        }
    };
    assert_eq!(
        error,
        KafkaError::MessageConsumption(RDKafkaErrorCode::AutoOffsetReset),
        "how rust-rdkafka reports it: the code only, no partition"
    );
    assert!(retention.seen(&error));
    let moved = retention
        .answer(&consumer, TOPIC, &assigned, &metrics)
        .unwrap();
    assert_eq!(moved, vec![(0, low)]);
    let lost = sample(
        &registry,
        "records_lost_to_retention_total",
        &[("partition", "0")],
    );
    assert_eq!(lost, Some(low as f64));
    // Answered once: nothing more to do until the next error.
    assert_eq!(
        retention
            .answer(&consumer, TOPIC, &assigned, &metrics)
            .unwrap(),
        vec![]
    );

    let mut offsets = Vec::new();
    while offsets.len() < (high - low) as usize {
        assert!(Instant::now() < until, "read {offsets:?} of {low}..{high}");
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => offsets.push(m.offset()),
            Some(Err(e)) => panic!("{e}"),
            None => {}
        }
    }
    assert_eq!(offsets, (low..high).collect::<Vec<_>>());
}
