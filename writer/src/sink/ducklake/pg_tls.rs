//! TLS to the Postgres catalog: DUCKLAKE_RDS_SSLMODE and
//! DUCKLAKE_RDS_SSLROOTCERT, checked at startup. `connect` writes them into
//! the libpq connection string (the postgres extension's own libpq).
use std::path::PathBuf;

use millpond_shared::config::EnvReader;

/// libpq's `sslmode`, as DUCKLAKE_RDS_SSLMODE names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plaintext only.
    Disable,
    /// TLS when the server offers it, else plaintext; the certificate is
    /// not checked (libpq checks it only if ~/.postgresql/root.crt
    /// exists). The default, as in the original.
    Prefer,
    /// TLS or no connection; the certificate is not checked (same caveat).
    Require,
    /// TLS with a certificate signed by a CA of the root certificate file.
    VerifyCa,
    /// As verify-ca, and the certificate names DUCKLAKE_RDS_HOST.
    VerifyFull,
}

const MODES: [(&str, SslMode); 5] = [
    ("disable", SslMode::Disable),
    ("prefer", SslMode::Prefer),
    ("require", SslMode::Require),
    ("verify-ca", SslMode::VerifyCa),
    ("verify-full", SslMode::VerifyFull),
];

impl SslMode {
    /// The libpq keyword value, also the variable's spelling.
    pub fn as_str(self) -> &'static str {
        MODES
            .iter()
            .find(|(_, m)| *m == self)
            .map(|(s, _)| *s)
            .expect("every mode is listed")
    }

    fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

/// Whom the catalog server's certificate must be signed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of CA certificates (e.g. the RDS bundle).
    File(PathBuf),
    /// libpq's `system`: OpenSSL's default trusted roots (verify-full only).
    System,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgTls {
    pub mode: SslMode,
    /// Set exactly when `mode` verifies the certificate.
    pub root_cert: Option<RootCert>,
}

impl PgTls {
    /// The TLS settings of the Postgres catalog. A root certificate is
    /// required with verify-ca/verify-full (libpq's fallback,
    /// ~/.postgresql/root.crt, is not used: what is trusted is said in the
    /// config) and refused with the other modes, where libpq would either
    /// ignore it or quietly turn `require` into verify-ca.
    pub fn parse(r: &mut EnvReader<'_>) -> Option<PgTls> {
        let names: Vec<&str> = MODES.iter().map(|(s, _)| *s).collect();
        let raw = r.choice("DUCKLAKE_RDS_SSLMODE", "prefer", &names);
        let mode = MODES
            .iter()
            .find(|(s, _)| *s == raw)
            .map(|(_, m)| *m)
            .expect("choice returns a listed word");
        let root = r.optional("DUCKLAKE_RDS_SSLROOTCERT");
        let root_cert = match (root, mode.verifies()) {
            (None, false) => None,
            (Some(_), false) => {
                r.errors.push(
                    "DUCKLAKE_RDS_SSLROOTCERT",
                    format!(
                        "is used only with DUCKLAKE_RDS_SSLMODE=verify-ca or verify-full (DUCKLAKE_RDS_SSLMODE is {})",
                        mode.as_str()
                    ),
                );
                return None;
            }
            (None, true) => {
                r.errors.push(
                    "DUCKLAKE_RDS_SSLROOTCERT",
                    format!(
                        "is required with DUCKLAKE_RDS_SSLMODE={}: the path of a PEM file of the CA certificates that sign the catalog server's certificate{}",
                        mode.as_str(),
                        if mode == SslMode::VerifyFull { ", or `system` for the trusted roots of the system" } else { "" }
                    ),
                );
                return None;
            }
            (Some(v), true) if v == "system" => {
                if mode != SslMode::VerifyFull {
                    r.errors.push(
                        "DUCKLAKE_RDS_SSLROOTCERT",
                        "`system` needs DUCKLAKE_RDS_SSLMODE=verify-full (libpq refuses it with verify-ca)",
                    );
                    return None;
                }
                Some(RootCert::System)
            }
            (Some(v), true) => {
                if let Err(why) = check_pem(&v) {
                    r.errors.push("DUCKLAKE_RDS_SSLROOTCERT", why);
                    return None;
                }
                Some(RootCert::File(PathBuf::from(v)))
            }
        };
        Some(PgTls { mode, root_cert })
    }

    /// The settings in words, for an error about the catalog connection.
    pub fn describe(&self) -> String {
        let mut out = format!("DUCKLAKE_RDS_SSLMODE={}", self.mode.as_str());
        match &self.root_cert {
            Some(RootCert::File(p)) => {
                out.push_str(&format!(", DUCKLAKE_RDS_SSLROOTCERT={}", p.display()))
            }
            Some(RootCert::System) => out.push_str(", DUCKLAKE_RDS_SSLROOTCERT=system"),
            None => {}
        }
        out
    }
}

/// The root certificate file can be read and holds a PEM certificate, so a
/// wrong path fails at startup, not at the first connection.
fn check_pem(path: &str) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {path:?}: {e}"))?;
    if !String::from_utf8_lossy(&bytes).contains("-----BEGIN CERTIFICATE-----") {
        return Err(format!(
            "{path:?} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use millpond_shared::config::Env;

    /// The parsed settings, or each error as `VAR: message`.
    fn parse(pairs: &[(&str, &str)]) -> Result<PgTls, Vec<String>> {
        let env = Env::from_pairs(pairs.iter().copied());
        let mut r = EnvReader::new(&env);
        let tls = PgTls::parse(&mut r);
        match r.finish() {
            Ok(()) => Ok(tls.unwrap()),
            Err(e) => Err(e
                .0
                .iter()
                .map(|e| format!("{}: {}", e.var, e.message))
                .collect()),
        }
    }

    fn one_error(pairs: &[(&str, &str)]) -> String {
        let errs = parse(pairs).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        errs[0].clone()
    }

    #[test]
    fn sslmode_defaults_to_prefer_and_takes_the_libpq_modes() {
        assert_eq!(
            parse(&[]).unwrap(),
            PgTls {
                mode: SslMode::Prefer,
                root_cert: None
            }
        );
        for (name, mode) in MODES {
            if !mode.verifies() {
                let tls = parse(&[("DUCKLAKE_RDS_SSLMODE", name)]).unwrap();
                assert_eq!((tls.mode, tls.root_cert), (mode, None));
            }
            assert_eq!(mode.as_str(), name);
        }
        assert_eq!(
            parse(&[("DUCKLAKE_RDS_SSLMODE", "Require")]).unwrap().mode,
            SslMode::Require
        );
        for bad in ["allow", "verify_full", "verify full", "on"] {
            let err = one_error(&[("DUCKLAKE_RDS_SSLMODE", bad)]);
            assert!(
                err.starts_with("DUCKLAKE_RDS_SSLMODE: must be one of disable, prefer, require, verify-ca, verify-full"),
                "{err}"
            );
        }
    }

    #[test]
    fn verifying_modes_need_a_readable_root_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca bundle's.pem");
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let key = dir.path().join("key.pem");
        std::fs::write(&key, "-----BEGIN PRIVATE KEY-----\n").unwrap();
        let (ca, key) = (ca.to_str().unwrap(), key.to_str().unwrap());
        let missing = dir.path().join("missing.pem");
        let missing = missing.to_str().unwrap();

        for mode in ["verify-ca", "verify-full"] {
            let tls = parse(&[
                ("DUCKLAKE_RDS_SSLMODE", mode),
                ("DUCKLAKE_RDS_SSLROOTCERT", ca),
            ])
            .unwrap();
            assert_eq!(tls.root_cert, Some(RootCert::File(ca.into())));
            let err = one_error(&[("DUCKLAKE_RDS_SSLMODE", mode)]);
            assert!(
                err.starts_with(&format!(
                    "DUCKLAKE_RDS_SSLROOTCERT: is required with DUCKLAKE_RDS_SSLMODE={mode}"
                )),
                "{err}"
            );
            let err = one_error(&[
                ("DUCKLAKE_RDS_SSLMODE", mode),
                ("DUCKLAKE_RDS_SSLROOTCERT", missing),
            ]);
            assert!(
                err.starts_with("DUCKLAKE_RDS_SSLROOTCERT: cannot read") && err.contains(missing),
                "{err}"
            );
            let err = one_error(&[
                ("DUCKLAKE_RDS_SSLMODE", mode),
                ("DUCKLAKE_RDS_SSLROOTCERT", key),
            ]);
            assert!(err.contains("holds no PEM certificate"), "{err}");
        }
        let system = [
            ("DUCKLAKE_RDS_SSLMODE", "verify-full"),
            ("DUCKLAKE_RDS_SSLROOTCERT", "system"),
        ];
        assert_eq!(parse(&system).unwrap().root_cert, Some(RootCert::System));
        let err = one_error(&[
            ("DUCKLAKE_RDS_SSLMODE", "verify-ca"),
            ("DUCKLAKE_RDS_SSLROOTCERT", "system"),
        ]);
        assert!(
            err.starts_with("DUCKLAKE_RDS_SSLROOTCERT: `system` needs"),
            "{err}"
        );
        // Not checked by the other modes: refused rather than ignored.
        for mode in [None, Some("disable"), Some("prefer"), Some("require")] {
            let mut pairs = vec![("DUCKLAKE_RDS_SSLROOTCERT", ca)];
            pairs.extend(mode.map(|m| ("DUCKLAKE_RDS_SSLMODE", m)));
            let err = one_error(&pairs);
            assert!(
                err.starts_with("DUCKLAKE_RDS_SSLROOTCERT: is used only with DUCKLAKE_RDS_SSLMODE=verify-ca or verify-full"),
                "{err}"
            );
        }
    }

    #[test]
    fn the_description_names_both_settings() {
        let tls = PgTls {
            mode: SslMode::VerifyFull,
            root_cert: Some(RootCert::File("/etc/rds/ca.pem".into())),
        };
        assert_eq!(
            tls.describe(),
            "DUCKLAKE_RDS_SSLMODE=verify-full, DUCKLAKE_RDS_SSLROOTCERT=/etc/rds/ca.pem"
        );
        let prefer = PgTls {
            mode: SslMode::Prefer,
            root_cert: None,
        };
        assert_eq!(prefer.describe(), "DUCKLAKE_RDS_SSLMODE=prefer");
    }
}
