//! glibc's heap, trimmed every so often so that what the process freed
//! goes back to the kernel.
//!
//! glibc serves a block of at least its mmap threshold from a mapping of
//! its own, unmapped when freed, and smaller blocks from its heaps, which
//! keep what is freed. The threshold starts at 128 KiB, but each large
//! block freed raises it to that block's size (up to 32 MiB), so after the
//! first few Flight messages, Parquet pages and upload parts (1-8 MiB
//! each) the heaps serve them all, and a process's RSS climbs to the most
//! its heaps ever held, spread over pages partly in use. Measured with a
//! flush of ~1 GiB of Arrow every 90 s: the writer's RSS climbed from 90
//! to 178 MiB over the first two flushes and stayed there.
//!
//! Two remedies were measured (docs/benchmarks.md; the rule in docs/operating/sizing.md). A
//! fixed 1 MiB threshold (`MALLOC_MMAP_THRESHOLD_`) lowered both peaks by
//! 44 MB, but mapping and faulting in every large block cost ~50 % more
//! CPU per record. `malloc_trim` once a second, which hands the free pages
//! inside the heaps back, lowered them by 24-29 MB at no CPU cost the
//! anchor benchmark could tell from its spread.
use std::time::Duration;

/// Calls `malloc_trim` every `period` on a thread of its own, for the life
/// of the process. `None`, or a C library other than glibc: nothing.
pub fn trim_every(period: Option<Duration>) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if let Some(period) = period {
        let spawned = std::thread::Builder::new()
            .name("heap-trim".into())
            .spawn(move || loop {
                std::thread::sleep(period);
                // SAFETY: malloc_trim takes each arena's lock itself.
                unsafe {
                    libc::malloc_trim(0);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "could not start the heap trimmer; memory freed stays with the process");
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = period;
}
