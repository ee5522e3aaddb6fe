//! Ending a plan's files in one snapshot of the catalog's own, as DuckLake
//! ends a data file whose rows are all deleted: a new snapshot (the latest
//! plus one, same schema version and next ids), its change
//! `deleted_from_table:<id>`, and `end_snapshot` set on the data files and
//! on their live delete files. One transaction where the catalog lives
//! ([`CatalogSql::atomic`]); a writer committing the same snapshot id
//! meanwhile makes one of the two fail on the key and run again.
use super::plan::Plan;
use crate::catalog::{as_i64, Lake};
use crate::native::CatalogSql;
use millpond_writer::lake_api::literal;

pub struct Dropped {
    pub snapshot: i64,
    pub files: i64,
    pub rows: i64,
}

/// At most this many ids in one `IN (...)`.
const CHUNK: usize = 1000;

pub fn end_files(lake: &Lake, plan: &Plan) -> anyhow::Result<Dropped> {
    let sql = CatalogSql::new(lake);
    let m = sql.m();
    let planned = plan.files();
    let ids: Vec<i64> = planned.keys().copied().collect();
    let latest = format!("(SELECT max(snapshot_id) FROM {m}ducklake_snapshot)");
    let message = format!(
        "millpond-lake drop-partitions: {} partitions of {} that ended by {} UTC (retention {}s)",
        plan.droppable.len(),
        plan.table.qualified(),
        plan.cutoff.format("%Y-%m-%d %H:%M:%S"),
        plan.age.as_secs()
    );
    let mut statements = vec![
        format!(
            "INSERT INTO {m}ducklake_snapshot (snapshot_id, snapshot_time, schema_version, next_catalog_id, next_file_id) \
             SELECT snapshot_id + 1, now(), schema_version, next_catalog_id, next_file_id \
             FROM {m}ducklake_snapshot ORDER BY snapshot_id DESC LIMIT 1"
        ),
        format!(
            "INSERT INTO {m}ducklake_snapshot_changes (snapshot_id, changes_made, author, commit_message, commit_extra_info) \
             SELECT max(snapshot_id), {}, 'millpond-lake', {}, NULL FROM {m}ducklake_snapshot",
            literal(&format!("deleted_from_table:{}", plan.table.id)),
            literal(&message)
        ),
    ];
    for chunk in ids.chunks(CHUNK) {
        let list = id_list(chunk);
        for table in ["ducklake_data_file", "ducklake_delete_file"] {
            statements.push(format!(
                "UPDATE {m}{table} SET end_snapshot = {latest} \
                 WHERE end_snapshot IS NULL AND table_id = {} AND data_file_id IN ({list})",
                plan.table.id
            ));
        }
    }
    sql.atomic(&statements)?;
    let snapshot = sql.int(&format!(
        "SELECT max(snapshot_id) FROM {m}ducklake_snapshot_changes WHERE commit_message = {}",
        literal(&message)
    ))?;
    // What ended in this snapshot (a file something else ended meanwhile
    // is not counted).
    let (mut files, mut rows) = (0, 0);
    for chunk in ids.chunks(CHUNK) {
        let list = id_list(chunk);
        for r in sql.rows(&format!(
            "SELECT data_file_id FROM {m}ducklake_data_file \
             WHERE end_snapshot = {snapshot} AND data_file_id IN ({list})"
        ))? {
            files += 1;
            rows += planned.get(&as_i64(&r[0])).copied().unwrap_or(0);
        }
    }
    Ok(Dropped {
        snapshot,
        files,
        rows,
    })
}

fn id_list(ids: &[i64]) -> String {
    ids.iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
