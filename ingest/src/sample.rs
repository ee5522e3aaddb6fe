//! PostHog-like sample events (~1.3 KB of JSON each) for the demo, tests
//! and benchmarks. Deterministic for a given index.
use std::fmt::Write;
use std::time::Duration;

use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;

const EVENTS: [&str; 6] = [
    "$pageview",
    "$autocapture",
    "$identify",
    "signup",
    "$pageleave",
    "purchase",
];
const BROWSERS: [&str; 4] = ["Chrome", "Firefox", "Safari", "Edge"];

/// One event as JSON text. `i` picks every varying field.
pub fn event(i: u64) -> String {
    let team = 1 + i % 7;
    let mut props = String::with_capacity(1100);
    write!(
        props,
        r#"{{"$browser":"{}","$browser_version":{},"$os":"Linux","$current_url":"https://example.com/products/{}?ref=mail","$host":"example.com","$pathname":"/products/{}","$screen_height":1080,"$screen_width":1920,"$viewport_height":{},"$viewport_width":1280,"$lib":"web","$lib_version":"1.160.{}","$insert_id":"ins-{:016x}","$time":{}.{:03},"$device_id":"dev-{:012x}","$session_id":"sess-{:012x}","$window_id":"win-{:08x}","$pageview_id":"pv-{:010x}","$referrer":"https://search.example.org/?q=item+{}","$referring_domain":"search.example.org","utm_source":"newsletter","utm_campaign":"autumn-{}","plan":"{}","is_trial":{},"cart_value":{}.{:02},"items":[{},{},{}],"$set":{{"email":"user{}@example.com","name":"User {}"}},"$feature_flags":["beta-ui","new-checkout"],"$active_feature_flags":["beta-ui"]}}"#,
        BROWSERS[(i % 4) as usize],
        100 + i % 30,
        i % 5000,
        i % 5000,
        700 + i % 300,
        i % 50,
        i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        1_700_000_000 + i,
        i % 1000,
        i.wrapping_mul(31) & 0xffff_ffff_ffff,
        (i / 20).wrapping_mul(17) & 0xffff_ffff_ffff,
        (i / 5) & 0xffff_ffff,
        i & 0xff_ffff_ffff,
        i % 97,
        i % 12,
        ["free", "pro", "enterprise"][(i % 3) as usize],
        i.is_multiple_of(2),
        i % 500,
        i % 100,
        i % 10,
        i % 20,
        i % 30,
        i % 9000,
        i % 9000,
    )
    .expect("write to string");
    format!(
        r#"{{"uuid":"{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}","event":"{}","team_id":{},"distinct_id":"user-{}","timestamp":"2026-11-29 12:{:02}:{:02}.{:03}","created_at":"2026-11-29 12:{:02}:{:02}.{:03}","elements_chain":"a.btn.primary:nth-child=1;button.checkout:text=\"Buy now\"","person_properties":{{"email":"user{}@example.com","plan":"pro","country":"NZ"}},"properties":{}}}"#,
        (i >> 16) as u32,
        (i & 0xffff) as u16,
        i % 0xfff,
        (i / 3) % 0xfff,
        i.wrapping_mul(2_654_435_761) & 0xffff_ffff_ffff,
        EVENTS[(i % 6) as usize],
        team,
        i % 9000,
        (i / 60) % 60,
        i % 60,
        i % 1000,
        (i / 60) % 60,
        i % 60,
        (i + 7) % 1000,
        i % 9000,
        props
    )
}

/// Produces events `start..start + count` to `topic`, keyed by distinct_id
/// (so partitions follow the producer's hashing).
pub fn produce(bootstrap: &str, topic: &str, start: u64, count: u64) -> anyhow::Result<()> {
    produce_all(
        bootstrap,
        topic,
        (start..start + count).map(|i| (format!("user-{}", i % 9000), event(i).into_bytes())),
    )
}

/// Produces each line of `lines` as one message keyed `line-<n>`.
pub fn produce_lines(bootstrap: &str, topic: &str, lines: &[u8]) -> anyhow::Result<()> {
    produce_all(
        bootstrap,
        topic,
        lines
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .enumerate()
            .map(|(i, l)| (format!("line-{i}"), l.to_vec())),
    )
}

fn produce_all(
    bootstrap: &str,
    topic: &str,
    messages: impl Iterator<Item = (String, Vec<u8>)>,
) -> anyhow::Result<()> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "20")
        .set("compression.type", "lz4")
        .set("message.max.bytes", "16000000")
        .create()?;
    for (key, payload) in messages {
        let mut record = BaseRecord::to(topic).key(&key).payload(&payload);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn events_are_json_objects_of_about_1300_bytes() {
        for i in [0, 1, 12345, u64::MAX / 3] {
            let e = super::event(i);
            let v: serde_json::Value = serde_json::from_str(&e).unwrap();
            assert!(v.is_object());
            assert!((1100..1500).contains(&e.len()), "{} bytes", e.len());
        }
    }
}
