//! A flush counts its dead letters at what they cost: measured here with a
//! counting allocator, on the shape that costs the most per byte of input
//! (thousands of one-character keys past MILLPOND_MAX_COLUMNS, each a
//! value-level dead letter).
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use millpond_ingest::buffer::{Limits, Pending};
use millpond_ingest::kafka::Record;

struct Counting;

thread_local! {
    /// Bytes this thread holds, as the allocator was asked for them.
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LIVE.try_with(|l| l.set(l.get() + layout.size() as isize));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = LIVE.try_with(|l| l.set(l.get() - layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let _ = LIVE.try_with(|l| l.set(l.get() + new as isize - layout.size() as isize));
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.with(Cell::get)
}

#[test]
fn dead_letters_count_at_least_what_they_hold() {
    let payloads: Vec<Vec<u8>> = (0..200)
        .map(|i| {
            let keys: Vec<String> = (0..2_000).map(|k| format!("\"k{k}\":{}", k % 10)).collect();
            format!("{{\"id\":{i},{}}}", keys.join(",")).into_bytes()
        })
        .collect();
    let records: Vec<Record<'_>> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| Record {
            partition: 0,
            offset: i as i64,
            timestamp_ms: Some(1_700_000_000_000),
            key: Some(b"a-key-of-36-bytes-like-a-uuid-000000"),
            payload: Some(p),
        })
        .collect();
    let mut pending = Pending::with_limits(Limits {
        max_columns: 1,
        ..Limits::default()
    });
    let before = live();
    let added = pending.add("events", &records);
    let held = (live() - before) as usize;
    assert_eq!(added.rows, 200);
    assert_eq!(
        added.dead_values,
        200 * 2_000,
        "every key past the limit is a letter"
    );
    let counted = pending.bytes();
    // Counted includes each letter's encoded form, sent with the flush and
    // not yet built; what is held must never exceed what is counted.
    assert!(
        counted >= held,
        "the flush counts {counted} bytes but holds {held}"
    );
    assert!(
        counted <= 3 * held,
        "the flush counts {counted} bytes for {held} held: a flush would be cut far too early"
    );
}
