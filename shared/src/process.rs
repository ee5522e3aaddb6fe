//! The common shape of both binaries: parse config (exit 2 with every error
//! on failure), set up logging, run on a small runtime, exit 1 on failure.
use std::future::Future;
use std::process::ExitCode;

use crate::config::{CommonConfig, ConfigErrors, Env};

pub fn main<C, Fut>(
    name: &str,
    parse: impl FnOnce(&Env) -> Result<C, ConfigErrors>,
    common: impl FnOnce(&C) -> &CommonConfig,
    run: impl FnOnce(C) -> Fut,
) -> ExitCode
where
    Fut: Future<Output = anyhow::Result<()>>,
{
    let cfg = match parse(&Env::from_process()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    let shared = common(&cfg);
    let _logs = crate::logging::init(shared, name);
    crate::heap::trim_every(shared.heap_trim);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "{name} exiting with failure");
            ExitCode::FAILURE
        }
    }
}
