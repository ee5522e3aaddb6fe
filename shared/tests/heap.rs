//! Its own test binary: the allocator and RSS are the process's.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::time::{Duration, Instant};

const BLOCKS: u64 = 3200;
/// Under glibc's first mmap threshold (128 KiB): served from the heap.
const BLOCK: u64 = 64 << 10;

fn page() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

fn rss_mib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    (pages * page()) >> 20
}

/// 200 MiB freed between small blocks still in use stay with the process
/// until the trimmer hands back the whole pages of each freed block.
#[test]
fn the_trimmer_hands_freed_heap_memory_back() {
    // A freed block keeps its first page (glibc's free-list links) and
    // shares its last with the next small block.
    let back_mib = (BLOCKS * (BLOCK.saturating_sub(2 * page()) / page() * page())) >> 20;
    if back_mib < 64 {
        eprintln!(
            "{} KiB pages: too large for 64 KiB blocks to show a trim",
            page() >> 10
        );
        return;
    }
    let (blocks, pins): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (0..BLOCKS)
        .map(|_| (vec![1u8; BLOCK as usize], vec![1u8; 64]))
        .unzip();
    let full = rss_mib();
    drop(std::hint::black_box(blocks));
    let freed = rss_mib();
    assert!(
        freed + back_mib / 2 > full,
        "RSS fell from {full} to {freed} MiB before any trim (glibc gave it back, or the kernel \
         reclaimed it): this test shows nothing here"
    );
    millpond_shared::heap::trim_every(Some(Duration::from_millis(10)));
    let start = Instant::now();
    while rss_mib() + back_mib / 2 > full && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        rss_mib() + back_mib / 2 <= full,
        "RSS {full} MiB with 200 MiB allocated, {freed} MiB freed, {} MiB after trimming; \
         expected about {back_mib} MiB back",
        rss_mib()
    );
    drop(std::hint::black_box(pins));
}
