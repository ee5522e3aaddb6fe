//! Reads the lake's state from its catalog (never from the data files, so a
//! read costs a few catalog queries whatever the lake's size) and sets the
//! `millpond_lake_*` gauges from it.
use std::collections::HashMap;
use std::time::Instant;

use millpond_shared::metrics::{dead_letter_reason, LakeMetrics};

use super::super::catalog::{as_f64, as_i64, as_string, meta, Lake, TableRef};
use super::super::config::ToolConfig;
use super::catalog_state::{self, CatalogState};
use super::query_gauges::QueryGauges;
use super::shape::{self, Shape};
use millpond_writer::lake_api::ident;
use millpond_writer::lake_api::OFFSETS_TABLE;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableState {
    pub table: String,
    pub data_files: i64,
    pub data_bytes: i64,
    pub small_files: i64,
    pub delete_files: i64,
    pub delete_bytes: i64,
    pub rows: i64,
    pub inlined_rows: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OffsetState {
    pub table: String,
    pub topic: String,
    pub partition: i64,
    pub last_offset: i64,
    pub age_seconds: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LakeState {
    pub snapshots: i64,
    pub oldest_snapshot_age: f64,
    pub newest_snapshot_age: f64,
    pub oldest_snapshot_id: i64,
    pub newest_snapshot_id: i64,
    pub files_scheduled_for_deletion: i64,
    /// Rows of the deletion queue repeating a path already in it.
    pub scheduled_duplicates: i64,
    pub tables: Vec<TableState>,
    pub shape: Shape,
    pub catalog: CatalogState,
    pub offsets: Vec<OffsetState>,
    /// (table, reason, rows)
    pub dead_letters: Vec<(String, String, i64)>,
}

/// Per table id: (files, bytes, small files, rows in files).
fn data_files(lake: &Lake, small: u64) -> anyhow::Result<HashMap<i64, [i64; 4]>> {
    Ok(lake
        .rows(&format!(
            "SELECT table_id::BIGINT, count(*)::BIGINT, coalesce(sum(file_size_bytes), 0)::BIGINT, \
             count(*) FILTER (WHERE file_size_bytes < {small})::BIGINT, coalesce(sum(record_count), 0)::BIGINT \
             FROM {} WHERE end_snapshot IS NULL GROUP BY 1",
            meta("ducklake_data_file")
        ))?
        .iter()
        .map(|r| (as_i64(&r[0]), [1, 2, 3, 4].map(|i| as_i64(&r[i]))))
        .collect())
}

/// Per table id: (delete files, rows they delete, their bytes).
fn delete_files(lake: &Lake) -> anyhow::Result<HashMap<i64, [i64; 3]>> {
    Ok(lake
        .rows(&format!(
            "SELECT table_id::BIGINT, count(*)::BIGINT, coalesce(sum(delete_count), 0)::BIGINT, \
             coalesce(sum(file_size_bytes), 0)::BIGINT \
             FROM {} WHERE end_snapshot IS NULL GROUP BY 1",
            meta("ducklake_delete_file")
        ))?
        .iter()
        .map(|r| (as_i64(&r[0]), [1, 2, 3].map(|i| as_i64(&r[i]))))
        .collect())
}

/// Live inlined rows per table id: each table (and schema version) keeps
/// them in a catalog table of its own.
fn inlined_rows(lake: &Lake, tables: &[TableRef]) -> anyhow::Result<HashMap<i64, i64>> {
    let mut out = HashMap::new();
    for r in lake.rows(&format!(
        "SELECT table_id::BIGINT, table_name FROM {}",
        meta("ducklake_inlined_data_tables")
    ))? {
        let id = as_i64(&r[0]);
        if !tables.iter().any(|t| t.id == id) {
            continue;
        }
        let n = lake.int(&format!(
            "SELECT count(*) FROM {} WHERE end_snapshot IS NULL",
            meta(&as_string(&r[1]))
        ))?;
        *out.entry(id).or_insert(0) += n;
    }
    Ok(out)
}

fn offsets(lake: &Lake, tables: &[TableRef]) -> anyhow::Result<Vec<OffsetState>> {
    let mut out = Vec::new();
    for t in tables.iter().filter(|t| t.name == OFFSETS_TABLE) {
        for r in lake.rows(&format!(
            "SELECT target_table, topic, kafka_partition::BIGINT, max(last_offset)::BIGINT, \
             epoch(now()) - epoch(max(recorded_at)) FROM {} GROUP BY ALL ORDER BY ALL",
            t.sql()
        ))? {
            out.push(OffsetState {
                table: format!("{}.{}", t.schema, as_string(&r[0])),
                topic: as_string(&r[1]),
                partition: as_i64(&r[2]),
                last_offset: as_i64(&r[3]),
                age_seconds: as_f64(&r[4]),
            });
        }
    }
    Ok(out)
}

/// Dead-letter tables: `<table>_dead_letters` beside a live `<table>`, and
/// DUCKLAKE_DEAD_LETTER_TABLE for DUCKLAKE_TABLE.
fn dead_letter_tables<'a>(cfg: &ToolConfig, tables: &'a [TableRef]) -> Vec<(String, &'a TableRef)> {
    tables
        .iter()
        .filter_map(|dl| {
            let owner = tables.iter().find(|t| {
                t.schema == dl.schema
                    && (dl.name == format!("{}_dead_letters", t.name)
                        || (cfg.schema == t.schema
                            && cfg.table.as_deref() == Some(t.name.as_str())
                            && cfg.dead_letter_table.as_deref() == Some(dl.name.as_str())))
            })?;
            Some((owner.qualified(), dl))
        })
        .collect()
}

pub fn collect(lake: &Lake, cfg: &ToolConfig) -> anyhow::Result<LakeState> {
    let tables = lake.tables()?;
    let small = cfg.metrics.small_file_bytes;
    let files = data_files(lake, small)?;
    let deletes = delete_files(lake)?;
    let inlined = inlined_rows(lake, &tables)?;
    let snaps = lake.rows(&format!(
        "SELECT count(*)::BIGINT, epoch(now()) - epoch(min(snapshot_time::TIMESTAMPTZ)), \
         epoch(now()) - epoch(max(snapshot_time::TIMESTAMPTZ)), \
         min(snapshot_id)::BIGINT, max(snapshot_id)::BIGINT FROM {}",
        meta("ducklake_snapshot")
    ))?;
    let scheduled = lake.rows(&format!(
        "SELECT count(*)::BIGINT, (count(*) - count(DISTINCT path))::BIGINT FROM {}",
        meta("ducklake_files_scheduled_for_deletion")
    ))?;
    let mut state = LakeState {
        snapshots: as_i64(&snaps[0][0]),
        oldest_snapshot_age: as_f64(&snaps[0][1]),
        newest_snapshot_age: as_f64(&snaps[0][2]),
        oldest_snapshot_id: as_i64(&snaps[0][3]),
        newest_snapshot_id: as_i64(&snaps[0][4]),
        files_scheduled_for_deletion: as_i64(&scheduled[0][0]),
        scheduled_duplicates: as_i64(&scheduled[0][1]),
        offsets: offsets(lake, &tables)?,
        shape: shape::collect(lake, &tables)?,
        catalog: catalog_state::collect(lake)?,
        ..LakeState::default()
    };
    for t in &tables {
        let [n, bytes, small_n, file_rows] = files.get(&t.id).copied().unwrap_or_default();
        let [dels, deleted, del_bytes] = deletes.get(&t.id).copied().unwrap_or_default();
        let inl = inlined.get(&t.id).copied().unwrap_or(0);
        state.tables.push(TableState {
            table: t.qualified(),
            data_files: n,
            data_bytes: bytes,
            small_files: small_n,
            delete_files: dels,
            delete_bytes: del_bytes,
            rows: file_rows - deleted + inl,
            inlined_rows: inl,
        });
    }
    for (owner, dl) in dead_letter_tables(cfg, &tables) {
        for r in lake.rows(&format!(
            "SELECT coalesce(reason, ''), count(*)::BIGINT FROM lake.{}.{} GROUP BY 1 ORDER BY 1",
            ident(&dl.schema),
            ident(&dl.name)
        ))? {
            state
                .dead_letters
                .push((owner.clone(), as_string(&r[0]), as_i64(&r[1])));
        }
    }
    Ok(state)
}

pub fn apply(state: &LakeState, m: &LakeMetrics) {
    m.reset_labelled();
    m.snapshots.set(state.snapshots);
    m.oldest_snapshot_age.set(state.oldest_snapshot_age);
    m.newest_snapshot_age.set(state.newest_snapshot_age);
    m.oldest_snapshot_id.set(state.oldest_snapshot_id);
    m.newest_snapshot_id.set(state.newest_snapshot_id);
    m.files_scheduled_for_deletion
        .set(state.files_scheduled_for_deletion);
    m.files_scheduled_for_deletion_duplicates
        .set(state.scheduled_duplicates);
    shape::apply(&state.shape, m);
    catalog_state::apply(&state.catalog, m);
    for t in &state.tables {
        let l = [t.table.as_str()];
        m.data_files.with_label_values(&l).set(t.data_files);
        m.data_bytes.with_label_values(&l).set(t.data_bytes);
        m.small_files.with_label_values(&l).set(t.small_files);
        m.delete_files.with_label_values(&l).set(t.delete_files);
        m.delete_bytes.with_label_values(&l).set(t.delete_bytes);
        m.rows.with_label_values(&l).set(t.rows);
        m.inlined_rows.with_label_values(&l).set(t.inlined_rows);
    }
    for o in &state.offsets {
        let p = o.partition.to_string();
        let l = [o.table.as_str(), o.topic.as_str(), p.as_str()];
        m.recorded_offset.with_label_values(&l).set(o.last_offset);
        m.recorded_offset_age
            .with_label_values(&l)
            .set(o.age_seconds);
    }
    // Reasons Millpond does not give share one label: summed, not set in turn.
    let mut by_label: HashMap<(&str, &str), i64> = HashMap::new();
    for (table, reason, n) in &state.dead_letters {
        *by_label
            .entry((table.as_str(), dead_letter_reason::label(reason)))
            .or_default() += *n;
    }
    for ((table, reason), n) in by_label {
        m.dead_letters.with_label_values(&[table, reason]).set(n);
    }
}

/// Opens the lake for the exporter; a failure counts as a failed read
/// (`lake_up` 0, `lake_collect_errors_total`), as `refresh` counts its own.
pub fn open(cfg: &ToolConfig, m: &LakeMetrics, queries: &QueryGauges) -> anyhow::Result<Lake> {
    Lake::open(&cfg.lake).inspect_err(|_| failed(m, queries))
}

/// A failed read: counted, and the queries' gauges left out (the built-in
/// series keep the last read's values, which `lake_up` 0 and
/// `lake_last_success_timestamp_seconds` date).
fn failed(m: &LakeMetrics, queries: &QueryGauges) {
    m.up.set(0);
    m.collect_errors.inc();
    m.consecutive_collect_errors.inc();
    queries.drop_all();
}

/// Reads the catalog into `m`, then runs the DUCKLAKE_METRICS_CONFIG
/// queries, with the exporter's own series: `lake_up`, the read's duration,
/// the last success and the error counts. A failed query is no failed read.
pub fn refresh(
    lake: &Lake,
    cfg: &ToolConfig,
    m: &LakeMetrics,
    queries: &QueryGauges,
) -> anyhow::Result<()> {
    m.small_file_threshold
        .set(cfg.metrics.small_file_bytes as i64);
    let start = Instant::now();
    let result = collect(lake, cfg);
    if let Ok(state) = &result {
        apply(state, m);
        queries.run(lake, m);
    }
    m.collect_duration.set(start.elapsed().as_secs_f64());
    match result {
        Ok(_) => {
            m.up.set(1);
            m.consecutive_collect_errors.set(0);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            m.last_success.set(now.as_secs_f64());
            Ok(())
        }
        Err(e) => {
            failed(m, queries);
            Err(e)
        }
    }
}
