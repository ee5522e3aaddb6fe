use super::*;
use millpond_shared::config::Env;

fn parse(pairs: &[(&str, &str)]) -> Result<LakeConfig, Vec<String>> {
    let env = Env::from_pairs(pairs.iter().copied());
    let mut r = EnvReader::new(&env);
    let cfg = LakeConfig::parse(&mut r);
    match r.finish() {
        Ok(()) => Ok(cfg.unwrap()),
        Err(e) => Err(e.vars().into_iter().map(str::to_owned).collect()),
    }
}

#[test]
fn the_default_embedded_lake_is_refused_in_kubernetes_and_in_the_images() {
    for place in [
        ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
        ("MILLPOND_IMAGE", "writer-ducklake"),
    ] {
        assert_eq!(
            parse(&[place]).err(),
            Some(vec!["DUCKLAKE_RDS_HOST".to_owned()]),
            "{place:?}"
        );
        let dir = tempfile::tempdir().unwrap();
        let lake = dir.path().to_str().unwrap();
        assert!(parse(&[place, ("MILLPOND_LAKE_DIR", lake)]).is_ok());
        let catalog = format!("{lake}/c.sqlite");
        assert!(parse(&[
            place,
            ("DUCKLAKE_CATALOG_PATH", &catalog),
            ("DUCKLAKE_DATA_PATH", lake)
        ])
        .is_ok());
        let postgres = [
            place,
            ("DUCKLAKE_RDS_HOST", "db"),
            ("DUCKLAKE_RDS_PASSWORD", "pw"),
            ("DUCKLAKE_DATA_PATH", "/mnt/lake/data/"),
        ];
        assert!(parse(&postgres).is_ok(), "{:?}", parse(&postgres).err());
    }
    assert!(
        parse(&[]).is_ok(),
        "outside a container: the demo's default"
    );
}

fn embedded(cfg: &LakeConfig) -> (PathBuf, EmbeddedFormat) {
    match &cfg.catalog {
        Catalog::Embedded { path, format } => (path.clone(), *format),
        Catalog::Postgres { .. } => panic!("not embedded"),
    }
}

#[test]
fn only_the_extensions_the_lake_needs_are_loaded() {
    assert_eq!(
        parse(&[]).unwrap().extensions(),
        ["ducklake", "sqlite_scanner"]
    );
    let duckdb_file = parse(&[("DUCKLAKE_CATALOG_TYPE", "duckdb")]).unwrap();
    assert_eq!(duckdb_file.extensions(), ["ducklake"]);
    let postgres = parse(&[
        ("DUCKLAKE_RDS_HOST", "db"),
        ("DUCKLAKE_RDS_PASSWORD", "pw"),
        ("DUCKLAKE_DATA_PATH", "s3://bucket/lake/"),
        ("DUCKDB_S3_ACCESS_KEY_ID", "k"),
        ("DUCKDB_S3_SECRET_ACCESS_KEY", "s"),
    ])
    .unwrap();
    assert_eq!(
        postgres.extensions(),
        ["ducklake", "postgres_scanner", "httpfs"]
    );
    // S3 keys with local data: the session still sets them.
    let keys = parse(&[
        ("DUCKDB_S3_ACCESS_KEY_ID", "k"),
        ("DUCKDB_S3_SECRET_ACCESS_KEY", "s"),
    ])
    .unwrap();
    assert_eq!(keys.extensions(), ["ducklake", "sqlite_scanner", "httpfs"]);
    for ext in postgres.extensions() {
        assert!(
            crate::sink::ducklake::extensions().any(|e| e == ext),
            "{ext}"
        );
    }
}

#[test]
fn extension_signatures_are_checked_on_request() {
    assert!(!parse(&[]).unwrap().check_extension_signatures);
    let on = parse(&[("DUCKDB_CHECK_EXTENSION_SIGNATURES", "true")]).unwrap();
    assert!(on.check_extension_signatures);
    assert_eq!(
        parse(&[("DUCKDB_CHECK_EXTENSION_SIGNATURES", "sometimes")]).unwrap_err(),
        ["DUCKDB_CHECK_EXTENSION_SIGNATURES"]
    );
}

#[test]
fn the_embedded_default_needs_nothing() {
    let cfg = parse(&[]).unwrap();
    assert!(cfg.is_embedded());
    assert_eq!(cfg.max_retry_count, 100);
    assert_eq!(cfg.data_path, "./millpond-lake/data/");
    assert!(cfg.s3.is_none());
}

#[test]
fn embedded_catalog_is_sqlite_unless_told_or_already_duckdb() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().to_str().unwrap();
    let base = [("MILLPOND_LAKE_DIR", lake)];
    let cfg = parse(&base).unwrap();
    assert_eq!(
        embedded(&cfg),
        (dir.path().join("catalog.sqlite"), EmbeddedFormat::Sqlite)
    );
    let cfg = parse(&[base[0], ("DUCKLAKE_CATALOG_TYPE", "DuckDB")]).unwrap();
    assert_eq!(
        embedded(&cfg),
        (dir.path().join("catalog.ducklake"), EmbeddedFormat::DuckDb)
    );
    let cfg = parse(&[("DUCKLAKE_CATALOG_PATH", "/x/old.ducklake")]).unwrap();
    assert_eq!(
        embedded(&cfg),
        (PathBuf::from("/x/old.ducklake"), EmbeddedFormat::DuckDb)
    );
    // A lake folder written by an earlier version keeps its catalog.
    std::fs::write(dir.path().join("catalog.ducklake"), b"").unwrap();
    assert_eq!(
        embedded(&parse(&base).unwrap()),
        (dir.path().join("catalog.ducklake"), EmbeddedFormat::DuckDb)
    );
}

#[test]
fn catalog_type_is_checked() {
    let errs = parse(&[("DUCKLAKE_CATALOG_TYPE", "postgres")]).unwrap_err();
    assert_eq!(errs, ["DUCKLAKE_CATALOG_TYPE"]);
    let errs = parse(&[
        ("DUCKLAKE_RDS_HOST", "db"),
        ("DUCKLAKE_RDS_PASSWORD", "pw"),
        ("DUCKLAKE_DATA_PATH", "/tmp/x/"),
        ("DUCKLAKE_CATALOG_TYPE", "sqlite"),
    ])
    .unwrap_err();
    assert_eq!(errs, ["DUCKLAKE_CATALOG_TYPE"]);
}

#[test]
fn embedded_catalog_refuses_remote_data() {
    let errs = parse(&[("DUCKLAKE_DATA_PATH", "s3://b/x/")]).unwrap_err();
    assert!(errs.contains(&"DUCKLAKE_RDS_HOST".to_owned()), "{errs:?}");
}

#[test]
fn postgres_tls_is_read_and_its_errors_reported_with_the_others() {
    let pg = [
        ("DUCKLAKE_RDS_HOST", "db"),
        ("DUCKLAKE_RDS_PASSWORD", "pw"),
        ("DUCKLAKE_DATA_PATH", "/tmp/x/"),
    ];
    let Catalog::Postgres { tls, .. } = parse(&pg).unwrap().catalog else {
        panic!("not Postgres")
    };
    assert_eq!((tls.mode, tls.root_cert), (SslMode::Prefer, None));
    let errs = parse(&[
        ("DUCKLAKE_RDS_HOST", "db"),
        ("DUCKLAKE_DATA_PATH", "/tmp/x/"),
        ("DUCKLAKE_RDS_SSLMODE", "verify-full"),
    ])
    .unwrap_err();
    assert_eq!(errs, ["DUCKLAKE_RDS_PASSWORD", "DUCKLAKE_RDS_SSLROOTCERT"]);
    let errs = parse(&[pg[0], pg[1], pg[2], ("DUCKLAKE_RDS_SSLMODE", "strict")]).unwrap_err();
    assert_eq!(errs, ["DUCKLAKE_RDS_SSLMODE"]);
}

#[test]
fn debug_output_and_description_hide_the_password() {
    let cfg = parse(&[
        ("DUCKLAKE_RDS_HOST", "db"),
        ("DUCKLAKE_RDS_PASSWORD", "sup3rsecret"),
        ("DUCKLAKE_DATA_PATH", "/tmp/x/"),
    ])
    .unwrap();
    assert!(!format!("{cfg:?}").contains("sup3rsecret"));
    assert_eq!(
        cfg.describe(),
        "Postgres catalog ducklake@db:5432/ducklake (data /tmp/x/)"
    );
}

#[test]
fn the_memory_limit_is_a_size_checked_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().to_str().unwrap();
    let with = |v: &str| parse(&[("MILLPOND_LAKE_DIR", lake), ("DUCKDB_MEMORY_LIMIT", v)]);
    assert_eq!(
        with("256MiB").unwrap().memory_limit.as_deref(),
        Some("268435456B")
    );
    assert_eq!(
        with("1GB").unwrap().memory_limit.as_deref(),
        Some("1000000000B")
    );
    // Each was accepted by the old character check and failed only when
    // the first session opened.
    for bad in ["16XB", "0", "lots of memory"] {
        assert_eq!(
            with(bad).err(),
            Some(vec!["DUCKDB_MEMORY_LIMIT".to_owned()]),
            "{bad}"
        );
    }
}
