//! mbarrier objects (format version 4): CUDA's split arrive/wait barriers in a CTA's
//! shared memory (`cuda::barrier`, PTX `mbarrier.init`, `mbarrier.arrive`,
//! `mbarrier.try_wait`), as Hopper producer/consumer pipelines use them: a warp arrives
//! and goes on, and waits later for a phase to complete.
//!
//! Barrier `id` (0 to 31) of a CTA is initialized with the arrivals each phase expects;
//! a phase completes when that many have arrived (each active lane of an arriving warp
//! arrives once), and the next phase starts with the same count. A wait names the phase
//! it waits to complete (0 the first: the program's own count of phases) and holds the
//! warp until it has. These are the semantics of the timing model
//! (`partitions/src/sm/mbarrier.rs`), which runs the same objects from the kernel's
//! `tessera_traces::MBarrierOp` entries: each call site registers one, at its PC.
//!
//! Recorded (Hopper SASS only: the kernel must be launched for binary version 90, see
//! [`super::LaunchSpec::binary_version`]), one instruction per call with one operand per
//! active lane:
//!
//! - [`Warp::mbar_init`]: `SYNCS.EXCH.64`, operand the count (every lane the same);
//! - [`Warp::mbar_arrive`]: `SYNCS.ARRIVE.TRANS64.A1T0`, operand 1 (the lane's arrivals);
//! - [`Warp::mbar_wait`]: `SYNCS.PHASECHK.TRANS64.TRYWAIT`, operand the phase (the
//!   `try_wait` loop recorded once: the model holds the warp until the phase completes).
//!
//! Functionally, the state lives with the CTA's named-barrier state (made on the
//! scheduler's thread when the CTA starts); a warp that must wait blocks (records nothing
//! more) and the scheduler resumes it once its phase has completed. A phase that never
//! completes is the executor's deadlock error. Arriving at or waiting on a barrier before
//! its init, a count of 0, an id of 32 or more, or a call inside a spin, branch or queue
//! region fails the recording.

use super::exec::{CtaWait, MBARRIERS};
use super::spin::{fail, SpinMode};
use super::warp::{Warp, WARP};
use crate::opcodes::ArchFamily;
use std::panic::Location;
use tessera_traces::{MBarrierKind, MBarrierOp};

/// `mbarrier.init`'s SASS.
pub const MBAR_INIT_OP: &str = "SYNCS.EXCH.64";
/// `mbarrier.arrive`'s SASS.
pub const MBAR_ARRIVE_OP: &str = "SYNCS.ARRIVE.TRANS64.A1T0";
/// `mbarrier.try_wait`'s SASS (the phase check of its loop).
pub const MBAR_WAIT_OP: &str = "SYNCS.PHASECHK.TRANS64.TRYWAIT";

impl Warp {
    /// `mbarrier.init(&bar[id], count)` (`SYNCS.EXCH.64`): barrier `id` (0 to 31) of the
    /// CTA expects `count` arrivals per phase (at least 1), starting over at phase 0. One
    /// thread initializes it (`if (threadIdx.x == 0)`), then `__syncthreads()`
    /// ([`Warp::barrier`]) before any warp uses it.
    #[track_caller]
    pub fn mbar_init(&mut self, id: u32, count: u32) {
        self.mbar(Location::caller(), MBarrierKind::Init, id, count);
    }

    /// `mbarrier.arrive(&bar[id])` (`SYNCS.ARRIVE.TRANS64.A1T0`): each active lane
    /// arrives once at barrier `id`; the warp goes on. The arrival that brings the
    /// current phase to its count completes it.
    #[track_caller]
    pub fn mbar_arrive(&mut self, id: u32) {
        self.mbar(Location::caller(), MBarrierKind::Arrive, id, 1);
    }

    /// `while (!mbarrier.try_wait(&bar[id], phase));` (`SYNCS.PHASECHK.TRANS64.TRYWAIT`,
    /// recorded once): the warp waits until phase `phase` (0 the first) of barrier `id`
    /// has completed; at once when it has.
    #[track_caller]
    pub fn mbar_wait(&mut self, id: u32, phase: u32) {
        self.mbar(Location::caller(), MBarrierKind::Wait, id, phase);
    }

    fn mbar(&mut self, loc: &'static Location<'static>, kind: MBarrierKind, id: u32, arg: u32) {
        let op = match kind {
            MBarrierKind::Init => MBAR_INIT_OP,
            MBarrierKind::Arrive => MBAR_ARRIVE_OP,
            MBarrierKind::Wait => MBAR_WAIT_OP,
        };
        if self.spin.mode != SpinMode::Off {
            fail(format!(
                "{op} (mbarrier {} of barrier {id}) inside a spin, branch or queue region: mbarrier operations go outside regions",
                kind.name()
            ));
        }
        if id as usize >= MBARRIERS {
            fail(format!(
                "{op}: mbarrier id {id}; ids are 0 to {}",
                MBARRIERS - 1
            ));
        }
        if kind == MBarrierKind::Init && arg == 0 {
            fail(format!(
                "{op}: mbarrier {id} initialized with count 0; a phase expects at least one arrival"
            ));
        }
        let family = self.state().kernel.sass.family();
        if family != ArchFamily::Hopper {
            fail(format!(
                "{op}: mbarrier instructions (SYNCS) exist only on Hopper (sm_90), and the kernel records {} SASS: launch it with LaunchSpec::binary_version = Some(90)",
                family.name()
            ));
        }
        if self.exited == self.valid {
            return;
        }
        let active = self.active();
        if active == 0 {
            // No lane runs it (an empty mask): nothing arrives, nothing waits.
            return;
        }
        let id = id as usize;
        let cta = self.cta_linear;
        let Some(b) = self.state().bars.get(&cta) else {
            fail("the CTA has no barrier state".into())
        };
        if kind != MBarrierKind::Init && b.mbars[id].expected == 0 {
            fail(format!(
                "{op}: mbarrier {id} {} before its init (one thread initializes it, then __syncthreads, before any warp uses it)",
                if kind == MBarrierKind::Arrive {
                    "arrived at"
                } else {
                    "waited on"
                }
            ));
        }
        let lanes = active.count_ones() as usize;
        let operands = [u64::from(arg); WARP];
        self.emit(loc, 0, op, None, &[], None, &operands[..lanes]);
        self.ensure_room();
        let inline = self.events.is_none();
        let st = self.state();
        let pc = st.kernel.pc(loc, 0);
        let entry = MBarrierOp {
            pc,
            id: id as u8,
            kind,
        };
        if let Err(m) = st.kernel.register_mbar(entry, inline) {
            fail(m);
        }
        let Some(b) = st.bars.get_mut(&cta) else {
            fail("the CTA has no barrier state".into())
        };
        let m = &mut b.mbars[id];
        match kind {
            MBarrierKind::Init => {
                (m.expected, m.pending, m.completed) = (arg, arg, 0);
            }
            MBarrierKind::Arrive => {
                // As the model: the warp's arrivals together; a phase completes once.
                m.pending = m.pending.saturating_sub(lanes as u32);
                if m.pending == 0 {
                    m.completed = m.completed.wrapping_add(1);
                    m.pending = m.expected;
                }
            }
            MBarrierKind::Wait => {
                if m.completed > arg {
                    return;
                }
                self.block_on_cta(cta, CtaWait::MBar(id, arg), |b| b.mbars[id].completed > arg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Cmp, Exit, LaunchSpec, RecordError, Recorder, SharedArr, SyncCmp};
    use tessera_traces::TraceFile;

    fn spec(name: &str, ctas: u32, block: u32) -> LaunchSpec {
        let mut s = LaunchSpec::new(name, [ctas, 1, 1], [block, 1, 1]);
        s.binary_version = Some(90);
        s.shmem_bytes = 16;
        s
    }

    /// A waiting warp sees what the arriving warps stored before they arrived, whatever
    /// order they run in; phases go on with the same count.
    #[test]
    fn waits_see_the_arrivals_of_their_phase() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.tst");
        let mut rec = Recorder::create(&path, 80, "test").unwrap();
        let out = rec.alloc::<u32>("out", 2 * 3).unwrap();
        let sh = SharedArr::<u32>::new(0, 1);
        rec.launch(&spec("mb", 2, 96), &|w| {
            let t = w.tid(0);
            let zero = w.konst(0u32);
            let a = w.shared_addr(&sh, &zero);
            let first = w.icmp_imm(Cmp::Eq, &t, 0);
            // Phases of 64 arrivals: warps 1 and 2 arrive, warp 0 waits.
            w.if_(first, |w| w.mbar_init(3, 64));
            w.barrier();
            for r in 0..3u32 {
                if w.warp == 0 {
                    w.mbar_wait(3, r);
                    let v = w.lds::<u32>(&a);
                    let c = w.ctaid(0);
                    let i = w.imad_imm(&c, 3, &zero);
                    let i = w.iadd_imm(&i, r);
                    let lead = w.icmp_imm(Cmp::Eq, &t, 0);
                    w.if_(lead, |w| w.store(&out, &i, &v));
                } else {
                    if w.warp == 2 {
                        let v = w.konst(10 * (r + 1));
                        let lead = w.icmp_imm(Cmp::Eq, &t, 64);
                        w.if_(lead, |w| w.sts(&a, &v));
                    }
                    w.mbar_arrive(3);
                }
                // Hold the writers until the value is read.
                w.barrier();
            }
        })
        .unwrap();
        assert_eq!(rec.download(out).unwrap(), vec![10, 20, 30, 10, 20, 30]);
        assert_eq!(rec.stats.warp_thread_allocs, 0);
        rec.finish().unwrap();
        let t = TraceFile::open(&path).unwrap();
        tessera_traces::verify(&t).unwrap();
        let k = &t.kernels()[0];
        assert_eq!(k.binary_version, 90);
        let mut kinds: Vec<(u8, MBarrierKind)> =
            k.mbarriers.iter().map(|m| (m.id, m.kind)).collect();
        kinds.sort_unstable_by_key(|&(i, k)| (i, k as u8));
        assert_eq!(
            kinds,
            vec![
                (3, MBarrierKind::Init),
                (3, MBarrierKind::Arrive),
                (3, MBarrierKind::Wait)
            ]
        );
        for m in &k.mbarriers {
            let s = k.statics.iter().find(|s| s.pc == m.pc).unwrap();
            let name = &k.opcodes[s.opcode as usize].name;
            let want = match m.kind {
                MBarrierKind::Init => MBAR_INIT_OP,
                MBarrierKind::Arrive => MBAR_ARRIVE_OP,
                MBarrierKind::Wait => MBAR_WAIT_OP,
            };
            assert_eq!(name, want);
        }
        // The operands: the count, 1 per lane, the phase.
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 1).unwrap().clone();
        let wait_pc = k
            .mbarriers
            .iter()
            .find(|m| m.kind == MBarrierKind::Wait)
            .unwrap()
            .pc;
        let arrive_pc = k
            .mbarriers
            .iter()
            .find(|m| m.kind == MBarrierKind::Arrive)
            .unwrap()
            .pc;
        let init_pc = k
            .mbarriers
            .iter()
            .find(|m| m.kind == MBarrierKind::Init)
            .unwrap()
            .pc;
        let ops_at = |warp: usize, pc: u32| -> Vec<Vec<u64>> {
            let first = d.warps[warp].insts.start;
            d.warp(warp)
                .iter()
                .enumerate()
                .filter(|(_, i)| i.pc == pc)
                .map(|(j, _)| d.operands_of(first + j, 1).unwrap().to_vec())
                .collect()
        };
        assert_eq!(ops_at(0, init_pc), vec![vec![64]]);
        assert_eq!(
            ops_at(0, wait_pc),
            vec![vec![0; 32], vec![1; 32], vec![2; 32]]
        );
        assert_eq!(ops_at(1, arrive_pc), vec![vec![1; 32]; 3]);
    }

    fn launch_err(block: u32, bv: Option<u32>, k: &(dyn Fn(&mut Warp) + Sync)) -> String {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = Recorder::create(&dir.path().join("x.tst"), 80, "test").unwrap();
        let mut s = spec("bad", 1, block);
        s.binary_version = bv;
        match rec.launch(&s, k) {
            Err(e @ RecordError::Kernel { .. }) => e.to_string(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn misuse_fails_the_recording() {
        let m = launch_err(32, Some(90), &|w| w.mbar_arrive(0));
        assert!(m.contains("mbarrier 0 arrived at before its init"), "{m}");
        let m = launch_err(32, Some(90), &|w| w.mbar_wait(1, 0));
        assert!(m.contains("mbarrier 1 waited on before its init"), "{m}");
        let m = launch_err(32, Some(90), &|w| w.mbar_init(0, 0));
        assert!(m.contains("count 0"), "{m}");
        let m = launch_err(32, Some(90), &|w| w.mbar_init(32, 1));
        assert!(m.contains("mbarrier id 32; ids are 0 to 31"), "{m}");
        let m = launch_err(32, None, &|w| w.mbar_init(0, 32));
        assert!(m.contains("only on Hopper") && m.contains("ampere"), "{m}");
        let m = launch_err(64, Some(90), &|w| {
            let id = w.warp;
            w.mbar_init(id, 32);
        });
        assert!(m.contains("changed between runs"), "{m}");
        // Waiting for a phase nobody completes is the executor's deadlock.
        let m = launch_err(64, Some(90), &|w| {
            w.mbar_init(0, 64);
            if w.warp == 0 {
                w.mbar_arrive(0);
            }
            w.mbar_wait(0, 0);
        });
        assert!(m.contains("deadlock"), "{m}");
    }

    #[test]
    fn an_mbarrier_inside_a_region_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = Recorder::create(&dir.path().join("x.tst"), 90, "test").unwrap();
        let flag = rec.alloc::<u32>("flag", 1).unwrap();
        rec.upload(flag, &[1]).unwrap();
        rec.sync_words(flag, false).unwrap();
        let s = LaunchSpec::new("region", [1, 1, 1], [32, 1, 1]);
        let e = rec
            .launch(&s, &|w| {
                w.mbar_init(0, 32);
                let zero = w.konst(0u32);
                let a = w.addr(&flag, &zero);
                w.spin(
                    "set",
                    (0, 0),
                    |w| {
                        w.ld_strong(&a);
                        Exit::when_imm(0, SyncCmp::Ge, 1)
                    },
                    |w| w.mbar_arrive(0),
                );
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains("inside a spin, branch or queue region"), "{e}");
    }
}
