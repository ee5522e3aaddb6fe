//! hoglake's integration tests, one test binary (one link of arrow, parquet
//! and reqwest); each module was a binary of its own.
mod layout_emulator;
mod partition_fence;
mod publish_emulator;
mod support;
mod type_bounds;
mod wire_parity;
