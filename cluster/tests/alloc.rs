//! No allocation per window in the steady state: once buffers have grown, windows of the
//! engine (and of a model that itself does not allocate) touch the heap zero times.
//! Counted by a global allocator, per thread, so the test harness does not interfere; on
//! the thread transport each worker counts its own.

mod common;

use std::alloc::{GlobalAlloc, Layout, System as SystemAlloc};
use std::cell::Cell;

use tessera_cluster::{Engine, Lookahead, Picos, Progress, ThreadTransport, WorkerMap};

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

#[test]
fn steady_state_windows_on_threads_do_not_allocate() {
    const L: Picos = 4000;
    let mut sys = common::ring(8, L, 12, 100_000);
    sys.log = false;
    let g: Vec<Vec<u32>> = vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]];
    let routing = sys.routing(&g).unwrap();
    let pairs = Lookahead::Pairs(routing.pair_lookahead(sys.links()).unwrap());
    // Per-pair windows vary in length (up to what the other workers' partitions allow),
    // so the largest window's traffic, which the buffers grow to (doubling), can come
    // late: a buffer may still double once or twice, never per window.
    for (map, lookahead) in [
        (WorkerMap::contiguous(4, 2).unwrap(), Lookahead::Global(L)),
        (WorkerMap::round_robin(4, 3).unwrap(), Lookahead::Global(L)),
        (WorkerMap::contiguous(4, 2).unwrap(), pairs.clone()),
        (WorkerMap::round_robin(4, 3).unwrap(), pairs.clone()),
    ] {
        let parts = map.split(sys.hosts(&g)).unwrap();
        let transports = ThreadTransport::for_workers(&map);
        // Each worker on its own thread, counting its own allocations between two pauses
        // (every worker pauses at the same window).
        let counts: Vec<(u64, u64, u64)> = std::thread::scope(|s| {
            let handles: Vec<_> = parts
                .into_iter()
                .zip(transports)
                .map(|(p, t)| {
                    let routing = routing.clone();
                    let lookahead = lookahead.clone();
                    s.spawn(move || {
                        let mut engine = Engine::new(lookahead, routing, p, t).unwrap();
                        assert!(matches!(
                            engine.run_until(20_000_000).unwrap(),
                            Progress::Paused { .. }
                        ));
                        let (windows, messages) = (engine.stats().windows, engine.stats().messages);
                        let before = allocs();
                        assert!(matches!(
                            engine.run_until(60_000_000).unwrap(),
                            Progress::Paused { .. }
                        ));
                        let after = allocs();
                        (
                            after - before,
                            engine.stats().windows - windows,
                            engine.stats().messages - messages,
                        )
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let allowed = match lookahead {
            Lookahead::Global(_) => 0,
            Lookahead::Pairs(_) => 2,
        };
        for (w, &(n, windows, messages)) in counts.iter().enumerate() {
            assert!(windows > 1000 && messages > 5000, "{windows} windows");
            assert!(
                n <= allowed,
                "worker {w} of {map:?}: {n} allocations in {windows} windows"
            );
        }
    }
}
