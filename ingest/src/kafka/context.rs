//! The consumer's librdkafka context: statistics as gauges, client errors
//! logged, counted and the last one kept (startup reports it), and the MSK
//! IAM token when SASL/OAUTHBEARER is configured.
use std::error::Error;
use std::sync::Mutex;

use rdkafka::client::OAuthToken;
use rdkafka::consumer::ConsumerContext;
use rdkafka::{ClientContext, Statistics};

use millpond_shared::metrics::{error_type, IngestMetrics};

use super::msk_iam::MskIamTokens;

pub struct KafkaContext {
    metrics: IngestMetrics,
    last_error: Mutex<Option<String>>,
    msk_iam: Option<MskIamTokens>,
}

impl KafkaContext {
    pub fn new(metrics: IngestMetrics, msk_iam: Option<MskIamTokens>) -> Self {
        KafkaContext {
            metrics,
            last_error: Mutex::new(None),
            msk_iam,
        }
    }

    /// The last client error librdkafka reported (TLS, SASL, transport).
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap().clone()
    }

    fn record_error(&self, text: String) {
        self.metrics
            .errors
            .with_label_values(&[error_type::KAFKA])
            .inc();
        *self.last_error.lock().unwrap() = Some(text);
    }
}

impl ClientContext for KafkaContext {
    // Only asked for with sasl.mechanism=OAUTHBEARER (librdkafka's own
    // OIDC flow refreshes without us).
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn stats(&self, s: Statistics) {
        let m = &self.metrics;
        m.rdkafka_replyq.set(s.replyq);
        m.rdkafka_msg_cnt.set(s.msg_cnt as i64);
        m.rdkafka_msg_size.set(s.msg_size as i64);
        for (name, b) in &s.brokers {
            if let Some(rtt) = &b.rtt {
                m.rdkafka_broker_rtt_avg
                    .with_label_values(&[name.as_str()])
                    .set(rtt.avg as f64 / 1e6);
                m.rdkafka_broker_rtt_p99
                    .with_label_values(&[name.as_str()])
                    .set(rtt.p99 as f64 / 1e6);
            }
        }
    }

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        tracing::warn!(error = %error, reason, "kafka client error");
        self.record_error(format!("{error}: {reason}"));
    }

    fn generate_oauth_token(&self, _config: Option<&str>) -> Result<OAuthToken, Box<dyn Error>> {
        let Some(tokens) = &self.msk_iam else {
            return Err("SASL/OAUTHBEARER token requested but MSK IAM is not configured".into());
        };
        match tokens.token() {
            Ok(t) => {
                tracing::info!(
                    region = %tokens.region,
                    expires_at_ms = t.expires_at_ms,
                    "signed a new MSK IAM token"
                );
                Ok(OAuthToken {
                    token: t.token,
                    principal_name: "millpond-ingest".into(),
                    lifetime_ms: t.expires_at_ms,
                })
            }
            Err(e) => {
                tracing::warn!(error = %e, "no MSK IAM token; librdkafka retries in 10 s");
                self.record_error(e.to_string());
                Err(e.into())
            }
        }
    }
}

impl ConsumerContext for KafkaContext {}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use millpond_shared::config::Secret;
    use millpond_shared::metrics::new_registry;

    use super::*;
    use crate::kafka::aws_credentials::{CredentialSource, FixedCredentials};
    use crate::kafka::msk_iam::AwsKeys;

    struct Refused;
    impl CredentialSource for Refused {
        fn keys(&self) -> Result<AwsKeys, String> {
            Err("no web identity token".into())
        }
    }

    fn context(source: Box<dyn CredentialSource>) -> KafkaContext {
        let metrics = IngestMetrics::new(&new_registry("p", ""));
        KafkaContext::new(
            metrics,
            Some(MskIamTokens {
                region: "us-east-1".into(),
                credentials: source,
                clock: || UNIX_EPOCH + Duration::from_secs(1_900_000_000),
            }),
        )
    }

    #[test]
    fn the_callback_hands_librdkafka_the_token_and_its_expiry() {
        let ctx = context(Box::new(FixedCredentials(AwsKeys {
            key_id: "AKIDTEST".into(),
            secret: Secret::new("s3cr3t-value"),
            session_token: None,
        })));
        let t = ctx.generate_oauth_token(None).unwrap();
        assert_eq!(t.lifetime_ms, 1_900_000_900_000);
        assert!(!t.principal_name.is_empty());
        assert!(t.token.len() > 300, "{}", t.token.len());
        assert_eq!(ctx.last_error(), None);
    }

    /// librdkafka asks for the next token 80 % into the current one's
    /// remaining lifetime, so before it expires: with a token 10 s from
    /// expiry (a signing clock 890 s behind), the callback runs again after
    /// about 8 s. MSK IAM's 900 s tokens are so renewed every 12 minutes.
    #[test]
    fn librdkafka_asks_for_a_new_token_before_the_current_one_expires() {
        use rdkafka::consumer::BaseConsumer;
        use std::sync::{Arc, Mutex};
        use std::time::{Instant, SystemTime};

        struct Counted(Arc<Mutex<Vec<Instant>>>);
        impl CredentialSource for Counted {
            fn keys(&self) -> Result<AwsKeys, String> {
                self.0.lock().unwrap().push(Instant::now());
                Ok(AwsKeys {
                    key_id: "AKIDTEST".into(),
                    secret: Secret::new("s3cr3t-value"),
                    session_token: None,
                })
            }
        }
        fn ten_s_left() -> SystemTime {
            SystemTime::now() + Duration::from_secs(10) - crate::kafka::msk_iam::EXPIRES
        }
        let signed = Arc::new(Mutex::new(Vec::new()));
        let ctx = KafkaContext::new(
            IngestMetrics::new(&new_registry("p", "")),
            Some(MskIamTokens {
                region: "us-east-1".into(),
                credentials: Box::new(Counted(signed.clone())),
                clock: ten_s_left,
            }),
        );
        // No broker is needed: the client asks for tokens on its own clock.
        let consumer: BaseConsumer<KafkaContext> = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:9")
            .set("group.id", "token-refresh")
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", "OAUTHBEARER")
            .create_with_context(ctx)
            .unwrap();
        let until = Instant::now() + Duration::from_secs(15);
        while signed.lock().unwrap().len() < 2 && Instant::now() < until {
            let _ = consumer.poll(Duration::from_millis(100));
        }
        let signed = signed.lock().unwrap().clone();
        assert!(signed.len() >= 2, "one token in 15 s: {signed:?}");
        let gap = signed[1] - signed[0];
        // 80 % of 9-10 s (the expiry is in whole seconds), before expiry.
        assert!(
            gap > Duration::from_secs(6) && gap < Duration::from_secs(10),
            "{gap:?}"
        );
    }

    #[test]
    fn a_credential_failure_is_an_error_librdkafka_retries_and_startup_reports() {
        let ctx = context(Box::new(Refused));
        let err = ctx.generate_oauth_token(None).err().unwrap().to_string();
        assert!(err.contains("no web identity token"), "{err}");
        assert!(ctx.last_error().unwrap().contains("no web identity token"));
        let plain = KafkaContext::new(IngestMetrics::new(&new_registry("p", "")), None);
        assert!(plain.generate_oauth_token(None).is_err());
    }
}
