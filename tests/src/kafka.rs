//! Kafka helpers for tests: an in-process mock cluster (real protocol on
//! 127.0.0.1, with fault injection), a mock broker in its own process,
//! producing, and reading committed offsets.
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// Extra librdkafka settings of a test client (e.g. TLS).
pub type Settings<'a> = &'a [(&'a str, &'a str)];

fn config(bootstrap: &str, settings: Settings<'_>) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap);
    for (k, v) in settings {
        c.set(*k, *v);
    }
    c
}

pub fn producer(bootstrap: &str) -> BaseProducer {
    producer_with(bootstrap, &[])
}

pub fn producer_with(bootstrap: &str, settings: Settings<'_>) -> BaseProducer {
    config(bootstrap, settings)
        .set("linger.ms", "5")
        .set("message.max.bytes", "10000000")
        .create()
        .unwrap()
}

/// Produces `(partition, payload)`; None payload is a tombstone.
pub fn produce(bootstrap: &str, topic: &str, records: &[(i32, Option<Vec<u8>>)]) {
    produce_with(bootstrap, &[], topic, records)
}

pub fn produce_with(
    bootstrap: &str,
    settings: Settings<'_>,
    topic: &str,
    records: &[(i32, Option<Vec<u8>>)],
) {
    let p = producer_with(bootstrap, settings);
    for (part, payload) in records {
        let mut rec: BaseRecord<'_, str, [u8]> = BaseRecord::to(topic).partition(*part).key("k");
        if let Some(v) = payload {
            rec = rec.payload(v.as_slice());
        }
        let mut rec = rec;
        loop {
            match p.send(rec) {
                Ok(()) => break,
                Err((_, back)) => {
                    p.poll(Duration::from_millis(10));
                    rec = back;
                }
            }
        }
        p.poll(Duration::ZERO);
    }
    p.flush(Duration::from_secs(30)).unwrap();
}

/// `n` JSON events spread round-robin over `partitions`, each with a unique
/// `seq` starting at `start`.
pub fn produce_events(bootstrap: &str, topic: &str, partitions: i32, start: u64, n: u64) {
    produce_events_with(bootstrap, &[], topic, partitions, start, n)
}

pub fn produce_events_with(
    bootstrap: &str,
    settings: Settings<'_>,
    topic: &str,
    partitions: i32,
    start: u64,
    n: u64,
) {
    let records: Vec<_> = (start..start + n)
        .map(|i| {
            let body = format!(
                r#"{{"seq":{i},"event":"e{}","team_id":{},"props":{{"k":{i}}}}}"#,
                i % 5,
                i % 3
            );
            ((i % partitions as u64) as i32, Some(body.into_bytes()))
        })
        .collect();
    produce_with(bootstrap, settings, topic, &records);
}

fn group_client(bootstrap: &str, group: &str, settings: Settings<'_>) -> BaseConsumer {
    config(bootstrap, settings)
        .set("group.id", group)
        .create()
        .unwrap()
}

pub fn committed(bootstrap: &str, group: &str, topic: &str, partitions: i32) -> Vec<Option<i64>> {
    committed_with(bootstrap, &[], group, topic, partitions)
}

pub fn committed_with(
    bootstrap: &str,
    settings: Settings<'_>,
    group: &str,
    topic: &str,
    partitions: i32,
) -> Vec<Option<i64>> {
    let c = group_client(bootstrap, group, settings);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = c.committed_offsets(tpl, Duration::from_secs(10)).unwrap();
    (0..partitions)
        .map(|p| match got.find_partition(topic, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => Some(o),
            _ => None,
        })
        .collect()
}

pub fn commit(bootstrap: &str, group: &str, topic: &str, partition: i32, offset: i64) {
    let c = group_client(bootstrap, group, &[]);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
        .unwrap();
    c.commit(&tpl, rdkafka::consumer::CommitMode::Sync).unwrap();
}

pub fn watermarks(bootstrap: &str, topic: &str, partition: i32) -> (i64, i64) {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    c.fetch_watermarks(topic, partition, Duration::from_secs(10))
        .unwrap()
}

/// The mock broker binary in its own process.
pub struct BrokerProcess {
    child: Child,
    pub bootstrap: String,
}

impl BrokerProcess {
    pub fn start(topic: &str, partitions: i32) -> BrokerProcess {
        let mut child = Command::new(crate::process::binary("millpond-mock-broker"))
            .args(["--topic", topic, "--partitions", &partitions.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let bootstrap = line
            .trim()
            .strip_prefix("BOOTSTRAP=")
            .expect("bootstrap line")
            .to_owned();
        BrokerProcess { child, bootstrap }
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
