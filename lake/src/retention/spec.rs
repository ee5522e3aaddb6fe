//! Which partitions are time ranges. DuckLake's calendar keys hold calendar
//! fields, not counts since an epoch: `day(ts)` alone is a day of the month,
//! the same value every month. A partition is a span of time only when its
//! keys on one column run from the year down without a gap (`year`;
//! `year, month`; `year, month, day`; `year, month, day, hour`), which is
//! what this module checks and what it turns values into spans with.
use chrono::{DateTime, Months, NaiveDate, TimeDelta, Utc};

/// A calendar field, coarsest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unit {
    Year,
    Month,
    Day,
    Hour,
}

impl Unit {
    pub fn of(transform: &str) -> Option<Unit> {
        match transform.to_ascii_lowercase().as_str() {
            "year" => Some(Unit::Year),
            "month" => Some(Unit::Month),
            "day" => Some(Unit::Day),
            "hour" => Some(Unit::Hour),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Unit::Year => "year",
            Unit::Month => "month",
            Unit::Day => "day",
            Unit::Hour => "hour",
        }
    }
}

const CHAIN: [Unit; 4] = [Unit::Year, Unit::Month, Unit::Day, Unit::Hour];

/// One key of the table's partitioning, as the catalog holds it.
#[derive(Debug, Clone)]
pub struct Key {
    pub index: i64,
    pub transform: String,
    pub column: String,
    pub column_type: String,
}

/// The time keys of a table's partitioning: the column, its type, and the
/// key index of each calendar field, coarsest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeKeys {
    pub column: String,
    pub column_type: String,
    pub fields: Vec<(Unit, i64)>,
}

impl TimeKeys {
    /// The partitioning's time keys, or why its partitions are not spans of
    /// time (the refusal names the table and says what would do).
    pub fn of(table: &str, keys: &[Key]) -> Result<TimeKeys, String> {
        let spec = keys
            .iter()
            .map(|k| format!("{}({})", k.transform, k.column))
            .collect::<Vec<_>>()
            .join(", ");
        if keys.is_empty() {
            return Err(format!(
                "{table} is not partitioned: retention drops whole partitions of a table partitioned by \
                 year(col)[, month(col)[, day(col)[, hour(col)]]] (DUCKLAKE_PARTITION_BY); rows of an \
                 unpartitioned table are not dropped here"
            ));
        }
        let calendar: Vec<(&Key, Unit)> = keys
            .iter()
            .filter_map(|k| Unit::of(&k.transform).map(|u| (k, u)))
            .collect();
        let Some((first, _)) = calendar.first() else {
            return Err(format!(
                "{table} is partitioned by {spec}: no year, month, day or hour key, so no partition \
                 is a span of time to age out"
            ));
        };
        if calendar.iter().any(|(k, _)| k.column != first.column) {
            return Err(format!(
                "{table} is partitioned by {spec}: calendar keys on more than one column, so a \
                 partition's age is not one span of time"
            ));
        }
        let mut fields: Vec<(Unit, i64)> = calendar.iter().map(|(k, u)| (*u, k.index)).collect();
        fields.sort();
        let units: Vec<Unit> = fields.iter().map(|f| f.0).collect();
        if units != CHAIN[..units.len()] {
            let col = &first.column;
            let want: Vec<String> = CHAIN[..CHAIN
                .iter()
                .position(|u| u == units.last().expect("not empty"))
                .expect("a calendar unit")
                + 1]
                .iter()
                .map(|u| format!("{}({col})", u.name()))
                .collect();
            return Err(format!(
                "{table} is partitioned by {spec}: DuckLake's calendar keys hold calendar fields \
                 ({}({col}) alone is the same value every {}), so these partitions are not spans \
                 of time; partition by {} for retention",
                units.last().expect("not empty").name(),
                match units.last() {
                    Some(Unit::Hour) => "day",
                    Some(Unit::Day) => "month",
                    _ => "year",
                },
                want.join(", ")
            ));
        }
        let t = first.column_type.to_ascii_lowercase();
        if !(t == "date" || t.starts_with("timestamp")) {
            return Err(format!(
                "{table}: the calendar keys are on {} of type {}, not a date or a timestamp",
                first.column, first.column_type
            ));
        }
        Ok(TimeKeys {
            column: first.column.clone(),
            column_type: first.column_type.clone(),
            fields,
        })
    }

    /// The finest field: the length of one partition.
    pub fn unit(&self) -> Unit {
        self.fields.last().expect("at least the year").0
    }

    /// The span `[start, end)` the values of the calendar fields (in
    /// [`TimeKeys::fields`] order) name, in UTC, as the writer computes
    /// them; None when a value is missing or no date.
    pub fn span(&self, values: &[Option<&str>]) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let mut n = [1i64; 4];
        n[3] = 0;
        for ((unit, _), v) in self.fields.iter().zip(values) {
            n[*unit as usize] = (*v)?.trim().parse().ok()?;
        }
        let date = NaiveDate::from_ymd_opt(
            i32::try_from(n[0]).ok()?,
            u32::try_from(n[1]).ok()?,
            u32::try_from(n[2]).ok()?,
        )?;
        let start = date.and_hms_opt(u32::try_from(n[3]).ok()?, 0, 0)?.and_utc();
        let end = match self.unit() {
            Unit::Year => start.checked_add_months(Months::new(12))?,
            Unit::Month => start.checked_add_months(Months::new(1))?,
            Unit::Day => start.checked_add_signed(TimeDelta::days(1))?,
            Unit::Hour => start.checked_add_signed(TimeDelta::hours(1))?,
        };
        Some((start, end))
    }

    /// `year=2026/month=3/day=1`, as the folders show it.
    pub fn label(&self, values: &[Option<&str>]) -> String {
        self.fields
            .iter()
            .zip(values)
            .map(|((u, _), v)| format!("{}={}", u.name(), v.unwrap_or("NULL")))
            .collect::<Vec<_>>()
            .join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(index: i64, transform: &str, column: &str) -> Key {
        Key {
            index,
            transform: transform.into(),
            column: column.into(),
            column_type: "timestamptz".into(),
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    #[test]
    fn only_a_chain_from_the_year_down_is_a_span_of_time() {
        let ok = TimeKeys::of(
            "events",
            &[
                key(0, "identity", "team_id"),
                key(3, "day", "ts"),
                key(1, "year", "ts"),
                key(2, "month", "ts"),
            ],
        )
        .unwrap();
        assert_eq!(
            ok.fields,
            [(Unit::Year, 1), (Unit::Month, 2), (Unit::Day, 3)]
        );
        assert_eq!(ok.unit(), Unit::Day);

        let none = TimeKeys::of("events", &[]).unwrap_err();
        assert!(none.contains("events is not partitioned"), "{none}");
        let team = TimeKeys::of("events", &[key(0, "identity", "team_id")]).unwrap_err();
        assert!(team.contains("no year, month, day or hour key"), "{team}");
        let day = TimeKeys::of("events", &[key(0, "day", "ts")]).unwrap_err();
        assert!(
            day.contains("day(ts) alone is the same value every month"),
            "{day}"
        );
        assert!(
            day.contains("partition by year(ts), month(ts), day(ts)"),
            "{day}"
        );
        let gap = TimeKeys::of("events", &[key(0, "year", "ts"), key(1, "day", "ts")]).unwrap_err();
        assert!(
            gap.contains("partition by year(ts), month(ts), day(ts)"),
            "{gap}"
        );
        let two = TimeKeys::of("events", &[key(0, "year", "ts"), key(1, "year", "d")]).unwrap_err();
        assert!(two.contains("more than one column"), "{two}");
        let mut text = key(0, "year", "name");
        text.column_type = "varchar".into();
        let typed = TimeKeys::of("events", &[text]).unwrap_err();
        assert!(typed.contains("not a date or a timestamp"), "{typed}");
    }

    #[test]
    fn values_name_the_span_they_cover() {
        let keys = |ts: &[&str]| {
            let ks: Vec<Key> = ts
                .iter()
                .enumerate()
                .map(|(i, t)| key(i as i64, t, "ts"))
                .collect();
            TimeKeys::of("events", &ks).unwrap()
        };
        let hour = keys(&["year", "month", "day", "hour"]);
        assert_eq!(
            hour.span(&[Some("2026"), Some("2"), Some("28"), Some("23")]),
            Some((at("2026-02-28T23:00:00Z"), at("2026-03-01T00:00:00Z")))
        );
        let day = keys(&["year", "month", "day"]);
        assert_eq!(
            day.span(&[Some("2024"), Some("2"), Some("29")]),
            Some((at("2024-02-29T00:00:00Z"), at("2024-03-01T00:00:00Z")))
        );
        assert_eq!(
            day.label(&[Some("2024"), Some("2"), Some("29")]),
            "year=2024/month=2/day=29"
        );
        let month = keys(&["year", "month"]);
        assert_eq!(
            month.span(&[Some("2026"), Some("12")]),
            Some((at("2026-12-01T00:00:00Z"), at("2027-01-01T00:00:00Z")))
        );
        let year = keys(&["year"]);
        assert_eq!(
            year.span(&[Some("1969")]),
            Some((at("1969-01-01T00:00:00Z"), at("1970-01-01T00:00:00Z")))
        );
        // A NULL partition (rows without a time) or a value that is no
        // date is never a span, so never dropped.
        assert_eq!(day.span(&[Some("2026"), None, Some("1")]), None);
        assert_eq!(day.span(&[Some("2026"), Some("2"), Some("30")]), None);
        assert_eq!(day.span(&[Some("2026"), Some("x"), Some("1")]), None);
    }
}
