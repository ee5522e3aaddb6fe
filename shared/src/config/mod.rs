//! Environment-driven configuration.
//!
//! Every group is parsed by a function taking an [`EnvReader`]; parse errors
//! are collected rather than returned early so that an operator sees every
//! wrong variable in a single startup failure.
mod common;
mod env;
mod errors;
mod secret;
mod secret_url;

pub use common::{CommonConfig, LogFormat};
pub use env::{Env, EnvReader};
pub use errors::{ConfigError, ConfigErrors};
pub use secret::Secret;
pub use secret_url::SecretUrl;

/// Default of MILLPOND_MAX_COLUMNS, read by both processes: the most payload
/// columns one flush carries (ingest) and one table grows to (writer);
/// values of further keys become dead letters (`too_many_columns`).
pub const DEFAULT_MAX_COLUMNS: usize = 1000;

/// `[a-zA-Z_][a-zA-Z0-9_]*`: the only names interpolated into generated SQL.
pub fn is_safe_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// MILLPOND_SORT_BY: column names, left to right (empty = no sort). Ingest
/// sorts each flush by them; the hoglake writer declares them as the
/// table's sort order.
pub fn sort_by(r: &mut EnvReader<'_>) -> Vec<String> {
    const VAR: &str = "MILLPOND_SORT_BY";
    let Some(raw) = r.optional(VAR).filter(|v| !v.trim().is_empty()) else {
        return Vec::new();
    };
    let keys: Vec<String> = raw.split(',').map(|k| k.trim().to_owned()).collect();
    let mut seen = std::collections::HashSet::new();
    for k in &keys {
        if !is_safe_identifier(k) {
            r.errors.push(
                VAR,
                format!("{k:?} is not a column name [A-Za-z_][A-Za-z0-9_]*"),
            );
        } else if !seen.insert(k.to_ascii_lowercase()) {
            r.errors.push(VAR, format!("{k:?} is listed twice"));
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::is_safe_identifier;

    #[test]
    fn safe_identifiers() {
        for ok in ["a", "_x", "team_id", "A9_b"] {
            assert!(is_safe_identifier(ok), "{ok}");
        }
        for bad in ["", "9a", "utm-source", "a b", "a;drop", "é"] {
            assert!(!is_safe_identifier(bad), "{bad}");
        }
    }
}
