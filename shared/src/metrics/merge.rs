//! One exposition from two processes: ingest serves its own series and the
//! writer's on the pod's main port, so one scrape shows the whole pod as the
//! original's single process did.
//!
//! Both processes take their metric definitions from this crate, so a
//! family both export has one HELP and one TYPE: it is written once, with
//! the samples of both. No series is exported by both today; should one be,
//! the writer's copy carries `process="writer"` rather than being summed
//! (a sum would read as a counter reset whenever the writer restarts) or
//! dropped.
use std::collections::{HashMap, HashSet};

/// The label that tells the writer's copy of a series ingest also exports.
pub const WRITER_LABEL: (&str, &str) = ("process", "writer");

/// One metric family of a text exposition: its header lines and samples.
#[derive(Debug, Default)]
struct Family {
    name: String,
    header: Vec<String>,
    samples: Vec<String>,
}

/// `own`'s families, then `other`'s appended: a family both have gets
/// `other`'s samples after `own`'s, under `own`'s header.
pub fn merge(own: &str, other: &str) -> String {
    let mut families = parse(own);
    let index: HashMap<String, usize> = families
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.clone(), i))
        .collect();
    for family in parse(other) {
        let Some(&i) = index.get(&family.name) else {
            families.push(family);
            continue;
        };
        let theirs = &mut families[i];
        let keys: HashSet<String> = theirs.samples.iter().map(|s| series_key(s)).collect();
        for sample in family.samples {
            let sample = if keys.contains(&series_key(&sample)) {
                with_label(&sample, WRITER_LABEL)
            } else {
                sample
            };
            theirs.samples.push(sample);
        }
    }
    let mut out = String::with_capacity(own.len() + other.len());
    for f in families {
        for line in f.header.iter().chain(&f.samples) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn parse(text: &str) -> Vec<Family> {
    let mut families: Vec<Family> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(rest) = line
            .strip_prefix("# HELP ")
            .or_else(|| line.strip_prefix("# TYPE "))
        {
            let name = rest.split_whitespace().next().unwrap_or_default();
            match families.last_mut() {
                Some(f) if f.name == name && f.samples.is_empty() => f.header.push(line.to_owned()),
                _ => families.push(Family {
                    name: name.to_owned(),
                    header: vec![line.to_owned()],
                    samples: Vec::new(),
                }),
            }
        } else if line.starts_with('#') {
            // A comment belongs to whatever follows it.
            match families.last_mut() {
                Some(f) if f.samples.is_empty() => f.header.push(line.to_owned()),
                _ => families.push(Family {
                    header: vec![line.to_owned()],
                    ..Family::default()
                }),
            }
        } else {
            let name = metric_name(line);
            match families.last_mut() {
                Some(f) if f.name.is_empty() || belongs(name, &f.name) => {
                    if f.name.is_empty() {
                        f.name = name.to_owned();
                    }
                    f.samples.push(line.to_owned())
                }
                _ => families.push(Family {
                    name: name.to_owned(),
                    header: Vec::new(),
                    samples: vec![line.to_owned()],
                }),
            }
        }
    }
    families
}

/// A histogram's or summary's samples carry suffixes of the family's name.
fn belongs(sample: &str, family: &str) -> bool {
    sample == family
        || sample
            .strip_prefix(family)
            .is_some_and(|s| ["_bucket", "_sum", "_count"].contains(&s))
}

fn metric_name(line: &str) -> &str {
    let end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    &line[..end]
}

/// The name and labels of a sample line, labels sorted: two processes may
/// write one series' labels in different orders.
fn series_key(line: &str) -> String {
    let name = metric_name(line);
    let Some(end) = labels_end(line) else {
        return name.to_owned();
    };
    let inner = &line[name.len() + 1..end];
    let mut pairs = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in inner.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                pairs.push(inner[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    pairs.push(inner[start..].trim());
    pairs.retain(|p| !p.is_empty());
    pairs.sort_unstable();
    format!("{name}{{{}}}", pairs.join(","))
}

/// The byte index of the `}` closing a sample's labels, if it has labels.
/// Label values are quoted and may hold `}`, spaces and escaped quotes.
fn labels_end(line: &str) -> Option<usize> {
    let open = line.find('{')?;
    if line[..open].contains(char::is_whitespace) {
        return None;
    }
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in line.char_indices().skip(open + 1) {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

fn with_label(line: &str, (name, value): (&str, &str)) -> String {
    match labels_end(line) {
        Some(_) => {
            let open = line.find('{').expect("labels_end found it");
            format!(
                "{}{{{name}=\"{value}\",{}",
                &line[..open],
                &line[open + 1..]
            )
        }
        None => {
            let end = metric_name(line).len();
            format!("{}{{{name}=\"{value}\"}}{}", &line[..end], &line[end..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INGEST: &str = "\
# HELP millpond_errors_total Errors by type
# TYPE millpond_errors_total counter
millpond_errors_total{pipeline=\"p\",type=\"flight\"} 2
millpond_errors_total{pipeline=\"p\",type=\"kafka\"} 1
# HELP millpond_records_consumed_total Records consumed
# TYPE millpond_records_consumed_total counter
millpond_records_consumed_total{partition=\"0\",pipeline=\"p\"} 10
";

    const WRITER: &str = "\
# HELP millpond_errors_total Errors by type
# TYPE millpond_errors_total counter
millpond_errors_total{pipeline=\"p\",type=\"flight\"} 5
millpond_errors_total{pipeline=\"p\",type=\"schema\"} 3
# HELP millpond_flush_duration_seconds Time to make one flush durable
# TYPE millpond_flush_duration_seconds histogram
millpond_flush_duration_seconds_bucket{pipeline=\"p\",le=\"+Inf\"} 4
millpond_flush_duration_seconds_sum{pipeline=\"p\"} 1.5
millpond_flush_duration_seconds_count{pipeline=\"p\"} 4
# HELP millpond_records_written_total Rows durably written
# TYPE millpond_records_written_total counter
millpond_records_written_total 9
";

    #[test]
    fn families_are_written_once_with_both_processes_samples() {
        let merged = merge(INGEST, WRITER);
        assert_eq!(merged.matches("# TYPE millpond_errors_total").count(), 1);
        assert_eq!(merged.matches("# HELP millpond_errors_total").count(), 1);
        let errors: Vec<&str> = merged
            .lines()
            .filter(|l| l.starts_with("millpond_errors_total"))
            .collect();
        assert_eq!(
            errors,
            [
                "millpond_errors_total{pipeline=\"p\",type=\"flight\"} 2",
                "millpond_errors_total{pipeline=\"p\",type=\"kafka\"} 1",
                // The one series both export: the writer's copy is told apart.
                "millpond_errors_total{process=\"writer\",pipeline=\"p\",type=\"flight\"} 5",
                "millpond_errors_total{pipeline=\"p\",type=\"schema\"} 3",
            ]
        );
        // The writer's own families follow, whole and in order.
        let tail = &merged[merged.find("# HELP millpond_flush_duration").unwrap()..];
        assert!(tail.starts_with(&WRITER[WRITER.find("# HELP millpond_flush").unwrap()..]));
        assert!(
            merged.contains("millpond_records_consumed_total{partition=\"0\",pipeline=\"p\"} 10\n")
        );
        assert_eq!(
            merged.lines().count(),
            INGEST.lines().count() + WRITER.lines().count() - 2
        );
    }

    #[test]
    fn a_family_only_one_side_has_is_left_as_it_is() {
        assert_eq!(merge(INGEST, ""), INGEST);
        assert_eq!(merge("", WRITER), WRITER);
    }

    #[test]
    fn one_series_is_one_whatever_the_order_of_its_labels() {
        let own = "# TYPE m counter\nm{a=\"1\",b=\"2\"} 1\n";
        let other = "# TYPE m counter\nm{b=\"2\",a=\"1\"} 2\nm{b=\"3\",a=\"1\"} 4\n";
        assert_eq!(
            merge(own, other),
            "# TYPE m counter\nm{a=\"1\",b=\"2\"} 1\nm{process=\"writer\",b=\"2\",a=\"1\"} 2\nm{b=\"3\",a=\"1\"} 4\n"
        );
    }

    #[test]
    fn a_label_value_with_braces_and_quotes_is_one_series() {
        let own = "# TYPE m counter\nm{v=\"a} \\\"b\"} 1\n";
        let other = "# TYPE m counter\nm{v=\"a} \\\"b\"} 2\nm 3\n";
        let merged = merge(own, other);
        assert_eq!(
            merged,
            "# TYPE m counter\nm{v=\"a} \\\"b\"} 1\nm{process=\"writer\",v=\"a} \\\"b\"} 2\nm 3\n"
        );
        assert_eq!(with_label("m 3", WRITER_LABEL), "m{process=\"writer\"} 3");
    }

    /// A real registry's rendering merges with another into an exposition
    /// in which every family is contiguous and declared once.
    #[test]
    fn two_registries_merge_into_a_valid_exposition() {
        let ingest = crate::metrics::new_registry("p", "local");
        crate::metrics::IngestMetrics::new(&ingest);
        let writer = crate::metrics::new_registry("p", "local");
        let w = crate::metrics::WriterMetrics::new(&writer);
        w.errors.with_label_values(&["schema"]).inc();
        let merged = merge(
            &crate::metrics::render(&ingest),
            &crate::metrics::render(&writer),
        );
        let mut seen = HashSet::new();
        for line in merged.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = line.split_whitespace().nth(2).unwrap();
            assert!(seen.insert(name.to_owned()), "{name} declared twice");
        }
        assert!(seen.contains("millpond_records_written_total"));
        assert!(
            seen.contains("millpond_records_consumed_total")
                || seen.contains("millpond_buffer_fullness")
        );
        let schema = merged
            .lines()
            .find(|l| l.starts_with("millpond_errors_total{") && l.contains("type=\"schema\""))
            .expect("the writer's series");
        assert!(
            schema.ends_with(" 1") && !schema.contains("process="),
            "{schema}"
        );
    }
}
