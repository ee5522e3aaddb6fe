use prometheus::{Gauge, GaugeVec, IntCounter, IntGauge, IntGaugeVec, Opts, Registry};

use super::register;

/// Lake state read from a DuckLake catalog by `millpond-lake metrics`: the
/// `millpond_lake_*` family. `table` is `schema.table`; snapshots and files
/// scheduled for deletion belong to the whole catalog in DuckLake, so those
/// series have no table.
#[derive(Clone)]
pub struct LakeMetrics {
    pub snapshots: IntGauge,
    pub oldest_snapshot_age: Gauge,
    pub newest_snapshot_age: Gauge,
    pub files_scheduled_for_deletion: IntGauge,
    pub data_files: IntGaugeVec,
    pub data_bytes: IntGaugeVec,
    pub small_files: IntGaugeVec,
    pub small_file_threshold: IntGauge,
    pub delete_files: IntGaugeVec,
    pub rows: IntGaugeVec,
    pub inlined_rows: IntGaugeVec,
    pub recorded_offset: IntGaugeVec,
    pub recorded_offset_age: GaugeVec,
    pub dead_letters: IntGaugeVec,
    pub up: IntGauge,
    pub collect_duration: Gauge,
    pub last_success: Gauge,
    pub collect_errors: IntCounter,
}

fn gauge(registry: &Registry, name: &str, help: &str) -> Gauge {
    register(registry, Gauge::new(name, help).unwrap())
}

fn int_gauge(registry: &Registry, name: &str, help: &str) -> IntGauge {
    register(registry, IntGauge::new(name, help).unwrap())
}

fn per(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    register(
        registry,
        IntGaugeVec::new(Opts::new(name, help), labels).unwrap(),
    )
}

impl LakeMetrics {
    pub fn new(registry: &Registry) -> Self {
        const T: &[&str] = &["table"];
        const P: &[&str] = &["table", "topic", "partition"];
        LakeMetrics {
            snapshots: int_gauge(registry, "lake_snapshots", "Snapshots the catalog keeps"),
            oldest_snapshot_age: gauge(
                registry,
                "lake_oldest_snapshot_age_seconds",
                "Age of the oldest snapshot kept (what expiry has not removed yet)",
            ),
            newest_snapshot_age: gauge(
                registry,
                "lake_newest_snapshot_age_seconds",
                "Age of the newest snapshot (time since the last commit)",
            ),
            files_scheduled_for_deletion: int_gauge(
                registry,
                "lake_files_scheduled_for_deletion",
                "Files no snapshot needs any more, waiting for cleanup",
            ),
            data_files: per(registry, "lake_data_files", "Live data files", T),
            data_bytes: per(
                registry,
                "lake_data_bytes",
                "Bytes of the live data files",
                T,
            ),
            small_files: per(
                registry,
                "lake_small_files",
                "Live data files under lake_small_file_threshold_bytes (compaction debt)",
                T,
            ),
            small_file_threshold: int_gauge(
                registry,
                "lake_small_file_threshold_bytes",
                "Size under which a data file counts on lake_small_files",
            ),
            delete_files: per(registry, "lake_delete_files", "Live delete files", T),
            rows: per(
                registry,
                "lake_rows",
                "Rows of the current snapshot (data files minus deletions, plus inlined rows)",
                T,
            ),
            inlined_rows: per(
                registry,
                "lake_inlined_rows",
                "Rows kept in the catalog (data inlining), not yet in Parquet",
                T,
            ),
            recorded_offset: per(
                registry,
                "lake_recorded_offset",
                "Highest Kafka offset the lake recorded for a partition (_millpond_offsets)",
                P,
            ),
            recorded_offset_age: register(
                registry,
                GaugeVec::new(
                    Opts::new(
                        "lake_recorded_offset_age_seconds",
                        "Time since the lake last recorded offsets for a partition",
                    ),
                    P,
                )
                .unwrap(),
            ),
            dead_letters: per(
                registry,
                "lake_dead_letters",
                "Rows of the table's dead-letter table, by reason",
                &["table", "reason"],
            ),
            up: int_gauge(
                registry,
                "lake_up",
                "1 when the last read of the catalog succeeded",
            ),
            collect_duration: gauge(
                registry,
                "lake_collect_duration_seconds",
                "Time the last read of the catalog took",
            ),
            last_success: gauge(
                registry,
                "lake_last_success_timestamp_seconds",
                "Unix time of the last successful read of the catalog",
            ),
            collect_errors: register(
                registry,
                IntCounter::new("lake_collect_errors_total", "Failed reads of the catalog")
                    .unwrap(),
            ),
        }
    }

    /// Forgets every labelled series, so tables and partitions that are gone
    /// disappear with the next read.
    pub fn reset_labelled(&self) {
        for v in [
            &self.data_files,
            &self.data_bytes,
            &self.small_files,
            &self.delete_files,
            &self.rows,
            &self.inlined_rows,
            &self.recorded_offset,
            &self.dead_letters,
        ] {
            v.reset();
        }
        self.recorded_offset_age.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{new_registry, render, sample};

    #[test]
    fn lake_series_carry_the_base_labels_and_reset() {
        let reg = new_registry("events", "msk");
        let m = LakeMetrics::new(&reg);
        m.data_files.with_label_values(&["main.events"]).set(3);
        m.snapshots.set(7);
        let text = render(&reg);
        let line = text
            .lines()
            .find(|l| l.starts_with("millpond_lake_data_files{"))
            .expect("series rendered");
        assert!(
            line.contains(r#"pipeline="events""#)
                && line.contains(r#"broker_source="msk""#)
                && line.contains(r#"table="main.events""#)
                && line.ends_with(" 3"),
            "{line}"
        );
        assert_eq!(sample(&reg, "lake_snapshots", &[]), Some(7.0));
        m.reset_labelled();
        assert_eq!(sample(&reg, "lake_data_files", &[]), None);
        assert_eq!(sample(&reg, "lake_snapshots", &[]), Some(7.0));
    }
}
