//! The metric names a PromQL expression selects, for checking a dashboard
//! against what the binaries export. Label matchers (`{...}`), ranges
//! (`[...]`), strings, Grafana variables (`$pipeline`, `$__rate_interval`)
//! and the label lists of `by`/`without`/`on`/`ignoring`/`group_*` are not
//! names; a name followed by `(` is a function, which must be one PromQL
//! (or Grafana's `label_values`) knows.
use std::collections::BTreeSet;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct References {
    pub metrics: BTreeSet<String>,
    /// Called names that are no PromQL function: a typo Grafana would
    /// only report when the panel loads.
    pub unknown_functions: BTreeSet<String>,
}

const FUNCTIONS: &[&str] = &[
    // aggregations
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
    // functions
    "abs",
    "absent",
    "absent_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "delta",
    "deriv",
    "exp",
    "floor",
    "histogram_avg",
    "histogram_count",
    "histogram_fraction",
    "histogram_quantile",
    "histogram_stddev",
    "histogram_stdvar",
    "histogram_sum",
    "hour",
    "idelta",
    "increase",
    "irate",
    "label_join",
    "label_replace",
    "ln",
    "log2",
    "log10",
    "minute",
    "month",
    "predict_linear",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sort",
    "sort_desc",
    "sqrt",
    "time",
    "timestamp",
    "vector",
    "year",
    "avg_over_time",
    "min_over_time",
    "max_over_time",
    "sum_over_time",
    "count_over_time",
    "quantile_over_time",
    "stddev_over_time",
    "stdvar_over_time",
    "last_over_time",
    "present_over_time",
    // Grafana's template queries
    "label_values",
];
/// Followed by a parenthesised list of labels, not of expressions.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
];

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Index just past the bracket closing `chars[i]`, skipping strings inside.
fn skip_group(chars: &[char], mut i: usize) -> usize {
    let (open, close) = (chars[i], matching(chars[i]));
    let mut depth = 0;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => i = skip_string(chars, i) - 1,
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

fn matching(c: char) -> char {
    match c {
        '(' => ')',
        '[' => ']',
        _ => '}',
    }
}

/// Index just past the string starting at `chars[i]`.
fn skip_string(chars: &[char], i: usize) -> usize {
    let quote = chars[i];
    let mut j = i + 1;
    while j < chars.len() && chars[j] != quote {
        j += if chars[j] == '\\' && quote != '`' {
            2
        } else {
            1
        };
    }
    j + 1
}

pub fn references(expr: &str) -> References {
    let chars: Vec<char> = expr.chars().collect();
    let mut refs = References::default();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&chars, i);
        } else if c == '{' || c == '[' {
            i = skip_group(&chars, i);
        } else if c == '$' {
            i += 1;
            if chars.get(i) == Some(&'{') {
                i = skip_group(&chars, i);
            }
            while i < chars.len() && is_name(chars[i]) {
                i += 1;
            }
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (is_name(chars[i]) || chars[i] == '.') {
                i += 1;
            }
        } else if is_name_start(c) {
            let start = i;
            while i < chars.len() && is_name(chars[i]) {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            let mut next = i;
            while next < chars.len() && chars[next].is_whitespace() {
                next += 1;
            }
            // `sum by (x) (...)`: an aggregation with its modifier first.
            let rest: String = chars[next..].iter().take(8).collect();
            let modified = ["by", "without"].iter().any(|m| {
                rest.strip_prefix(m)
                    .is_some_and(|r| r.starts_with(|c: char| c == '(' || c.is_whitespace()))
            });
            let called = chars.get(next) == Some(&'(') || modified;
            if LABEL_LISTS.contains(&name.as_str()) {
                if called {
                    i = skip_group(&chars, next);
                }
            } else if called {
                if !FUNCTIONS.contains(&name.as_str()) {
                    refs.unknown_functions.insert(name);
                }
            } else if !KEYWORDS.contains(&name.as_str()) {
                refs.metrics.insert(name);
            }
        } else {
            i += 1;
        }
    }
    refs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(expr: &str) -> Vec<String> {
        references(expr).metrics.into_iter().collect()
    }

    #[test]
    fn names_but_not_labels_ranges_functions_or_variables() {
        let e = r#"histogram_quantile(0.95, sum by (pipeline, le) (rate(m_bucket{pipeline=~"$pipeline", a="}"}[$__rate_interval])))"#;
        assert_eq!(metrics(e), ["m_bucket"]);
        let e = "sum(rate(a_sum[5m])) / on (x) group_left sum without (y) (rate(b_count[5m] offset 1h)) > bool 2";
        assert_eq!(metrics(e), ["a_sum", "b_count"]);
        assert_eq!(metrics("max by (pipeline, instance) (c)"), ["c"]);
        assert_eq!(metrics("d{job='x'} and ${var} e"), ["d", "e"]);
    }

    #[test]
    fn a_misspelled_function_is_reported() {
        let r = references("sum(rat(a[5m]))");
        assert_eq!(r.unknown_functions.into_iter().collect::<Vec<_>>(), ["rat"]);
        assert_eq!(r.metrics.into_iter().collect::<Vec<_>>(), ["a"]);
    }
}
