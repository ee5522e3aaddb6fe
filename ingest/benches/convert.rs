//! Throughput of `convert` on 10,000 synthetic PostHog-like events (~1.3 KB).
//!
//! Run: `cargo bench -p millpond-ingest --bench convert`

use std::fmt::Write as _;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use millpond_ingest::convert::convert;

const EVENTS: usize = 10_000;

/// Deterministic random choices (proptest's seeded generator), so every
/// run converts the same events.
struct Rng(proptest::test_runner::TestRng);

impl Rng {
    fn new() -> Self {
        Rng(proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ))
    }
    fn next(&mut self) -> u64 {
        <proptest::test_runner::TestRng as proptest::prelude::Rng>::next_u64(&mut self.0)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
    fn uuid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-7{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            (b >> 48) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }
}

const EVENT_NAMES: &[&str] = &[
    "$pageview",
    "$autocapture",
    "$pageleave",
    "$identify",
    "$feature_flag_called",
    "signup_completed",
];
const BROWSERS: &[&str] = &["Chrome", "Firefox", "Safari", "Edge"];
const OSES: &[&str] = &["Mac OS X", "Windows", "Linux", "iOS", "Android"];
const PATHS: &[&str] = &[
    "/",
    "/pricing",
    "/docs/getting-started",
    "/blog/2025/01/how-we-built-it",
    "/app/dashboard?tab=insights&range=7d",
];
const USER_AGENT: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 \
(KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";

fn event(rng: &mut Rng, i: usize) -> String {
    let path = rng.pick(PATHS);
    let session = rng.uuid();
    let mut e = String::with_capacity(1536);
    let _ = write!(
        e,
        r#"{{"uuid":"{uuid}","event":"{event}","team_id":{team},"distinct_id":"user-{user}","#,
        uuid = rng.uuid(),
        event = rng.pick(EVENT_NAMES),
        team = 1 + rng.below(40),
        user = rng.below(100_000),
    );
    let _ = write!(
        e,
        r#""timestamp":"2025-01-{d:02}T{h:02}:{m:02}:{s:02}.{ms:03}Z","#,
        d = 1 + rng.below(28),
        h = rng.below(24),
        m = rng.below(60),
        s = rng.below(60),
        ms = rng.below(1000),
    );
    let _ = write!(
        e,
        r#""properties":{{"$os":"{os}","$browser":"{browser}","$browser_version":{bv}.0,"#,
        os = rng.pick(OSES),
        browser = rng.pick(BROWSERS),
        bv = 100 + rng.below(30),
    );
    let _ = write!(
        e,
        r#""$device_type":"Desktop","$current_url":"https://app.example.com{path}","$pathname":"{path}","#,
    );
    let _ = write!(
        e,
        r#""$screen_height":{sh},"$screen_width":{sw},"$viewport_height":{vh},"$viewport_width":{vw},"#,
        sh = 700 + rng.below(800),
        sw = 1200 + rng.below(1400),
        vh = 600 + rng.below(700),
        vw = 1100 + rng.below(1300),
    );
    let _ = write!(
        e,
        r#""$lib":"web","$lib_version":"1.{minor}.{patch}","$insert_id":"{ins:x}","$time":{t}.{frac:03},"#,
        minor = 100 + rng.below(99),
        patch = rng.below(10),
        ins = rng.next(),
        t = 1_736_000_000 + rng.below(2_000_000),
        frac = rng.below(1000),
    );
    let _ = write!(e, r#""$session_id":"{session}","#,);
    let _ = write!(e, r#""$raw_user_agent":"{USER_AGENT}","#,);
    let _ = write!(
        e,
        r#""$is_identified":{ident},"$timezone":"Europe/Berlin","$timezone_offset":-60,"#,
        ident = rng.below(2) == 0,
    );
    let _ = write!(
        e,
        r#""$active_feature_flags":["new-onboarding","insights-v2"],"$feature/new-onboarding":true,"#,
    );
    let _ = write!(
        e,
        r#""utm_source":{utm},"utm_medium":null,"$geoip_country_code":"DE","$geoip_latitude":52.52{lat},"$geoip_longitude":13.40{lon},"#,
        utm = if rng.below(3) == 0 {
            r#""newsletter""#
        } else {
            "null"
        },
        lat = rng.below(100),
        lon = rng.below(100),
    );
    let _ = write!(e, r#""token":"phc_{token:x}"}},"#, token = rng.next());
    let _ = write!(
        e,
        r#""person_properties":{{"email":"user{i}@example.com","name":"User {i}","plan":"{plan}","$initial_browser":"{browser}","seats":{seats}}},"#,
        plan = rng.pick(&["free", "pro", "enterprise"]),
        browser = rng.pick(BROWSERS),
        seats = 1 + rng.below(50),
    );
    let _ = write!(
        e,
        r#""elements_chain":"button.btn.btn-primary:attr__class=\"btn btn-primary\"attr__data-attr=\"signup-{n}\"nth-child=\"2\"nth-of-type=\"1\"text=\"Sign up\";body""#,
        n = rng.below(20),
    );
    if i.is_multiple_of(7) {
        e.push_str(r#","$set":{"plan":"pro"},"ip":null"#);
    }
    e.push('}');
    e
}

fn bench_convert(c: &mut Criterion) {
    let mut rng = Rng::new();
    let events: Vec<String> = (0..EVENTS).map(|i| event(&mut rng, i)).collect();
    let payloads: Vec<&[u8]> = events.iter().map(|e| e.as_bytes()).collect();
    let bytes: usize = payloads.iter().map(|p| p.len()).sum();

    // Sanity: everything converts.
    let out = convert(&payloads);
    assert_eq!((out.rows, out.skipped.len()), (EVENTS, 0));
    eprintln!(
        "convert bench: {EVENTS} events, {bytes} bytes ({} B/event avg), {} columns, {} arrow bytes",
        bytes / EVENTS,
        out.batch.as_ref().map_or(0, |b| b.num_columns()),
        out.arrow_bytes
    );

    let mut group = c.benchmark_group("convert");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("posthog_10k", |b| b.iter(|| convert(black_box(&payloads))));
    group.finish();

    // The benchmark workload's own events, when a file of them is named:
    // `python3 bench/gen_events.py --count 20000 --out F`.
    if let Some(path) = std::env::var_os("CONVERT_BENCH_EVENTS") {
        let text = std::fs::read(&path).expect("CONVERT_BENCH_EVENTS is readable");
        let events: Vec<&[u8]> = text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        let bytes: usize = events.iter().map(|p| p.len()).sum();
        let mut group = c.benchmark_group("convert");
        group.throughput(Throughput::Bytes(bytes as u64));
        group.sample_size(20);
        group.bench_function("gen_events", |b| b.iter(|| convert(black_box(&events))));
        group.finish();
    }
}

criterion_group!(benches, bench_convert);
criterion_main!(benches);
