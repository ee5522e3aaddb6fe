use prometheus::{Gauge, IntGauge, IntGaugeVec, Opts, Registry};

use super::register;

/// What one `millpond-lake` run did (`millpond_lake_run_*`), pushed at its
/// end when MILLPOND_LAKE_REPORT_PUSH_URL is set. `command` is the
/// subcommand (`run` for a chain of recipes).
#[derive(Clone)]
pub struct LakeRunMetrics {
    pub duration: Gauge,
    /// 1 when the run did what it was asked, 0 when it failed or found a
    /// problem it could not fix.
    pub success: IntGauge,
    pub finished: Gauge,
    /// {what}: snapshots expired, files deleted, files compacted away, ...
    pub done: IntGaugeVec,
    /// {step}: 1 for the step a failed run stopped at.
    pub failed_step: IntGaugeVec,
}

impl LakeRunMetrics {
    pub fn new(registry: &Registry, command: &str) -> Self {
        let opts = |name: &str, help: &str| Opts::new(name, help).const_label("command", command);
        LakeRunMetrics {
            duration: register(
                registry,
                Gauge::with_opts(opts("lake_run_duration_seconds", "How long the run took")).unwrap(),
            ),
            success: register(
                registry,
                IntGauge::with_opts(opts(
                    "lake_run_success",
                    "1 when the run did what it was asked, 0 when it failed or found a problem it could not fix",
                ))
                .unwrap(),
            ),
            finished: register(
                registry,
                Gauge::with_opts(opts(
                    "lake_run_finished_timestamp_seconds",
                    "When the run ended (Unix time)",
                ))
                .unwrap(),
            ),
            done: register(
                registry,
                IntGaugeVec::new(
                    opts(
                        "lake_run_done",
                        "What the run changed, by kind: snapshots_expired, files_scheduled_for_deletion, files_deleted, files_compacted_away, inlined_rows_flushed, orphans_registered, orphans_moved_aside, deletions_fixed, stats_rows_purged, partition_values_repaired, partitions_dropped, rows_dropped",
                    ),
                    &["what"],
                )
                .unwrap(),
            ),
            failed_step: register(
                registry,
                IntGaugeVec::new(
                    opts(
                        "lake_run_failed_step",
                        "1 for the step (a chain's recipe, or the command) a failed run stopped at",
                    ),
                    &["step"],
                )
                .unwrap(),
            ),
        }
    }
}
