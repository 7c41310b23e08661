//! No allocation per window in the steady state: once buffers have grown, windows of the
//! engine (and of a model that itself does not allocate) touch the heap zero times.
//! Counted by a global allocator, per thread, so the test harness does not interfere.

mod common;

use std::alloc::{GlobalAlloc, Layout, System as SystemAlloc};
use std::cell::Cell;

use tessera_cluster::{Picos, Progress};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        SystemAlloc.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        SystemAlloc.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        SystemAlloc.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

#[test]
fn steady_state_windows_do_not_allocate() {
    const L: Picos = 4000;
    // Tokens that live long enough for a steady state; only digests, no byte logs.
    let mut sys = common::ring(8, L, 12, 100_000);
    sys.log = false;
    let g: Vec<Vec<u32>> = vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]];
    let mut engine = sys.engine(&g, Some(L)).unwrap();
    // Warm up: buffers grow to the largest window's traffic.
    assert!(matches!(
        engine.run_until(20_000_000).unwrap(),
        Progress::Paused { .. }
    ));
    let windows = engine.stats().windows;
    let messages = engine.stats().messages;
    let before = allocs();
    assert!(matches!(
        engine.run_until(60_000_000).unwrap(),
        Progress::Paused { .. }
    ));
    let after = allocs();
    let ran = engine.stats().windows - windows;
    assert!(ran > 5000, "{ran} windows");
    assert!(engine.stats().messages - messages > 5000);
    assert_eq!(
        after - before,
        0,
        "{} allocations in {ran} windows",
        after - before
    );
}
