//! OTLP/HTTP log export against a local receiver started by the test: the
//! records arrive with the configured resource attributes and the token as
//! a bearer header; a collector that never answers costs the pipeline
//! nothing.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use millpond_shared::config::{Env, EnvReader};
use millpond_shared::logging::{export_layer, LogExport, EXPORT_TIMEOUT};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;
use tracing_subscriber::layer::SubscriberExt;

/// One HTTP request: its header lines and body.
struct Received {
    headers: Vec<String>,
    body: Vec<u8>,
}

/// A receiver that answers every request 200 and hands it to the test.
fn receiver() -> (String, mpsc::Receiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/i/v1/logs", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut headers = Vec::new();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                headers.push(line.trim_end().to_owned());
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
            let _ = tx.send(Received { headers, body });
        }
    });
    (url, rx)
}

fn export(endpoint: &str) -> LogExport {
    let env = Env::from_pairs([
        ("POSTHOG_PROJECT_TOKEN", "phc_test_token".to_owned()),
        ("POSTHOG_LOGS_ENDPOINT", endpoint.to_owned()),
        ("MILLPOND_SERVICE_INSTANCE_ID", "events".to_owned()),
        ("MILLPOND_SERVICE_VERSION", "sha256:abc".to_owned()),
    ]);
    let mut r = EnvReader::new(&env);
    let x = LogExport::parse(&mut r).expect("token set");
    r.finish().unwrap();
    x
}

#[test]
fn records_arrive_with_the_resource_attributes_and_the_token() {
    let (url, rx) = receiver();
    let provider = export(&url).provider("millpond-ingest").unwrap();
    let subscriber = tracing_subscriber::registry().with(export_layer(&provider));
    tracing::subscriber::with_default(subscriber, || {
        tracing::info!(target: "millpond_ingest::run", flush_id = "f1", "flush durable");
        tracing::info!(target: "hyper::client", "not ours: stays on stdout");
    });
    provider.force_flush().unwrap();
    let got = rx.recv_timeout(Duration::from_secs(10)).expect("an export");
    assert!(
        got.headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("authorization: Bearer phc_test_token")),
        "{:?}",
        got.headers
    );
    let request = ExportLogsServiceRequest::decode(got.body.as_slice()).unwrap();
    let resource_logs = &request.resource_logs[0];
    let attrs: Vec<(String, String)> = resource_logs
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), v)
        })
        .collect();
    for (k, v) in [
        ("service.name", "millpond-ingest"),
        ("service.namespace", "millpond"),
        ("service.instance.id", "events"),
        ("service.version", "sha256:abc"),
    ] {
        assert!(
            attrs.iter().any(|(ak, av)| ak == k && av == v),
            "{k}={v} not in {attrs:?}"
        );
    }
    let bodies: Vec<String> = resource_logs
        .scope_logs
        .iter()
        .flat_map(|s| &s.log_records)
        .filter_map(|r| match r.body.as_ref().and_then(|b| b.value.as_ref()) {
            Some(Value::StringValue(s)) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(bodies, ["flush durable"], "only our crates' events");
    let _ = provider.shutdown();
}

#[test]
fn a_collector_that_never_answers_never_holds_the_pipeline() {
    // Accepts connections and never reads or answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/i/v1/logs", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for s in listener.incoming().flatten() {
            open.push(s);
        }
    });
    let provider = export(&url).provider("millpond-writer").unwrap();
    let subscriber = tracing_subscriber::registry().with(export_layer(&provider));
    let started = Instant::now();
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..20_000 {
            tracing::info!(target: "millpond_writer::flight", i, "record");
        }
    });
    let emitting = started.elapsed();
    assert!(
        emitting < EXPORT_TIMEOUT,
        "logging waited on the collector: {emitting:?}"
    );
    let stopping = Instant::now();
    let _ = provider.shutdown();
    assert!(
        stopping.elapsed() < EXPORT_TIMEOUT * 3,
        "shutdown is bounded: {:?}",
        stopping.elapsed()
    );
}
