//! The dynamic allowlist source (MILLPOND_INCLUDE_VALUES_*): a background
//! thread polls a URL for a JSON array of scalars and keeps an
//! [`IncludeSet`] under its safety rules. In authoritative mode the keep
//! filter admits the set's values (pins included); in shadow mode the
//! static list applies and the set is only observed through gauges.
pub mod config;
mod fetch;
mod poll;
pub mod set;
mod url;

use std::sync::{Arc, RwLock};

pub use config::{IncludeConfig, Mode};
pub use poll::{start, Source};
pub use set::{IncludeSet, Value};
pub use url::SecretUrl;

use crate::stages::filter::Values;

/// The allowlist the keep filter reads on every batch: the static list, or
/// in authoritative mode what the poller last published.
#[derive(Debug, Clone)]
pub struct LiveValues(Arc<RwLock<Values>>);

impl LiveValues {
    pub fn new(initial: Values) -> Self {
        LiveValues(Arc::new(RwLock::new(initial)))
    }

    pub fn get(&self) -> Values {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn publish(&self, values: Values) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = values;
    }
}
