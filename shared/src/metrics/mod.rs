//! The Prometheus registry and every metric Millpond exports.
//!
//! All series are named `millpond_*` and carry the constant labels
//! `pipeline` and `broker_source`. The registry is passed around, never
//! global, so tests read values back from the registry they built.
mod include;
mod ingest;
mod lake;
mod lake_run;
pub mod matched;
pub mod merge;
pub mod reference;
mod writer;

pub use include::IncludeMetrics;
pub use ingest::IngestMetrics;
pub use lake::LakeMetrics;
pub use lake_run::LakeRunMetrics;
pub use matched::MatchedValues;
pub use writer::WriterMetrics;

use std::collections::HashMap;

use prometheus::proto::MetricType;
use prometheus::{Encoder, Registry, TextEncoder};

pub const PREFIX: &str = "millpond";

/// Labels of `millpond_errors_total{type}`.
pub mod error_type {
    pub const KAFKA: &str = "kafka";
    pub const WRITE_RETRY: &str = "write_retry";
    pub const DUCKLAKE_COMMIT_CONTENTION: &str = "ducklake_commit_contention";
    /// A hoglake commit refused with a 409 asking for a re-prepare
    /// (`commit_conflict`, `ddl_since_read_snapshot`, `table_recreated`,
    /// `table_dropped`), once per 409.
    pub const HOGLAKE_COMMIT_CONTENTION: &str = "hoglake_commit_contention";
    /// A VARIANT dual-write INSERT overflowed while shredding; the flush
    /// was written again without its companions.
    pub const VARIANT_WRITE: &str = "variant_write";
    pub const OFFSET_COMMIT: &str = "offset_commit";
    pub const SCHEMA: &str = "schema";
    /// Ingest: a send to the writer failed (connect, stream, ack).
    pub const FLIGHT: &str = "flight";
    /// Writer: a DoPut it could not read (a malformed or cut-off stream).
    /// Apart from ingest's `flight`, so the pod's one scrape never carries
    /// the same series twice.
    pub const FLIGHT_REQUEST: &str = "flight_request";
    /// A pinned column (MILLPOND_TYPED_COLUMNS) with a value that did not
    /// convert, once per column per batch.
    pub const COLUMN_COERCION: &str = "column_coercion";
    /// Allowlist values that cannot match their (uuid) column.
    pub const FILTER_VALUE_INVALID: &str = "filter_value_invalid";
    /// A flush refused because another writer holds a partition's lease.
    pub const PARTITION_LEASED: &str = "partition_leased";
    /// A flush refused because it reaches into offsets the lake already
    /// recorded under another cut (another owner wrote them at a
    /// handover); ingest sends what is not recorded yet.
    pub const OFFSETS_OVERLAP: &str = "offsets_overlap";
    /// A DoPut refused because it carried more than
    /// MILLPOND_WRITER_MAX_FLUSH_BYTES (RESOURCE_EXHAUSTED, permanent).
    pub const FLUSH_TOO_LARGE: &str = "flush_too_large";
    /// A DoPut refused because the writer's uploads already held
    /// MILLPOND_WRITER_MAX_IN_FLIGHT_BYTES (RESOURCE_EXHAUSTED, retryable).
    pub const IN_FLIGHT_BYTES: &str = "in_flight_bytes";
    /// A DoPut cut because no message came for
    /// MILLPOND_WRITER_UPLOAD_IDLE_TIMEOUT_S (RESOURCE_EXHAUSTED, retryable).
    pub const UPLOAD_IDLE: &str = "upload_idle";
}

/// Labels of `millpond_flushes_sent_whole_total{reason}`: why ingest held a
/// flush and sent it whole instead of streaming it.
pub mod whole_reason {
    /// MILLPOND_SORT_BY: the sort needs the whole flush.
    pub const SORT: &str = "sort";
    /// The writer could not be reached as the flush began.
    pub const WRITER_UNREACHABLE: &str = "writer_unreachable";
    /// The flush's stream broke; it was read again from Kafka.
    pub const REREAD: &str = "reread";
    pub const ALL: [&str; 3] = [SORT, WRITER_UNREACHABLE, REREAD];
}

/// Labels of `millpond_records_skipped_total{reason}`.
pub mod skip_reason {
    pub const JSON_PARSE: &str = "json_parse";
    pub const UNSAFE_FIELD_NAME: &str = "unsafe_field_name";
    /// Ingest: rows and dead letters of a flush that another owner of the
    /// partition had already recorded in the lake (a handover); they are
    /// in the lake once, written by the other owner.
    pub const ALREADY_RECORDED: &str = "already_recorded";
    /// Writer: records whose every key collided with a VARIANT companion;
    /// they are dead letters whole (`dead_letters_total` counts them too).
    pub const VARIANT_COMPANION_COLLISION: &str = "variant_companion_collision";
}

/// Dead-letter reasons decided in Rust code (ingest also emits the
/// converter's invalid_json / invalid_utf8 / not_an_object). All but
/// OVERSIZED_RECORD are value level: the row is written with this one value
/// NULL, and the value is kept in the dead-letter table
/// (`millpond_dead_letter_values_total{reason}`).
pub mod dead_letter_reason {
    /// The value does not convert exactly to the column's live type.
    pub const TYPE_MISMATCH: &str = "type_mismatch";
    /// The key is in a namespace the pipeline reserves (`_millpond_*`,
    /// `_inserted_at`, the partition helper names).
    pub const RESERVED_FIELD_NAME: &str = "reserved_field_name";
    /// The key is not a safe identifier.
    pub const UNSAFE_FIELD_NAME: &str = "unsafe_field_name";
    /// The key differs only by letter case from a key that took the column,
    /// and its value could not share that column (writer); or the key is
    /// repeated in one JSON object and this is an earlier value: the row
    /// holds the last one (ingest).
    pub const DUPLICATE_FIELD_NAME: &str = "duplicate_field_name";
    /// The key would take the flush or the table past MILLPOND_MAX_COLUMNS.
    pub const TOO_MANY_COLUMNS: &str = "too_many_columns";
    /// MILLPOND_TYPED_COLUMNS could not convert the value to the pinned type.
    pub const COLUMN_COERCION: &str = "column_coercion";
    /// Record level: the message is larger than MILLPOND_MAX_RECORD_BYTES.
    pub const OVERSIZED_RECORD: &str = "oversized_record";
    /// Record level: the message has more keys than MILLPOND_MAX_COLUMNS
    /// and the dead letters its values could become would cost more than
    /// MILLPOND_MAX_RECORD_BYTES; it is kept whole, as sent, instead.
    pub const TOO_MANY_KEYS: &str = "too_many_keys";
    /// The catalog refused to add the key's column, or the live column has
    /// a type the writer does not write (hoglake `variant`).
    pub const COLUMN_REFUSED: &str = "column_refused";
    /// The key is a VARIANT companion (`{source}_variant` of a configured
    /// source, or a column the table holds as VARIANT): payload text must
    /// not be cast into it.
    pub const VARIANT_COMPANION_COLLISION: &str = "variant_companion_collision";
    /// Record level, from ingest's converter: the message is not one JSON
    /// object.
    pub const INVALID_JSON: &str = "invalid_json";
    pub const INVALID_UTF8: &str = "invalid_utf8";
    pub const NOT_AN_OBJECT: &str = "not_an_object";
    /// The label of any reason not listed here: any Flight client may send
    /// dead letters, and each reason would be a metric series of its own.
    pub const OTHER: &str = "other";

    /// Every reason Millpond gives.
    pub const KNOWN: [&str; 13] = [
        TYPE_MISMATCH,
        RESERVED_FIELD_NAME,
        UNSAFE_FIELD_NAME,
        DUPLICATE_FIELD_NAME,
        TOO_MANY_COLUMNS,
        COLUMN_COERCION,
        OVERSIZED_RECORD,
        TOO_MANY_KEYS,
        COLUMN_REFUSED,
        VARIANT_COMPANION_COLLISION,
        INVALID_JSON,
        INVALID_UTF8,
        NOT_AN_OBJECT,
    ];

    /// The `reason` label of a dead letter: its reason when Millpond gives
    /// it, else [`OTHER`] (the dead-letter table keeps the text).
    pub fn label(reason: &str) -> &'static str {
        KNOWN.into_iter().find(|k| *k == reason).unwrap_or(OTHER)
    }
}

pub fn new_registry(pipeline: &str, broker_source: &str) -> Registry {
    let labels = HashMap::from([
        ("pipeline".to_owned(), pipeline.to_owned()),
        ("broker_source".to_owned(), broker_source.to_owned()),
    ]);
    Registry::new_custom(Some(PREFIX.to_owned()), Some(labels)).expect("valid registry labels")
}

/// Text exposition of everything in the registry.
pub fn render(registry: &Registry) -> String {
    let mut buf = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut buf)
        .expect("text encoding never fails");
    String::from_utf8(buf).expect("exposition is utf-8")
}

pub(crate) fn register<T: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: T,
) -> T {
    reference::note(&metric);
    registry
        .register(Box::new(metric.clone()))
        .expect("metric registered once");
    metric
}

/// The counters of conservation each process keeps (without the prefix):
/// ingest's consumed records equal the writer's rows and dead letters plus
/// ingest's tombstones and skipped records.
pub mod conservation {
    pub const INGEST: [&str; 3] = [
        "records_consumed_total",
        "tombstones_total",
        "records_skipped_total",
    ];
    pub const WRITER: [&str; 2] = ["records_written_total", "dead_letters_total"];
}

/// The counters `names` (without the prefix) as one log field with no
/// spaces, series by series:
/// `records_consumed_total{partition=0}=500,records_skipped_total{reason=x}=3`.
/// A process logs it as it stops, so what it did can be read after it is
/// gone.
pub fn totals(registry: &Registry, names: &[&str]) -> String {
    let mut out = Vec::new();
    for family in registry.gather() {
        let Some(name) = family
            .name()
            .strip_prefix(PREFIX)
            .and_then(|n| n.strip_prefix('_'))
        else {
            continue;
        };
        if !names.contains(&name) || family.get_field_type() != MetricType::COUNTER {
            continue;
        }
        for m in family.get_metric() {
            let labels: Vec<String> = m
                .get_label()
                .iter()
                .filter(|l| !matches!(l.name(), "pipeline" | "broker_source"))
                .map(|l| format!("{}={}", l.name(), l.value()))
                .collect();
            let labels = if labels.is_empty() {
                String::new()
            } else {
                format!("{{{}}}", labels.join(";"))
            };
            out.push(format!("{name}{labels}={}", m.get_counter().get_value()));
        }
    }
    out.join(",")
}

/// Reads a sample back from a registry: tests assert metrics moved.
pub fn sample(registry: &Registry, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let full = format!("{PREFIX}_{name}");
    for family in registry.gather() {
        if family.name() != full {
            continue;
        }
        for m in family.get_metric() {
            let matches = labels.iter().all(|(k, v)| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == *k && l.value() == *v)
            });
            if !matches {
                continue;
            }
            return Some(match family.get_field_type() {
                MetricType::COUNTER => m.get_counter().get_value(),
                MetricType::GAUGE => m.get_gauge().get_value(),
                MetricType::HISTOGRAM => m.get_histogram().get_sample_count() as f64,
                _ => continue,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_labels_on_every_series() {
        let reg = new_registry("events", "msk");
        let m = WriterMetrics::new(&reg);
        m.records_written.inc_by(3);
        let text = render(&reg);
        let line = text
            .lines()
            .find(|l| l.starts_with("millpond_records_written_total{"))
            .expect("series rendered");
        assert!(
            line.contains(r#"pipeline="events""#) && line.contains(r#"broker_source="msk""#),
            "{line}"
        );
        assert!(line.ends_with(" 3"), "{line}");
        assert_eq!(sample(&reg, "records_written_total", &[]), Some(3.0));
    }

    #[test]
    fn totals_name_each_series_of_the_counters_asked_for() {
        let reg = new_registry("events", "msk");
        let m = IngestMetrics::new(&reg);
        m.records_consumed.with_label_values(&["0"]).inc_by(7);
        m.records_skipped
            .with_label_values(&[skip_reason::ALREADY_RECORDED])
            .inc_by(2);
        let t = totals(&reg, &conservation::INGEST);
        assert!(t.contains("records_consumed_total{partition=0}=7"), "{t}");
        assert!(
            t.contains("records_skipped_total{reason=already_recorded}=2"),
            "{t}"
        );
        assert!(!t.contains("pipeline"), "{t}");
        assert!(!totals(&reg, &conservation::WRITER).contains("consumed"));
    }
}
