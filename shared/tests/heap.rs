//! Its own test binary: the allocator and RSS are the process's.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::time::{Duration, Instant};

fn rss_mib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    (pages * 4096) >> 20
}

/// 200 MiB freed between small blocks still in use stay with the process
/// until the trimmer hands them back.
#[test]
fn the_trimmer_hands_freed_heap_memory_back() {
    let (blocks, pins): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (0..3200)
        .map(|_| (vec![1u8; 64 << 10], vec![1u8; 64]))
        .unzip();
    let full = rss_mib();
    drop(std::hint::black_box(blocks));
    let freed = rss_mib();
    assert!(
        freed + 100 > full,
        "glibc gave the memory back by itself ({full} -> {freed} MiB): this test shows nothing here"
    );
    millpond_shared::heap::trim_every(Some(Duration::from_millis(10)));
    let start = Instant::now();
    while rss_mib() + 150 > full && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        rss_mib() + 150 <= full,
        "RSS {full} MiB with 200 MiB allocated, {freed} MiB freed, {} MiB after trimming",
        rss_mib()
    );
    drop(std::hint::black_box(pins));
}
