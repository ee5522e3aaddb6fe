//! The gauges of DUCKLAKE_METRICS_CONFIG's queries ([`super::queries`]):
//! checked against the catalog when the exporter first reaches it, then run
//! at each read. A query that fails at a read is counted
//! (`millpond_lake_query_errors_total{query}`) and logged, and its gauge is
//! left out of that read's exposition rather than kept stale.
use std::collections::HashSet;

use duckdb::types::Value;
use millpond_shared::metrics::LakeMetrics;
use millpond_writer::lake_api::ident;
use prometheus::{GaugeVec, Registry};

use super::super::catalog::{as_f64, as_string, Lake};
use super::queries::{self, Query, VAR};

/// DuckDB's numeric column types (DECIMAL with its width aside).
const NUMERIC: [&str; 14] = [
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
    "FLOAT",
    "DOUBLE",
    "BOOLEAN",
    "DECIMAL",
];

pub struct QueryGauges {
    gauges: Vec<(Query, GaugeVec)>,
}

/// The user's SQL without a trailing `;`, as a subquery.
fn subquery(sql: &str) -> String {
    let mut sql = sql.trim();
    while let Some(s) = sql.strip_suffix(';') {
        sql = s.trim_end();
    }
    // The newline ends a trailing `-- comment` before the parenthesis.
    format!("({sql}\n) q")
}

fn is_numeric(column_type: &str) -> bool {
    NUMERIC.contains(&column_type)
        || (column_type.starts_with("DECIMAL(") && column_type.ends_with(')'))
}

impl QueryGauges {
    /// Registers each query's gauge, and its error counter at 0.
    pub fn register(
        registry: &Registry,
        m: &LakeMetrics,
        queries: &[Query],
    ) -> anyhow::Result<QueryGauges> {
        let gauges = queries::register(registry, queries)
            .map_err(|e| anyhow::anyhow!("{VAR}: {}", e.join("; ")))?;
        for q in queries {
            m.query_errors.with_label_values(&[&q.name]);
        }
        Ok(QueryGauges {
            gauges: queries.iter().cloned().zip(gauges).collect(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.gauges.is_empty()
    }

    /// Binds each query on the catalog without running it (DuckDB's
    /// DESCRIBE): its SQL must be a query, with the value column numeric
    /// and every label column present. Every problem, each naming its
    /// query and the variable.
    pub fn check(&self, lake: &Lake) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        for (q, _) in &self.gauges {
            let mut say = |what: String| errors.push(format!("{VAR}: query `{}`: {what}", q.name));
            let columns = match lake.rows(&format!("DESCRIBE SELECT * FROM {}", subquery(&q.sql))) {
                Ok(rows) => rows
                    .iter()
                    .map(|r| (as_string(&r[0]), as_string(&r[1])))
                    .collect::<Vec<_>>(),
                Err(e) => {
                    say(format!("the SQL is no query DuckDB can run: {e:#}"));
                    continue;
                }
            };
            let find = |name: &str| columns.iter().find(|(c, _)| c.eq_ignore_ascii_case(name));
            let names = || {
                columns
                    .iter()
                    .map(|(c, _)| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            match find(q.value.as_str()) {
                None => say(format!(
                    "no column `{}` for the value (columns: {})",
                    q.value,
                    names()
                )),
                Some((_, t)) if !is_numeric(t) => say(format!(
                    "the value column `{}` is {t}, not a number",
                    q.value
                )),
                Some(_) => {}
            }
            for label in q.labels.iter().filter(|l| find(l.as_str()).is_none()) {
                say(format!(
                    "no column `{label}` for a label (columns: {})",
                    names()
                ));
            }
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(errors),
        }
    }

    /// Runs every query and sets its gauge; a query that fails is counted,
    /// logged and left out.
    pub fn run(&self, lake: &Lake, m: &LakeMetrics) {
        for (q, gauge) in &self.gauges {
            let result = series(lake, q);
            gauge.reset();
            match result {
                Ok(series) => {
                    for (labels, value) in series {
                        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
                        gauge.with_label_values(&labels).set(value);
                    }
                }
                Err(e) => {
                    m.query_errors.with_label_values(&[&q.name]).inc();
                    let msg = format!("{e:#}");
                    tracing::warn!(query = %q.name, error = %msg, "a query of {VAR} failed; its gauge is left out until it runs again");
                }
            }
        }
    }

    /// Leaves every query's gauge out (after a failed read).
    pub fn drop_all(&self) {
        for (_, gauge) in &self.gauges {
            gauge.reset();
        }
    }
}

/// A query's rows as (label values, value); a NULL value gives no series,
/// a NULL label the empty text. Two rows with the same labels fail it.
fn series(lake: &Lake, q: &Query) -> anyhow::Result<Vec<(Vec<String>, f64)>> {
    let mut columns = vec![format!("CAST(q.{} AS DOUBLE)", ident(&q.value))];
    columns.extend(
        q.labels
            .iter()
            .map(|l| format!("CAST(q.{} AS VARCHAR)", ident(l))),
    );
    let rows = lake.rows(&format!(
        "SELECT {} FROM {}",
        columns.join(", "),
        subquery(&q.sql)
    ))?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for row in rows {
        if matches!(row[0], Value::Null) {
            continue;
        }
        let labels: Vec<String> = row[1..].iter().map(as_string).collect();
        if !seen.insert(labels.clone()) {
            anyhow::bail!(
                "two rows have the same labels {:?}: each row must be a series of its own",
                q.labels.iter().zip(&labels).collect::<Vec<_>>()
            );
        }
        out.push((labels, as_f64(&row[0])));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_becomes_a_subquery_whatever_its_end() {
        assert_eq!(subquery("SELECT 1 AS v;"), "(SELECT 1 AS v\n) q");
        assert_eq!(subquery(" SELECT 1 AS v ; ;\n"), "(SELECT 1 AS v\n) q");
        assert_eq!(
            subquery("SELECT 1 AS v -- one"),
            "(SELECT 1 AS v -- one\n) q"
        );
    }

    #[test]
    fn numeric_types_are_told_from_others() {
        for t in ["BIGINT", "DOUBLE", "DECIMAL(18,3)", "HUGEINT", "BOOLEAN"] {
            assert!(is_numeric(t), "{t}");
        }
        for t in [
            "VARCHAR",
            "BIGINT[]",
            "DECIMAL(18,3)[]",
            "TIMESTAMP",
            "DATE",
        ] {
            assert!(!is_numeric(t), "{t}");
        }
    }
}
