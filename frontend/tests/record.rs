//! The recording executor: determinism across scheduling modes, barriers, CTAs that wait
//! on each other, and the errors of kernels that cannot finish.

use tessera_frontend::record::{Atom, Cmp, LaunchSpec, RecordError, Recorder, SharedArr};
use tessera_traces::{verify, OpClass, TraceFile};

fn vadd(path: &std::path::Path, blocking: bool) {
    let mut r = Recorder::create(path, 80, "test").unwrap();
    let n = 777u32;
    let a = r.alloc::<f32>("a", n as u64).unwrap();
    let c = r.alloc::<f32>("c", n as u64).unwrap();
    r.upload(a, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
        .unwrap();
    let mut spec = LaunchSpec::new("k", [n.div_ceil(64), 1, 1], [64, 1, 1]);
    spec.blocking = blocking;
    spec.resident_ctas = 3;
    r.launch(&spec, &|w| {
        let i = w.global_id_x();
        let p = w.icmp_imm(Cmp::Ge, &i, n);
        w.exit_if(p);
        let x = w.load(&a, &i);
        let y = w.fadd(&x, &x);
        w.store(&c, &i, &y);
    })
    .unwrap();
    let out = r.download(c).unwrap();
    assert!(out.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
    r.finish().unwrap();
}

/// Threads with the baton and inline execution interleave warps the same way: the two
/// traces are byte-identical.
#[test]
fn inline_and_threaded_capture_are_identical() {
    let d = tempfile::tempdir().unwrap();
    let (p1, p2) = (d.path().join("a.tst"), d.path().join("b.tst"));
    vadd(&p1, true);
    vadd(&p2, false);
    assert_eq!(std::fs::read(&p1).unwrap(), std::fs::read(&p2).unwrap());
    vadd(&p1, true);
    assert_eq!(
        std::fs::read(&p1).unwrap(),
        std::fs::read(&p2).unwrap(),
        "repeat differs"
    );
}

/// A block reduction through shared memory with barriers gives the right sum, and every
/// warp records the same number of BAR.SYNC.
#[test]
fn barriers_order_shared_memory() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("r.tst");
    let mut r = Recorder::create(&path, 80, "test").unwrap();
    let threads = 256u32;
    let out = r.alloc::<u32>("out", 1).unwrap();
    let mut spec = LaunchSpec::new("reduce", [1, 1, 1], [threads, 1, 1]);
    spec.shmem_bytes = threads * 4;
    let sh = SharedArr::<u32>::new(0, threads);
    r.launch(&spec, &|w| {
        let t = w.tid(0);
        let a = w.shared_addr(&sh, &t);
        let one = w.iadd_imm(&t, 1);
        w.sts(&a, &one);
        let mut s = threads / 2;
        while s > 0 {
            w.barrier();
            let p = w.icmp_imm(Cmp::Lt, &t, s);
            w.if_(p, |w| {
                let o = w.iadd_imm(&t, s);
                let b = w.shared_addr(&sh, &o);
                let x = w.lds::<u32>(&a);
                let y = w.lds::<u32>(&b);
                let z = w.iadd(&x, &y);
                w.sts(&a, &z);
            });
            s /= 2;
        }
        let z = w.icmp_imm(Cmp::Eq, &t, 0);
        w.if_(z, |w| {
            let x = w.lds::<u32>(&a);
            let i = w.konst(0u32);
            w.store(&out, &i, &x);
        });
    })
    .unwrap();
    assert_eq!(r.download(out).unwrap(), vec![threads * (threads + 1) / 2]);
    r.finish().unwrap();
    let t = TraceFile::open(&path).unwrap();
    verify(&t).unwrap();
    let k = &t.kernels()[0];
    // 8 halvings of 256: 8 barriers in each of the 8 warps.
    assert_eq!(k.counts.class_warp_insts[OpClass::Barrier as usize], 8 * 8);
}

/// CTA 0 waits for a flag that the last CTA sets: the capture interleaves them and both
/// finish; the spin iterations recorded depend only on the schedule, so two captures agree.
#[test]
fn ctas_that_wait_on_each_other_are_captured() {
    let d = tempfile::tempdir().unwrap();
    let mut sizes = Vec::new();
    for run in 0..2 {
        let path = d.path().join(format!("s{run}.tst"));
        let mut r = Recorder::create(&path, 80, "test").unwrap();
        let flag = r.alloc::<u32>("flag", 1).unwrap();
        let mut spec = LaunchSpec::new("waiter", [4, 1, 1], [32, 1, 1]);
        spec.resident_ctas = 4;
        r.launch(&spec, &|w| {
            let zero = w.konst(0u32);
            if w.cta[0] == 3 {
                let one = w.konst(1u32);
                let a = w.addr(&flag, &zero);
                w.fence_gpu();
                w.atomic(Atom::Exch, &a, &one, true);
            } else if w.cta[0] == 0 {
                w.while_(
                    |w| {
                        let a = w.addr(&flag, &zero);
                        let v = w.ld::<u32>(&a);
                        w.spin_yield();
                        w.icmp_imm(Cmp::Eq, &v, 0)
                    },
                    |_| {},
                );
            }
        })
        .unwrap();
        r.finish().unwrap();
        sizes.push(std::fs::read(&path).unwrap());
    }
    assert_eq!(sizes[0], sizes[1]);
}

/// A flag nobody sets is reported as a livelock, not a hang; a failed launch leaves no
/// file.
#[test]
fn endless_spin_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("x.tst");
    let mut r = Recorder::create(&path, 80, "test").unwrap();
    let flag = r.alloc::<u32>("flag", 1).unwrap();
    let spec = LaunchSpec::new("stuck", [1, 1, 1], [32, 1, 1]);
    let e = r
        .launch(&spec, &|w| {
            let zero = w.konst(0u32);
            w.while_(
                |w| {
                    let a = w.addr(&flag, &zero);
                    let v = w.ld::<u32>(&a);
                    w.spin_yield();
                    w.icmp_imm(Cmp::Eq, &v, 0)
                },
                |_| {},
            );
        })
        .unwrap_err();
    assert!(matches!(e, RecordError::Kernel { .. }), "{e}");
    assert!(e.to_string().contains("spin loop"), "{e}");
    drop(r);
    assert!(!path.exists());
}

/// An access outside every allocation names the kernel, CTA and warp.
#[test]
fn out_of_bounds_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let mut r = Recorder::create(&d.path().join("o.tst"), 80, "test").unwrap();
    let a = r.alloc::<u32>("a", 8).unwrap();
    let mut spec = LaunchSpec::new("oob", [1, 1, 1], [32, 1, 1]);
    spec.blocking = false;
    let e = r
        .launch(&spec, &|w| {
            let t = w.tid(0);
            let _ = w.load(&a, &t);
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("kernel oob") && e.contains("outside every allocation"),
        "{e}"
    );
}

/// A loop that never ends is stopped at the per-warp instruction cap with a clear error,
/// not run until memory runs out.
#[test]
fn runaway_warp_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let mut r = Recorder::create(&d.path().join("x.tst"), 80, "test").unwrap();
    let mut spec = LaunchSpec::new("runaway", [1, 1, 1], [32, 1, 1]);
    spec.blocking = false;
    let e = r
        .launch(&spec, &|w| {
            let z = w.konst(0u32);
            w.while_(
                |w| w.icmp_imm(Cmp::Eq, &z, 0),
                |w| {
                    let _ = w.iadd_imm(&z, 1);
                },
            );
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("kernel runaway") && e.contains("more than"),
        "{e}"
    );
}
