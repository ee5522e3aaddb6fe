//! Environment-driven configuration.
//!
//! Every group is parsed by a function taking an [`EnvReader`]; parse errors
//! are collected rather than returned early so that an operator sees every
//! wrong variable in a single startup failure.
mod common;
mod env;
mod errors;
mod secret;

pub use common::{CommonConfig, LogFormat};
pub use env::{Env, EnvReader};
pub use errors::{ConfigError, ConfigErrors};
pub use secret::Secret;

/// `[a-zA-Z_][a-zA-Z0-9_]*`: the only names interpolated into generated SQL.
/// Default of MILLPOND_MAX_COLUMNS, read by both processes: the most payload
/// columns one flush carries (ingest) and one table grows to (writer);
/// values of further keys become dead letters (`too_many_columns`).
pub const DEFAULT_MAX_COLUMNS: usize = 1000;

pub fn is_safe_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
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
