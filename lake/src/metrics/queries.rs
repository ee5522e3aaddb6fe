//! DUCKLAKE_METRICS_CONFIG: a TOML file of named SQL queries the exporter
//! runs against the lake each read, each row a series of a gauge of its
//! own (`millpond_lake_<name>`), its labels taken from columns:
//!
//! ```toml
//! [[query]]
//! name = "events_by_kind"            # millpond_lake_events_by_kind
//! help = "Rows of main.events by kind"
//! sql = "SELECT kind, count(*) AS n FROM lake.main.events GROUP BY kind"
//! value = "n"                        # a numeric column
//! labels = ["kind"]                  # columns, each a label
//! ```
//!
//! This file checks what needs no catalog: the file's syntax, each query's
//! keys, names and labels, and that no two gauges (the built-in ones
//! included) share a name. What needs the catalog (the SQL, its columns and
//! the value's type) is checked by [`super::query_gauges`] when the
//! exporter first reaches the catalog.
use std::collections::HashSet;
use std::path::Path;

use millpond_shared::metrics::{new_registry, LakeMetrics};
use prometheus::{GaugeVec, Opts, Registry};
use toml_edit::{Document, Item, Table};

/// The variable naming the file, as errors name it.
pub const VAR: &str = "DUCKLAKE_METRICS_CONFIG";

/// Labels every series carries already (the registry's own).
const BASE_LABELS: [&str; 2] = ["pipeline", "broker_source"];

const KEYS: [&str; 5] = ["name", "help", "sql", "value", "labels"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The gauge's name without the `millpond_lake_` prefix.
    pub name: String,
    pub help: String,
    pub sql: String,
    /// The column holding each row's value.
    pub value: String,
    /// The columns whose text becomes each row's labels (same names).
    pub labels: Vec<String>,
}

impl Query {
    /// The gauge's name in the registry (which adds `millpond_`).
    pub fn metric_name(&self) -> String {
        format!("lake_{}", self.name)
    }

    /// The query's gauge, not yet registered.
    pub fn gauge(&self) -> GaugeVec {
        let labels: Vec<&str> = self.labels.iter().map(String::as_str).collect();
        GaugeVec::new(Opts::new(self.metric_name(), self.help.clone()), &labels)
            .expect("names and labels checked by parse")
    }
}

/// Reads and checks the file at `path`; each error names the query it is
/// about (or the file, when it cannot be read or parsed).
pub fn load(path: &Path) -> Result<Vec<Query>, Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![format!("cannot read {}: {e}", path.display())])?;
    parse(&text).map_err(|errors| {
        errors
            .into_iter()
            .map(|e| format!("{}: {e}", path.display()))
            .collect()
    })
}

/// The queries of a file's text, or every problem found in it.
pub fn parse(text: &str) -> Result<Vec<Query>, Vec<String>> {
    let doc = Document::parse(text).map_err(|e| vec![format!("not TOML: {e}")])?;
    let root = doc.as_item().as_table().expect("a document is a table");
    let mut errors = Vec::new();
    for (key, _) in root.iter().filter(|(k, _)| *k != "query") {
        errors.push(format!(
            "unknown key `{key}` (the file holds [[query]] tables only)"
        ));
    }
    let tables = match root.get("query") {
        None => {
            errors.push("no [[query]] in the file".into());
            return Err(errors);
        }
        Some(item) => match item.as_array_of_tables() {
            Some(tables) => tables,
            None => {
                errors.push("`query` must be [[query]] tables".into());
                return Err(errors);
            }
        },
    };
    let mut queries = Vec::new();
    for (i, table) in tables.iter().enumerate() {
        match query(table) {
            Ok(q) => queries.push(q),
            Err((name, problems)) => {
                let who = name.map_or_else(
                    || format!("[[query]] #{}", i + 1),
                    |n| format!("query `{n}`"),
                );
                errors.extend(problems.into_iter().map(|p| format!("{who}: {p}")));
            }
        }
    }
    let mut seen = HashSet::new();
    for q in &queries {
        if !seen.insert(q.name.as_str()) {
            errors.push(format!("query `{}`: the name is used twice", q.name));
        }
    }
    if errors.is_empty() {
        errors.extend(collisions(&queries));
    }
    match errors.is_empty() {
        true => Ok(queries),
        false => Err(errors),
    }
}

/// One [[query]] table, or (its name if it has one, its problems).
fn query(table: &Table) -> Result<Query, (Option<String>, Vec<String>)> {
    let mut problems = Vec::new();
    let mut text = |key: &str, required: bool| match table.get(key) {
        None if required => {
            problems.push(format!("`{key}` is missing"));
            None
        }
        None => None,
        Some(item) => match item.as_str() {
            Some(s) if !s.trim().is_empty() => Some(s.to_owned()),
            _ => {
                problems.push(format!("`{key}` must be a non-empty string"));
                None
            }
        },
    };
    let name = text("name", true);
    let help = text("help", false);
    let sql = text("sql", true);
    let value = text("value", true);
    for (key, _) in table.iter().filter(|(k, _)| !KEYS.contains(k)) {
        problems.push(format!("unknown key `{key}` (known: {})", KEYS.join(", ")));
    }
    if let Some(n) = &name {
        if !is_name(n) {
            problems.push(format!(
                "`{n}` is no metric name (letters, digits and _, not starting with a digit)"
            ));
        }
    }
    let labels = labels(table.get("labels"), value.as_deref(), &mut problems);
    match (name, sql, value, problems.is_empty()) {
        (Some(name), Some(sql), Some(value), true) => Ok(Query {
            help: help.unwrap_or_else(|| format!("{name} (a query of {VAR})")),
            name,
            sql,
            value,
            labels,
        }),
        (name, ..) => Err((name, problems)),
    }
}

fn labels(item: Option<&Item>, value: Option<&str>, problems: &mut Vec<String>) -> Vec<String> {
    let Some(item) = item else {
        return Vec::new();
    };
    let Some(array) = item.as_array() else {
        problems.push("`labels` must be a list of column names".into());
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for v in array.iter() {
        let Some(label) = v.as_str() else {
            problems.push("`labels` must be a list of column names".into());
            continue;
        };
        if !is_name(label) || label.starts_with("__") {
            problems.push(format!(
                "label `{label}` is no label name (letters, digits and _, not starting with a digit or __)"
            ));
        } else if BASE_LABELS.contains(&label) {
            problems.push(format!(
                "label `{label}` is one every series carries already"
            ));
        } else if Some(label) == value {
            problems.push(format!("`{label}` is the value column, not a label"));
        } else if out.iter().any(|l| l == label) {
            problems.push(format!("label `{label}` is listed twice"));
        }
        out.push(label.to_owned());
    }
    out
}

/// A Prometheus metric or label name, colons left out (they are for
/// recording rules).
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Registers every query's gauge beside the built-in ones, on a registry
/// of its own: a name already taken is refused there as it would be by the
/// exporter's.
fn collisions(queries: &[Query]) -> Vec<String> {
    let registry = new_registry("p", "");
    LakeMetrics::new(&registry);
    register(&registry, queries).err().unwrap_or_default()
}

/// Registers each query's gauge in `registry`; a name taken (by a
/// built-in gauge or another query) is refused, naming the query.
pub fn register(registry: &Registry, queries: &[Query]) -> Result<Vec<GaugeVec>, Vec<String>> {
    let mut gauges = Vec::new();
    let mut errors = Vec::new();
    for q in queries {
        let gauge = q.gauge();
        match registry.register(Box::new(gauge.clone())) {
            Ok(()) => gauges.push(gauge),
            Err(e) => errors.push(format!(
                "query `{}`: millpond_{} cannot be registered ({e}): the exporter has a series of that name",
                q.name,
                q.metric_name()
            )),
        }
    }
    match errors.is_empty() {
        true => Ok(gauges),
        false => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[query]]
name = "events_by_kind"
help = "Rows of main.events by kind"
sql = "SELECT kind, count(*) AS n FROM lake.main.events GROUP BY kind"
value = "n"
labels = ["kind"]

[[query]]
name = "snapshot_count"
sql = "SELECT count(*) AS n FROM __ducklake_metadata_lake.ducklake_snapshot"
value = "n"
"#;

    fn refused(text: &str) -> Vec<String> {
        parse(text).expect_err("refused")
    }

    fn one_refusal(text: &str, query: &str, says: &str) {
        let errors = refused(text);
        assert!(
            errors
                .iter()
                .any(|e| e.contains(&format!("query `{query}`")) && e.contains(says)),
            "no error naming `{query}` and saying {says:?}: {errors:?}"
        );
    }

    #[test]
    fn a_good_file_gives_its_queries() {
        let q = parse(GOOD).unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].name, "events_by_kind");
        assert_eq!(q[0].metric_name(), "lake_events_by_kind");
        assert_eq!(q[0].help, "Rows of main.events by kind");
        assert_eq!(q[0].value, "n");
        assert_eq!(q[0].labels, ["kind"]);
        assert_eq!(q[1].labels, Vec::<String>::new());
        assert!(q[1].help.contains(VAR), "a default help: {}", q[1].help);
    }

    #[test]
    fn a_file_that_is_no_toml_or_holds_no_query_is_refused() {
        assert!(refused("[[query]\nname = ")[0].starts_with("not TOML"));
        assert_eq!(refused("# nothing\n"), ["no [[query]] in the file"]);
        assert!(refused("query = 3")[0].contains("[[query]] tables"));
        assert!(refused("[[queries]]\nname = \"x\"")
            .iter()
            .any(|e| e.contains("unknown key `queries`")));
    }

    #[test]
    fn each_refusal_names_its_query() {
        let base = |extra: &str| {
            format!("[[query]]\nname = \"q1\"\nsql = \"SELECT 1 AS v\"\nvalue = \"v\"\n{extra}")
        };
        one_refusal(&base("labels = [\"bad-label\"]"), "q1", "no label name");
        one_refusal(&base("labels = [\"__name\"]"), "q1", "no label name");
        one_refusal(&base("labels = [\"pipeline\"]"), "q1", "carries already");
        one_refusal(&base("labels = [\"v\"]"), "q1", "the value column");
        one_refusal(&base("labels = [\"a\", \"a\"]"), "q1", "listed twice");
        one_refusal(&base("labels = \"a\""), "q1", "list of column names");
        one_refusal(&base("colour = \"blue\""), "q1", "unknown key `colour`");
        one_refusal(&base("help = 3"), "q1", "`help` must be a non-empty string");
        one_refusal(
            "[[query]]\nname = \"q2\"\nvalue = \"v\"\n",
            "q2",
            "`sql` is missing",
        );
        one_refusal(
            "[[query]]\nname = \"q3\"\nsql = \"SELECT 1\"\n",
            "q3",
            "`value` is missing",
        );
        one_refusal(
            "[[query]]\nname = \"3rd\"\nsql = \"SELECT 1 AS v\"\nvalue = \"v\"\n",
            "3rd",
            "no metric name",
        );
        one_refusal(
            "[[query]]\nname = \"a.b\"\nsql = \"SELECT 1 AS v\"\nvalue = \"v\"\n",
            "a.b",
            "no metric name",
        );
        let nameless = refused("[[query]]\nsql = \"SELECT 1 AS v\"\nvalue = \"v\"\n");
        assert!(
            nameless
                .iter()
                .any(|e| e.starts_with("[[query]] #1: `name` is missing")),
            "{nameless:?}"
        );
    }

    #[test]
    fn names_used_twice_or_by_the_exporter_are_refused() {
        let q = |name: &str| {
            format!("[[query]]\nname = \"{name}\"\nsql = \"SELECT 1 AS v\"\nvalue = \"v\"\n")
        };
        one_refusal(&format!("{}{}", q("dup"), q("dup")), "dup", "used twice");
        // millpond_lake_snapshots and millpond_lake_collect_errors_total
        // are the exporter's own.
        one_refusal(&q("snapshots"), "snapshots", "cannot be registered");
        one_refusal(
            &q("collect_errors_total"),
            "collect_errors_total",
            "cannot be registered",
        );
        assert!(parse(&q("snapshots_per_day")).is_ok());
    }

    #[test]
    fn an_unreadable_file_names_its_path() {
        let errors = load(Path::new("/nonexistent/queries.toml")).unwrap_err();
        assert!(
            errors[0].contains("/nonexistent/queries.toml"),
            "{errors:?}"
        );
    }
}
