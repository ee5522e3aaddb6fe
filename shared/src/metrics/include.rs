use prometheus::{Gauge, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use super::register;

/// Series of the dynamic allowlist source (`millpond_include_values_*`),
/// registered only when MILLPOND_INCLUDE_VALUES_URL is set.
#[derive(Clone)]
pub struct IncludeMetrics {
    pub size: IntGauge,
    pub last_success: Gauge,
    pub pending_removals: IntGauge,
    pub mode: IntGaugeVec,
    pub shadow_only_static: IntGauge,
    pub shadow_only_remote: IntGauge,
    pub pinned: IntGauge,
    pub pinned_only: IntGauge,
    pub poll_failures: IntCounter,
    pub refused: IntCounterVec,
    pub changes: IntCounterVec,
}

impl IncludeMetrics {
    pub fn new(registry: &Registry) -> Self {
        let gauge = |name: &str, help: &str| register(registry, IntGauge::new(name, help).unwrap());
        let vec = |name: &str, help: &str, label: &str| {
            register(
                registry,
                IntCounterVec::new(Opts::new(name, help), &[label]).unwrap(),
            )
        };
        IncludeMetrics {
            size: gauge(
                "include_values_size",
                "Values the polled set holds (pins included)",
            ),
            last_success: register(
                registry,
                Gauge::new(
                    "include_values_last_success_timestamp_seconds",
                    "When the endpoint last answered a poll successfully",
                )
                .unwrap(),
            ),
            pending_removals: gauge(
                "include_values_pending_removals",
                "Values absent from the endpoint, counting down to removal",
            ),
            mode: register(
                registry,
                IntGaugeVec::new(
                    Opts::new("include_values_mode", "1 for the mode this replica runs"),
                    &["mode"],
                )
                .unwrap(),
            ),
            shadow_only_static: gauge(
                "include_values_shadow_only_static",
                "Shadow mode: static values the endpoint does not serve",
            ),
            shadow_only_remote: gauge(
                "include_values_shadow_only_remote",
                "Shadow mode: served values the static list lacks",
            ),
            pinned: gauge("include_values_pinned", "Static values (permanent pins)"),
            pinned_only: gauge(
                "include_values_pinned_only",
                "Pins the endpoint has never served",
            ),
            poll_failures: register(
                registry,
                IntCounter::new("include_values_poll_failures_total", "Polls that failed").unwrap(),
            ),
            refused: vec(
                "include_values_refused_total",
                "Polls refused by the safety rules, by reason",
                "reason",
            ),
            changes: vec(
                "include_values_changes_total",
                "Values added to or removed from the polled set",
                "action",
            ),
        }
    }
}
