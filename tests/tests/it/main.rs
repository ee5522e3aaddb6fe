//! The Rust integration tests, one test binary: each module was a binary of
//! its own; together they link arrow, tonic, rdkafka and DuckDB once.
//! Run one module with `cargo test --release -p millpond-tests --test it -- <module>::`.
mod allowlist_rules;
mod allowlist_source;
mod bench_workload;
mod catalog_tls;
mod compose_env;
mod compose_ssl;
mod dashboard_metrics;
mod deadline_rule;
mod helm_chart;
mod hoglake_emulator;
mod hoglake_pipeline;
mod ingest_sigterm;
mod kafka_tls;
mod lake_cli;
mod lake_metrics;
mod live_reader;
mod msk_iam_token;
mod nisshi_e2e;
mod pipeline_e2e;
mod private_outputs;
mod reference_docs;
mod replay_tool;
mod retention;
mod rollouts;
mod writer_bounds;
mod writer_extensions;
mod writer_faults;
mod writer_flight;
mod writer_hoglake;
mod writer_hoglake_deadline;
mod writer_hoglake_startup;
mod writer_many_pods;
mod writer_partition_by;
mod writer_pyarrow;
mod writer_variant;
