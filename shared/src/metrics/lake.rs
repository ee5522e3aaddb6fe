use prometheus::{
    Gauge, GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use super::register;

/// Lake state read from a DuckLake catalog by `millpond-lake metrics`: the
/// `millpond_lake_*` family. `table` is `schema.table`; snapshots, files
/// scheduled for deletion, the catalog's version and settings belong to the
/// whole catalog in DuckLake, so those series have no table. Every label
/// takes values from a fixed set, or one per table; `partition` only on the
/// few partitions with the most files.
#[derive(Clone)]
pub struct LakeMetrics {
    pub snapshots: IntGauge,
    pub oldest_snapshot_age: Gauge,
    pub newest_snapshot_age: Gauge,
    pub oldest_snapshot_id: IntGauge,
    pub newest_snapshot_id: IntGauge,
    pub files_scheduled_for_deletion: IntGauge,
    pub files_scheduled_for_deletion_duplicates: IntGauge,
    pub data_files: IntGaugeVec,
    pub data_bytes: IntGaugeVec,
    pub small_files: IntGaugeVec,
    pub small_file_threshold: IntGauge,
    /// {table, band}: band is a compaction tier's size band or `large`.
    pub files_per_band: IntGaugeVec,
    pub bytes_per_band: IntGaugeVec,
    /// {table, partition}: the partitions with the most live files.
    pub partition_files: IntGaugeVec,
    pub delete_files: IntGaugeVec,
    pub delete_bytes: IntGaugeVec,
    /// {state}: live, dropped.
    pub tables: IntGaugeVec,
    pub inlined_data_tables: IntGauge,
    pub unreachable_inlined_data_tables: IntGauge,
    /// {suffix}: the catalog's format version, e.g. 1.0.
    pub catalog_format_version: GaugeVec,
    /// {key, scope, scope_id}: DuckLake settings with a number, boolean or
    /// interval (seconds) as value.
    pub config_value: GaugeVec,
    pub rows: IntGaugeVec,
    pub inlined_rows: IntGaugeVec,
    pub recorded_offset: IntGaugeVec,
    pub recorded_offset_age: GaugeVec,
    pub dead_letters: IntGaugeVec,
    pub up: IntGauge,
    pub collect_duration: Gauge,
    pub last_success: Gauge,
    pub collect_errors: IntCounter,
    /// Failed reads since the last one that succeeded (/healthz fails at
    /// DUCKLAKE_METRICS_MAX_FAILED_READS).
    pub consecutive_collect_errors: IntGauge,
    /// {query}: failed runs of a DUCKLAKE_METRICS_CONFIG query.
    pub query_errors: IntCounterVec,
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

fn per_f64(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    register(
        registry,
        GaugeVec::new(Opts::new(name, help), labels).unwrap(),
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
            oldest_snapshot_id: int_gauge(
                registry,
                "lake_oldest_snapshot_id",
                "Id of the oldest snapshot kept",
            ),
            newest_snapshot_id: int_gauge(
                registry,
                "lake_newest_snapshot_id",
                "Id of the newest snapshot (its rate of change is the commit rate)",
            ),
            files_scheduled_for_deletion: int_gauge(
                registry,
                "lake_files_scheduled_for_deletion",
                "Files no snapshot needs any more, waiting for cleanup",
            ),
            files_scheduled_for_deletion_duplicates: int_gauge(
                registry,
                "lake_files_scheduled_for_deletion_duplicates",
                "Rows of the deletion queue that repeat a path already in it",
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
            files_per_band: per(
                registry,
                "lake_files_per_band",
                "Live data files by size band (tier1 <1MiB, tier2 <10MiB, tier3 <64MiB: compaction's tiers; large)",
                &["table", "band"],
            ),
            bytes_per_band: per(
                registry,
                "lake_bytes_per_band",
                "Bytes of the live data files by size band",
                &["table", "band"],
            ),
            partition_files: per(
                registry,
                "lake_partition_files",
                "Live data files of the partitions with the most (values joined by /; <none> unpartitioned)",
                &["table", "partition"],
            ),
            delete_files: per(registry, "lake_delete_files", "Live delete files", T),
            delete_bytes: per(
                registry,
                "lake_delete_bytes",
                "Bytes of the live delete files",
                T,
            ),
            tables: per(
                registry,
                "lake_tables",
                "Tables of the catalog: live, or dropped and still kept for older snapshots",
                &["state"],
            ),
            inlined_data_tables: int_gauge(
                registry,
                "lake_inlined_data_tables",
                "Catalog tables holding inlined rows (one per table and schema version)",
            ),
            unreachable_inlined_data_tables: int_gauge(
                registry,
                "lake_unreachable_inlined_data_tables",
                "Inlined-row tables whose table no kept snapshot can see",
            ),
            catalog_format_version: per_f64(
                registry,
                "lake_catalog_format_version",
                "DuckLake format version of the catalog (major.minor; a tag such as -dev1 in suffix)",
                &["suffix"],
            ),
            config_value: per_f64(
                registry,
                "lake_config_value",
                "DuckLake settings of the catalog (true 1, false 0, intervals in seconds); scope is empty, schema or table",
                &["key", "scope", "scope_id"],
            ),
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
            recorded_offset_age: per_f64(
                registry,
                "lake_recorded_offset_age_seconds",
                "Time since the lake last recorded offsets for a partition",
                P,
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
            consecutive_collect_errors: int_gauge(
                registry,
                "lake_consecutive_collect_errors",
                "Failed reads of the catalog since the last successful one",
            ),
            query_errors: register(
                registry,
                IntCounterVec::new(
                    Opts::new(
                        "lake_query_errors_total",
                        "Failed runs of a query of DUCKLAKE_METRICS_CONFIG (its gauge is left out until it runs again)",
                    ),
                    &["query"],
                )
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
            &self.files_per_band,
            &self.bytes_per_band,
            &self.partition_files,
            &self.delete_files,
            &self.delete_bytes,
            &self.tables,
            &self.rows,
            &self.inlined_rows,
            &self.recorded_offset,
            &self.dead_letters,
        ] {
            v.reset();
        }
        for v in [
            &self.recorded_offset_age,
            &self.catalog_format_version,
            &self.config_value,
        ] {
            v.reset();
        }
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
        m.partition_files
            .with_label_values(&["main.events", "2026/3"])
            .set(4);
        m.catalog_format_version.with_label_values(&[""]).set(1.0);
        m.config_value
            .with_label_values(&["auto_compact", "", ""])
            .set(0.0);
        m.reset_labelled();
        for name in [
            "lake_data_files",
            "lake_partition_files",
            "lake_catalog_format_version",
            "lake_config_value",
        ] {
            assert_eq!(sample(&reg, name, &[]), None, "{name} kept");
        }
        assert_eq!(sample(&reg, "lake_snapshots", &[]), Some(7.0));
    }
}
