//! The maintenance lock of a Postgres catalog: a session-level advisory
//! lock, taken and held by a connection of its own for the whole run (not
//! DuckDB's, whose pool resets and recycles connections, which would drop
//! it). Advisory locks belong to a database, so every run on the catalog's
//! database shares this one. Postgres releases it when the connection
//! ends, however the run ends.
use std::time::Duration;

use anyhow::Context;
use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};
use postgres::config::SslMode as PgSslMode;
use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};
use postgres_openssl::MakeTlsConnector;

use millpond_writer::lake_api::{Catalog, RootCert, SslMode};

use super::{busy, waiting, Holder};

/// The lock's key: "mpl-lake" in ASCII as one BIGINT (the writers' commit
/// lock is "millpond"). `pg_locks` shows it as an advisory lock with
/// classid = the high 32 bits, objid = the low ones, objsubid 1.
pub const KEY: i64 = i64::from_be_bytes(*b"mpl-lake");

pub struct PgLock {
    client: Client,
}

impl PgLock {
    /// Still held by this session: the connection answers and Postgres
    /// lists the lock as this backend's.
    pub fn check(&mut self) -> anyhow::Result<()> {
        let (hi, lo) = ((KEY >> 32) & 0xffff_ffff, KEY & 0xffff_ffff);
        let held: anyhow::Result<i64> = self
            .client
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory' \
                 AND granted AND objsubid = 1 AND classid::bigint = $1 AND objid::bigint = $2",
                &[&hi, &lo],
            )
            .map(|r| r.get(0))
            .map_err(Into::into);
        match held {
            Ok(n) if n > 0 => Ok(()),
            Ok(_) => anyhow::bail!("the maintenance lock is no longer held by this run; stopping before its next step"),
            Err(e) => Err(e.context(
                "the maintenance lock's connection ended (and the lock with it); stopping before the next step",
            )),
        }
    }
}

impl Drop for PgLock {
    fn drop(&mut self) {
        let _ = self
            .client
            .execute("SELECT pg_advisory_unlock($1)", &[&KEY]);
    }
}

pub fn take(
    catalog: &Catalog,
    me: &Holder,
    wait: Duration,
    target: &str,
) -> anyhow::Result<PgLock> {
    let mut client = connect(catalog, &me.application_name())
        .with_context(|| format!("connect to {target} for the maintenance lock"))?;
    // The server ends an idle session (idle_session_timeout, Postgres 14+)
    // only if told to; and it notices a run whose node died within about a
    // minute, releasing the lock, rather than after the system's two hours.
    for setting in [
        "SET idle_session_timeout = 0",
        "SET tcp_keepalives_idle = 30",
        "SET tcp_keepalives_interval = 10",
        "SET tcp_keepalives_count = 3",
    ] {
        if let Err(e) = client.batch_execute(setting) {
            tracing::debug!(setting, error = %e, "a maintenance lock session setting was refused");
        }
    }
    let taken: bool = client
        .query_one("SELECT pg_try_advisory_lock($1)", &[&KEY])?
        .get(0);
    if taken {
        return Ok(PgLock { client });
    }
    let first = holder(&mut client)?;
    if wait.is_zero() {
        return Err(busy(target, &first, wait));
    }
    waiting(target, &first, wait);
    client.batch_execute(&format!(
        "SET lock_timeout = '{}ms'",
        wait.as_millis().max(1)
    ))?;
    match client.execute("SELECT pg_advisory_lock($1)", &[&KEY]) {
        Ok(_) => {
            client.batch_execute("RESET lock_timeout")?;
            Ok(PgLock { client })
        }
        Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
            let now = holder(&mut client).unwrap_or(first);
            Err(busy(target, &now, wait))
        }
        Err(e) => Err(e.into()),
    }
}

/// The session holding the lock: Postgres's pid, its application_name
/// (`millpond-lake <command> <host> <pid>` for one of ours), where it
/// connected from and since when it has held the lock.
fn holder(client: &mut Client) -> anyhow::Result<String> {
    let (hi, lo) = ((KEY >> 32) & 0xffff_ffff, KEY & 0xffff_ffff);
    let rows = client.query(
        "SELECT l.pid, coalesce(a.application_name, '')::text, \
                coalesce(host(a.client_addr), 'a local socket'), \
                coalesce(to_char(a.state_change AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), '?'), \
                coalesce(a.usename::text, '?') \
         FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid \
         WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND l.classid::bigint = $1 AND l.objid::bigint = $2",
        &[&hi, &lo],
    )?;
    Ok(match rows.first() {
        Some(r) => format!(
            "{} (Postgres pid {}, user {}, from {}, since {})",
            match r.get::<_, String>(1) {
                name if name.is_empty() => "a session with no application_name".to_owned(),
                name => name,
            },
            r.get::<_, i32>(0),
            r.get::<_, String>(4),
            r.get::<_, String>(2),
            r.get::<_, String>(3),
        ),
        None => "a session that just released it".to_owned(),
    })
}

/// A connection with the catalog's own settings and TLS (DUCKLAKE_RDS_*).
fn connect(catalog: &Catalog, application_name: &str) -> anyhow::Result<Client> {
    let Catalog::Postgres {
        host,
        port,
        database,
        username,
        password,
        tls,
    } = catalog
    else {
        unreachable!("a Postgres catalog")
    };
    let mut config = Config::new();
    config
        .host(host)
        .port(*port)
        .dbname(database)
        .user(username)
        .password(password.expose())
        .application_name(application_name)
        .connect_timeout(Duration::from_secs(30))
        // The connection idles while the run works: keepalives tell a
        // dead catalog link from a quiet one.
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(30))
        .keepalives_interval(Duration::from_secs(10))
        .keepalives_retries(3);
    if tls.mode == SslMode::Disable {
        config.ssl_mode(PgSslMode::Disable);
        return Ok(config.connect(NoTls)?);
    }
    let mut builder = SslConnector::builder(SslMethod::tls())?;
    match (tls.mode, &tls.root_cert) {
        // As libpq: prefer and require encrypt without checking who answers.
        (SslMode::Prefer | SslMode::Require, _) => builder.set_verify(SslVerifyMode::NONE),
        (_, Some(RootCert::File(path))) => builder
            .set_ca_file(path)
            .with_context(|| format!("read DUCKLAKE_RDS_SSLROOTCERT {}", path.display()))?,
        (_, Some(RootCert::System) | None) => builder.set_default_verify_paths()?,
    }
    let mut connector = MakeTlsConnector::new(builder.build());
    if tls.mode == SslMode::VerifyCa {
        connector.set_callback(|c, _| {
            c.set_verify_hostname(false);
            Ok(())
        });
    }
    config.ssl_mode(match tls.mode {
        SslMode::Prefer => PgSslMode::Prefer,
        _ => PgSslMode::Require,
    });
    Ok(config.connect(connector)?)
}
