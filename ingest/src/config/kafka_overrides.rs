//! KAFKA_CONSUMER_* overrides: librdkafka properties applied after
//! Millpond's own (`kafka::client`). Everything passes through, except the
//! properties that decide which records are delivered or when offsets are
//! stored and committed: an override there could commit offsets before the
//! lake holds their rows, or skip records without a trace. Those are
//! refused at startup, each naming its variable and why; a few may be set
//! to the value Millpond uses anyway.
use millpond_shared::config::{EnvReader, Secret};

const PREFIX: &str = "KAFKA_CONSUMER_";

/// What an override of a guarded property may be.
enum Allowed {
    /// Nothing: Millpond or another variable owns it.
    Never,
    /// Only `false` (librdkafka's spellings: `false`, `f`, `0`).
    False,
    /// Only this value (any letter case, as librdkafka reads it).
    Only(&'static str),
}

/// Guarded properties, as librdkafka names them (a topic-level one may also
/// come with the `topic.` prefix), with what may be set and why.
const GUARDED: &[(&str, Allowed, &str)] = &[
    (
        "enable.auto.commit",
        Allowed::False,
        "auto commit would commit offsets before the lake holds their rows, and a crash would then skip them; Millpond commits after the writer's acknowledgement",
    ),
    (
        // The topic-level legacy name `enable.auto.commit` is an alias of.
        "auto.commit.enable",
        Allowed::False,
        "auto commit would commit offsets before the lake holds their rows, and a crash would then skip them; Millpond commits after the writer's acknowledgement",
    ),
    (
        "enable.auto.offset.store",
        Allowed::False,
        "it would store the offset of every record handed to ingest, before the lake holds it, for any commit that takes stored offsets",
    ),
    (
        "offset.store.method",
        Allowed::Only("broker"),
        "offsets must be committed to the consumer group, where ingest resumes from",
    ),
    (
        "group.id",
        Allowed::Never,
        "set GROUP_ID instead: the committed offsets ingest resumes from are that group's",
    ),
    (
        "auto.offset.reset",
        Allowed::Never,
        "is not accepted; set KAFKA_AUTO_OFFSET_RESET (earliest or latest) instead",
    ),
    (
        "isolation.level",
        Allowed::Only("read_committed"),
        "read_uncommitted would deliver records of aborted transactions",
    ),
    (
        "enable.partition.eof",
        Allowed::False,
        "end-of-partition events would arrive as consume errors and cut every consume batch short",
    ),
    (
        "check.crcs",
        Allowed::False,
        "librdkafka skips a record that fails the check with only a consume error: it would be neither a row nor a dead letter, and its offset would be committed with its neighbours'",
    ),
];

/// The librdkafka property a KAFKA_CONSUMER_* variable sets
/// (`KAFKA_CONSUMER_SECURITY_PROTOCOL` -> `security.protocol`).
fn property(var: &str) -> String {
    var[PREFIX.len()..].to_ascii_lowercase().replace('_', ".")
}

/// Why `value` may not be set for `property`, if it may not.
fn refusal(property: &str, value: &str) -> Option<&'static str> {
    // librdkafka sets a property it does not know globally on the topic
    // configuration, without a leading `topic.`.
    let name = property.strip_prefix("topic.").unwrap_or(property);
    let (_, allowed, why) = GUARDED.iter().find(|(p, _, _)| *p == name)?;
    let ok = match allowed {
        Allowed::Never => false,
        Allowed::False => ["false", "f", "0"]
            .iter()
            .any(|f| value.eq_ignore_ascii_case(f)),
        Allowed::Only(v) => value.eq_ignore_ascii_case(v),
    };
    (!ok).then_some(*why)
}

/// The overrides to apply, property name first; each refused one is an
/// error naming its variable. Values may be credentials: never shown.
pub fn overrides(r: &mut EnvReader<'_>) -> Vec<(String, Secret)> {
    let mut out = Vec::new();
    for (var, value) in r.env().with_prefix(PREFIX) {
        let property = property(var);
        match refusal(&property, value) {
            // Unset, as an empty variable is everywhere.
            Some(_) if value.trim().is_empty() => {}
            Some(why) => r.errors.push(var, format!("cannot be overridden: {why}")),
            None => out.push((property, Secret::new(value))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::config::Env;

    fn read(pairs: &[(&str, &str)]) -> (Vec<(String, String)>, Vec<String>) {
        let env = Env::from_pairs(pairs.iter().copied());
        let mut r = EnvReader::new(&env);
        let got = overrides(&mut r)
            .into_iter()
            .map(|(k, v)| (k, v.expose().to_owned()))
            .collect();
        let vars = r.errors.vars().into_iter().map(str::to_owned).collect();
        (got, vars)
    }

    #[test]
    fn overrides_that_change_delivery_are_refused_naming_their_variable() {
        for (var, value) in [
            ("KAFKA_CONSUMER_ENABLE_AUTO_COMMIT", "true"),
            ("KAFKA_CONSUMER_enable_auto_commit", "1"),
            ("KAFKA_CONSUMER_AUTO_COMMIT_ENABLE", "true"),
            ("KAFKA_CONSUMER_TOPIC_ENABLE_AUTO_COMMIT", "true"),
            ("KAFKA_CONSUMER_TOPIC_AUTO_COMMIT_ENABLE", "t"),
            ("KAFKA_CONSUMER_ENABLE_AUTO_OFFSET_STORE", "true"),
            ("KAFKA_CONSUMER_OFFSET_STORE_METHOD", "file"),
            ("KAFKA_CONSUMER_TOPIC_OFFSET_STORE_METHOD", "file"),
            ("KAFKA_CONSUMER_GROUP_ID", "other-group"),
            ("KAFKA_CONSUMER_AUTO_OFFSET_RESET", "latest"),
            ("KAFKA_CONSUMER_Auto_Offset_Reset", "earliest"),
            ("KAFKA_CONSUMER_TOPIC_AUTO_OFFSET_RESET", "latest"),
            ("KAFKA_CONSUMER_ISOLATION_LEVEL", "read_uncommitted"),
            ("KAFKA_CONSUMER_ENABLE_PARTITION_EOF", "true"),
            ("KAFKA_CONSUMER_CHECK_CRCS", "true"),
        ] {
            let (got, vars) = read(&[(var, value)]);
            assert_eq!(vars, [var], "{var}={value}");
            assert!(got.is_empty(), "{var} is not passed through: {got:?}");
        }
    }

    #[test]
    fn every_refusal_is_reported_at_once_and_says_why_without_the_value() {
        let env = Env::from_pairs([
            ("KAFKA_CONSUMER_ENABLE_AUTO_COMMIT", "true"),
            ("KAFKA_CONSUMER_ENABLE_AUTO_OFFSET_STORE", "true"),
            ("KAFKA_CONSUMER_ISOLATION_LEVEL", "read_uncommitted"),
            ("KAFKA_CONSUMER_SASL_PASSWORD", "hunter2-sasl"),
        ]);
        let mut r = EnvReader::new(&env);
        let got = overrides(&mut r);
        assert_eq!(got.len(), 1);
        assert_eq!(r.errors.0.len(), 3);
        let shown = r.errors.to_string();
        assert!(
            shown.contains("KAFKA_CONSUMER_ENABLE_AUTO_COMMIT"),
            "{shown}"
        );
        assert!(
            shown.contains("before the lake holds their rows"),
            "{shown}"
        );
        assert!(shown.contains("aborted transactions"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn millpond_s_own_values_and_harmless_properties_pass_through() {
        let (got, vars) = read(&[
            ("KAFKA_CONSUMER_ENABLE_AUTO_COMMIT", "false"),
            ("KAFKA_CONSUMER_ENABLE_AUTO_OFFSET_STORE", "FALSE"),
            ("KAFKA_CONSUMER_ENABLE_PARTITION_EOF", "0"),
            ("KAFKA_CONSUMER_CHECK_CRCS", "f"),
            ("KAFKA_CONSUMER_ISOLATION_LEVEL", "read_committed"),
            ("KAFKA_CONSUMER_OFFSET_STORE_METHOD", "broker"),
            ("KAFKA_CONSUMER_AUTO_COMMIT_INTERVAL_MS", "1000"),
            ("KAFKA_CONSUMER_SASL_MECHANISM", "SCRAM-SHA-512"),
            ("KAFKA_CONSUMER_QUEUED_MAX_MESSAGES_KBYTES", "65536"),
            ("KAFKA_CONSUMER_TOPIC_METADATA_REFRESH_INTERVAL_MS", "60000"),
            ("KAFKA_CONSUMER_GROUP_INSTANCE_ID", "pod-0"),
            ("KAFKA_CONSUMER_AUTO_OFFSET_RESET", " "),
        ]);
        assert!(vars.is_empty(), "{vars:?}");
        let names: Vec<_> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "auto.commit.interval.ms",
                "check.crcs",
                "enable.auto.commit",
                "enable.auto.offset.store",
                "enable.partition.eof",
                "group.instance.id",
                "isolation.level",
                "offset.store.method",
                "queued.max.messages.kbytes",
                "sasl.mechanism",
                "topic.metadata.refresh.interval.ms",
            ]
        );
        assert!(got.contains(&("sasl.mechanism".into(), "SCRAM-SHA-512".into())));
    }
}
