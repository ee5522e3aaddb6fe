//! The dynamic allowlist source (MILLPOND_INCLUDE_VALUES_*): a background
//! thread polls a URL for a JSON array of scalars and keeps an
//! [`IncludeSet`] under its safety rules. In authoritative mode the keep
//! filter admits the set's values (pins included); in shadow mode the
//! static list applies and the set is only observed through gauges.
pub mod config;
mod fetch;
mod poll;
pub mod set;

pub use config::{IncludeConfig, Mode};
pub use millpond_shared::config::SecretUrl;
pub use poll::{start, Source};
pub use set::{IncludeSet, Value};
