//! DUCKLAKE_PARTITION_BY: the partition keys DuckLake 1.5.5 takes in
//! `ALTER TABLE ... SET PARTITIONED BY (...)`, checked at startup and
//! rendered with every column quoted, so no operator text reaches SQL.
//!
//! DuckLake partitions by a column's value, by `year`, `month`, `day` or
//! `hour` of a DATE or TIMESTAMP column (calendar values, as its Hive paths
//! show them: `year=2026/month=3/day=23/hour=21`), or by `bucket(N, col)`
//! (Iceberg's murmur3 bucket, 0 to N-1). It refuses every other function
//! (`minute`, `week`, `truncate`, `identity`, ...), nested calls and
//! expressions, and so does this grammar, naming the part it refuses.
use std::fmt;

use super::names::RESERVED_COLUMNS;
use super::sql::ident;

/// DuckLake refuses more buckets than this.
pub const MAX_BUCKETS: u32 = i32::MAX as u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    /// The column's own value.
    Identity,
    Year,
    Month,
    Day,
    Hour,
    /// `bucket(N, col)`: murmur3 of the value, modulo N.
    Bucket(u32),
}

impl Transform {
    /// year/month/day/hour: DATE or TIMESTAMP columns only.
    pub fn is_temporal(self) -> bool {
        matches!(
            self,
            Transform::Year | Transform::Month | Transform::Day | Transform::Hour
        )
    }

    fn name(self) -> &'static str {
        match self {
            Transform::Identity => "identity",
            Transform::Year => "year",
            Transform::Month => "month",
            Transform::Day => "day",
            Transform::Hour => "hour",
            Transform::Bucket(_) => "bucket",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionKey {
    pub transform: Transform,
    /// A safe identifier, as written.
    pub column: String,
}

impl PartitionKey {
    fn sql(&self) -> String {
        let col = ident(&self.column);
        match self.transform {
            Transform::Identity => col,
            Transform::Bucket(n) => format!("bucket({n}, {col})"),
            t => format!("{}({col})", t.name()),
        }
    }
}

impl fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.transform {
            Transform::Identity => write!(f, "{}", self.column),
            Transform::Bucket(n) => write!(f, "bucket({n}, {})", self.column),
            t => write!(f, "{}({})", t.name(), self.column),
        }
    }
}

/// The keys of DUCKLAKE_PARTITION_BY, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionBy {
    pub keys: Vec<PartitionKey>,
}

impl PartitionBy {
    /// Parses a comma list of keys: `col`, `year(col)`, `month(col)`,
    /// `day(col)`, `hour(col)`, `bucket(N, col)`. Function names in any
    /// case, spaces anywhere between tokens.
    pub fn parse(text: &str) -> Result<PartitionBy, String> {
        let tokens = tokenize(text)?;
        let mut keys: Vec<PartitionKey> = Vec::new();
        for part in top_level_parts(&tokens) {
            let key = key(part)?;
            if keys.contains(&key) {
                return Err(format!("{key} appears twice"));
            }
            keys.push(key);
        }
        Ok(PartitionBy { keys })
    }

    /// The list inside `SET PARTITIONED BY (...)`.
    pub fn sql(&self) -> String {
        self.keys
            .iter()
            .map(PartitionKey::sql)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The first year/month/day/hour key whose column is in `types` (lower
    /// case name -> DuckDB type) with a type those transforms refuse: every
    /// insert into the table would fail.
    pub fn temporal_mismatch<'a>(
        &'a self,
        type_of: impl Fn(&str) -> Option<&'a str>,
    ) -> Option<(&'a PartitionKey, &'a str)> {
        self.keys.iter().find_map(|k| {
            let t = type_of(&k.column.to_ascii_lowercase())?;
            let temporal = t == "DATE" || t.starts_with("TIMESTAMP");
            (k.transform.is_temporal() && !temporal).then_some((k, t))
        })
    }
}

impl fmt::Display for PartitionBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(ToString::to_string).collect();
        write!(f, "{}", keys.join(", "))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Number(String),
    Open,
    Close,
    Comma,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Word(w) | Token::Number(w) => write!(f, "{w}"),
            Token::Open => write!(f, "("),
            Token::Close => write!(f, ")"),
            Token::Comma => write!(f, ","),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let token = match c {
            c if c.is_whitespace() => continue,
            '(' => Token::Open,
            ')' => Token::Close,
            ',' => Token::Comma,
            c if c.is_ascii_alphanumeric() || c == '_' => {
                let mut word = c.to_string();
                while let Some(&(_, n)) = chars.peek() {
                    if !(n.is_ascii_alphanumeric() || n == '_') {
                        break;
                    }
                    word.push(n);
                    chars.next();
                }
                if word.bytes().all(|b| b.is_ascii_digit()) {
                    Token::Number(word)
                } else if word.as_bytes()[0].is_ascii_digit() {
                    return Err(format!("{word:?} is not a column name"));
                } else {
                    Token::Word(word)
                }
            }
            other => {
                return Err(format!(
                    "{other:?} (at character {}) has no place in a partition key",
                    at + 1
                ))
            }
        };
        tokens.push(token);
    }
    Ok(tokens)
}

/// The tokens between commas outside parentheses.
fn top_level_parts(tokens: &[Token]) -> Vec<&[Token]> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, t) in tokens.iter().enumerate() {
        match t {
            Token::Open => depth += 1,
            Token::Close => depth -= 1,
            Token::Comma if depth == 0 => {
                parts.push(&tokens[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts
}

/// A key's tokens as text, for errors: `bucket(4, id)`, `a b`.
fn show(part: &[Token]) -> String {
    let mut out = String::new();
    for (i, t) in part.iter().enumerate() {
        let word = |t: &Token| matches!(t, Token::Word(_) | Token::Number(_));
        if i > 0 && word(t) && word(&part[i - 1]) {
            out.push(' ');
        }
        out.push_str(&t.to_string());
        if *t == Token::Comma {
            out.push(' ');
        }
    }
    out
}

const FORMS: &str = "a key is col, year(col), month(col), day(col), hour(col) or bucket(N, col)";

fn key(part: &[Token]) -> Result<PartitionKey, String> {
    let shown = show(part);
    use Token::{Close, Comma, Number, Open, Word};
    let (transform, column) = match part {
        [] => {
            return Err(format!(
                "an empty key (two commas, or one at an end); {FORMS}"
            ))
        }
        [Word(col)] => {
            if let Some(r) = RESERVED_COLUMNS
                .iter()
                .find(|r| r.eq_ignore_ascii_case(col) && **r != "_inserted_at")
            {
                return Err(format!(
                    "{col:?}: Millpond never writes a column named {r} (its partition folders \
                     are named so); for the {r} of a timestamp write {r}(col)"
                ));
            }
            (Transform::Identity, col)
        }
        [Word(f), Open, Word(col), Close] => {
            let t = match f.to_ascii_lowercase().as_str() {
                "year" => Transform::Year,
                "month" => Transform::Month,
                "day" => Transform::Day,
                "hour" => Transform::Hour,
                "bucket" => {
                    return Err(format!(
                        "{shown:?}: bucket needs a count first, bucket(N, {col})"
                    ))
                }
                _ => return Err(unknown_function(f, &shown)),
            };
            (t, col)
        }
        [Word(f), Open, Number(n), Comma, Word(col), Close] if f.eq_ignore_ascii_case("bucket") => {
            let count = n
                .parse::<u64>()
                .ok()
                .filter(|c| (1..=u64::from(MAX_BUCKETS)).contains(c))
                .ok_or_else(|| format!("{shown:?}: the bucket count must be 1 to {MAX_BUCKETS}"))?;
            (Transform::Bucket(count as u32), col)
        }
        [Word(f), Open, Word(col), Comma, Number(n), Close] if f.eq_ignore_ascii_case("bucket") => {
            return Err(format!(
                "{shown:?}: DuckLake takes the count first, bucket({n}, {col})"
            ))
        }
        [Word(f), Open, ..] if !is_transform(f) => return Err(unknown_function(f, &shown)),
        _ => return Err(format!("{shown:?} is not a partition key; {FORMS}")),
    };
    Ok(PartitionKey {
        transform,
        column: column.clone(),
    })
}

fn is_transform(f: &str) -> bool {
    ["year", "month", "day", "hour", "bucket"]
        .iter()
        .any(|t| t.eq_ignore_ascii_case(f))
}

fn unknown_function(f: &str, shown: &str) -> String {
    format!(
        "{shown:?}: DuckLake partitions by year, month, day, hour and bucket only, not by {}",
        f.to_ascii_lowercase()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(text: &str) -> String {
        PartitionBy::parse(text).unwrap().sql()
    }

    #[test]
    fn every_form_ducklake_takes_is_parsed_and_quoted() {
        assert_eq!(
            sql("year(_inserted_at),month(_inserted_at),day(_inserted_at),hour(_inserted_at)"),
            r#"year("_inserted_at"), month("_inserted_at"), day("_inserted_at"), hour("_inserted_at")"#
        );
        assert_eq!(
            sql(" YEAR( ts ) , Bucket (16,team_id),kind,bucket(2147483647, order)"),
            r#"year("ts"), bucket(16, "team_id"), "kind", bucket(2147483647, "order")"#
        );
        let p = PartitionBy::parse("hour(ts), bucket(04, id)").unwrap();
        assert_eq!(
            p.keys,
            [
                PartitionKey {
                    transform: Transform::Hour,
                    column: "ts".into()
                },
                PartitionKey {
                    transform: Transform::Bucket(4),
                    column: "id".into()
                }
            ]
        );
        assert_eq!(p.to_string(), "hour(ts), bucket(4, id)");
    }

    #[test]
    fn refusals_name_the_part_they_refuse() {
        for (text, words) in [
            ("minute(ts)", "not by minute"),
            ("week(ts)", "not by week"),
            ("truncate(10, id)", "not by truncate"),
            ("identity(id)", "not by identity"),
            ("year(ts), date_trunc(day, ts)", "not by date_trunc"),
            ("bucket(id, 4)", "count first, bucket(4, id)"),
            ("bucket(id)", "bucket needs a count first"),
            ("bucket(0, id)", "1 to 2147483647"),
            ("bucket(2147483648, id)", "1 to 2147483647"),
            ("bucket(99999999999999999999999, id)", "1 to 2147483647"),
            ("bucket(4.5, id)", "'.'"),
            ("bucket(-1, id)", "'-'"),
            ("year(ts, id)", "\"year(ts, id)\" is not a partition key"),
            ("year()", "is not a partition key"),
            ("year(bucket(4, id))", "is not a partition key"),
            ("bucket(4, year(ts))", "is not a partition key"),
            ("year(x); drop table t", "';'"),
            ("\"ts\"", "'\"'"),
            ("a b", "\"a b\" is not a partition key"),
            ("year(ts", "is not a partition key"),
            ("year(ts),,id", "an empty key"),
            ("id,", "an empty key"),
            ("", "an empty key"),
            ("1abc", "not a column name"),
            ("id, id", "id appears twice"),
            ("YEAR(ts), year(ts)", "year(ts) appears twice"),
            ("year", "never writes a column named year"),
            ("Hour", "never writes a column named hour"),
            ("ts + 1", "'+'"),
            ("year(tś)", "'ś'"),
        ] {
            let err = PartitionBy::parse(text).unwrap_err();
            assert!(err.contains(words), "{text:?}: {err}");
        }
    }

    #[test]
    fn temporal_keys_need_temporal_columns() {
        let p = PartitionBy::parse("id, bucket(4, name), day(ts), year(d)").unwrap();
        let types = |c: &str| match c {
            "id" => Some("BIGINT"),
            "name" => Some("VARCHAR"),
            "ts" => Some("TIMESTAMP WITH TIME ZONE"),
            "d" => Some("DATE"),
            _ => None,
        };
        assert_eq!(p.temporal_mismatch(types), None);
        let p = PartitionBy::parse("year(ts), month(ID)").unwrap();
        let (k, t) = p.temporal_mismatch(types).unwrap();
        assert_eq!((k.to_string().as_str(), t), ("month(ID)", "BIGINT"));
        // A column the table lacks yet is DuckLake's to refuse.
        assert_eq!(
            PartitionBy::parse("year(later)")
                .unwrap()
                .temporal_mismatch(types),
            None
        );
    }
}
