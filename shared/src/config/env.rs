use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::str::FromStr;

use super::errors::ConfigErrors;

/// A snapshot of the environment. Tests build one from pairs; binaries take
/// the process environment once at startup. No other code reads env vars.
#[derive(Debug, Clone, Default)]
pub struct Env(BTreeMap<String, String>);

impl Env {
    pub fn from_process() -> Self {
        Env(std::env::vars().collect())
    }

    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Env(pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect())
    }

    /// The value, with empty or whitespace-only treated as unset.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    pub fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.0
            .iter()
            .filter(move |(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Reads typed values from an [`Env`], collecting every error.
pub struct EnvReader<'a> {
    env: &'a Env,
    pub errors: ConfigErrors,
}

impl<'a> EnvReader<'a> {
    pub fn new(env: &'a Env) -> Self {
        EnvReader {
            env,
            errors: ConfigErrors::default(),
        }
    }

    pub fn env(&self) -> &'a Env {
        self.env
    }

    pub fn optional(&self, name: &str) -> Option<String> {
        self.env.get(name).map(str::to_owned)
    }

    pub fn string_or(&self, name: &str, default: &str) -> String {
        self.optional(name).unwrap_or_else(|| default.to_owned())
    }

    pub fn required(&mut self, name: &str) -> Option<String> {
        let v = self.optional(name);
        if v.is_none() {
            self.errors.push(name, "is required but not set");
        }
        v
    }

    /// A required secret: its value is never echoed.
    pub fn required_secret(&mut self, name: &str) -> Option<super::Secret> {
        self.required(name).map(super::Secret::new)
    }

    pub fn optional_secret(&self, name: &str) -> Option<super::Secret> {
        self.optional(name).map(super::Secret::new)
    }

    /// Parses a value, falling back to `default` when unset. The parsed value
    /// must satisfy `check`, whose message explains the rule.
    pub fn parse_or<T>(
        &mut self,
        name: &str,
        default: T,
        check: impl Fn(&T) -> Result<(), String>,
    ) -> T
    where
        T: FromStr + Clone,
    {
        let Some(raw) = self.env.get(name) else {
            return default;
        };
        match raw.parse::<T>() {
            Ok(v) => match check(&v) {
                Ok(()) => v,
                Err(msg) => {
                    self.errors.push(name, format!("{msg} (got {raw:?})"));
                    default
                }
            },
            Err(_) => {
                self.errors.push(
                    name,
                    format!("must be a {} (got {raw:?})", type_word::<T>()),
                );
                default
            }
        }
    }

    pub fn positive_u64(&mut self, name: &str, default: u64) -> u64 {
        self.parse_or(name, default, |v| {
            if *v > 0 {
                Ok(())
            } else {
                Err("must be a positive integer".into())
            }
        })
    }

    /// A size such as 32MiB, 8MB or 65535 (bytes), within `range`; `rule`
    /// says the range in words. Unset gives `default`, itself a size.
    pub fn size(
        &mut self,
        name: &str,
        default: &str,
        range: RangeInclusive<u64>,
        rule: &str,
    ) -> u64 {
        let fallback = parse_size::parse_size(default).expect("a default size parses");
        let Some(raw) = self.env.get(name) else {
            return fallback;
        };
        match parse_size::parse_size(raw) {
            Ok(b) if range.contains(&b) => b,
            Ok(_) => {
                self.errors.push(name, format!("{rule} (got {raw:?})"));
                fallback
            }
            Err(e) => {
                self.errors.push(
                    name,
                    format!("must be a size like {default} (got {raw:?}: {e})"),
                );
                fallback
            }
        }
    }

    pub fn u16_port(&mut self, name: &str, default: u16) -> u16 {
        self.parse_or(name, default, |_| Ok(()))
    }

    pub fn bool_opt(&mut self, name: &str) -> Option<bool> {
        let raw = self.env.get(name)?;
        match raw.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Some(true),
            "false" | "0" | "no" => Some(false),
            _ => {
                self.errors
                    .push(name, format!("must be true or false (got {raw:?})"));
                None
            }
        }
    }

    /// One of a fixed set of lowercase words; case-insensitive.
    pub fn choice(&mut self, name: &str, default: &str, allowed: &[&str]) -> String {
        let Some(raw) = self.env.get(name) else {
            return default.to_owned();
        };
        let lower = raw.to_ascii_lowercase();
        if allowed.contains(&lower.as_str()) {
            lower
        } else {
            self.errors.push(
                name,
                format!("must be one of {} (got {raw:?})", allowed.join(", ")),
            );
            default.to_owned()
        }
    }

    pub fn safe_identifier(&mut self, name: &str, value: Option<String>) -> Option<String> {
        let v = value?;
        if super::is_safe_identifier(&v) {
            Some(v)
        } else {
            self.errors.push(
                name,
                format!("must be a safe identifier [a-zA-Z_][a-zA-Z0-9_]* (got {v:?})"),
            );
            None
        }
    }

    pub fn finish(self) -> Result<(), ConfigErrors> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(self.errors)
        }
    }
}

fn type_word<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    if name.starts_with('u') || name.starts_with('i') {
        "whole number"
    } else if name.starts_with('f') {
        "number"
    } else {
        "valid value"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_every_error_naming_the_variable() {
        let env = Env::from_pairs([("A", "x"), ("B", "0"), ("C", "  ")]);
        let mut r = EnvReader::new(&env);
        assert_eq!(r.positive_u64("A", 5), 5);
        assert_eq!(r.positive_u64("B", 5), 5);
        assert!(r.required("C").is_none());
        assert_eq!(r.errors.vars(), vec!["A", "B", "C"]);
        let text = r.finish().unwrap_err().to_string();
        assert!(text.contains("A: must be a whole number"), "{text}");
    }

    #[test]
    fn choice_is_case_insensitive() {
        let env = Env::from_pairs([("D", "DuckLake")]);
        let mut r = EnvReader::new(&env);
        assert_eq!(r.choice("D", "x", &["ducklake", "hoglake"]), "ducklake");
        assert!(r.finish().is_ok());
    }

    #[test]
    fn sizes_take_units_and_a_range() {
        let env = Env::from_pairs([("A", "4MiB"), ("B", "8MB"), ("C", "12"), ("D", "lots")]);
        let mut r = EnvReader::new(&env);
        assert_eq!(r.size("A", "1KiB", 0..=u64::MAX, ""), 4 << 20);
        assert_eq!(r.size("B", "1KiB", 0..=u64::MAX, ""), 8_000_000);
        assert_eq!(
            r.size("C", "1KiB", 100..=200, "must be from 100 to 200"),
            1024
        );
        assert_eq!(r.size("D", "1KiB", 0..=u64::MAX, ""), 1024);
        assert_eq!(r.size("UNSET", "2KiB", 0..=1, ""), 2048);
        let text = r.finish().unwrap_err().to_string();
        assert!(
            text.contains("C: must be from 100 to 200 (got \"12\")"),
            "{text}"
        );
        assert!(
            text.contains("D: must be a size like 1KiB (got \"lots\""),
            "{text}"
        );
    }
}
