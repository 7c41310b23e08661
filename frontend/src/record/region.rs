//! Branch and work-queue regions (format version 4): a value-dependent branch run once
//! ([`Warp::branch`]: the lock was won, this CTA arrived last) and a work-queue loop
//! ([`Warp::queue`]: pop an item, process it, go round until the queue is empty),
//! recorded like a spin region (`spin.rs`) as a template the timing model runs on the
//! values its simulated memory returns (`tessera_traces::RegionKind`).
//!
//! What is recorded, under the lanes in the region at entry:
//!
//! - the head of the first iteration (its value instructions read sync words), then one
//!   `ISETP` per exit term; a value instruction may run on fewer lanes than the region's
//!   (a leader lane draws a ticket under an `if_` in the head) when the terms read it
//!   with [`Exit::when_lane`] from a lane that ran it: the test and the tail are still
//!   under every lane in the region;
//! - the exit test `BRA` at the call's PC, whose operands are, per active lane in lane
//!   order, the terms' constants and then the lane's template value: the value of term 0
//!   its recorded tail was recorded with (a branch: the lane's own value; a queue: its
//!   first iteration's value if it stays in, else the call's `fallback`);
//! - the tail, as a dry pass over every entry lane on the template values (every lane
//!   may take it in the timing model): stores, atomics and reductions leave memory as it
//!   is (an atomic returns the current value), loads read it;
//! - the end `BRA` (a branch's reconvergence point, a queue's back-edge).
//!
//! A second dry pass, not recorded, runs the tail on each lane's template value plus one:
//! a tail memory instruction whose lanes all moved by the same non-zero delta `d` is a
//! rebased access of stride `d` (`tessera_traces::RebasedAccess`: `base + stride *
//! value`, a queue slot); lanes that moved by different deltas, or a tail that ran other
//! instructions, fail the recording. Then the lanes that take the tail run it for real,
//! checked against the recorded one: the same instructions, masks the recorded ones
//! narrowed to those lanes, addresses the recorded ones moved by `stride * (v - t)` (`v`
//! the lane's value this time, `t` its template value; both as 32-bit unsigned numbers,
//! their difference signed), operands the same. A tail must neither exit nor block, and
//! it runs more than once per lane (dry, probe, real): effects it has on host state
//! outside the warp's memory happen that many times.
//!
//! No allocation on warp threads: the rebased accesses are a fixed array in the
//! [`Warp`]'s region state ([`MAX_REBASED`] of them).

use super::spin::{check_backoff, fail, recorded_addr, Exit, Mismatch, SpinMode, MAX_REBASED};
use super::warp::{Val, Warp, WARP};
use std::panic::Location;
use tessera_traces::RegionKind;

impl Warp {
    /// A value-dependent branch run once, recorded as a branch region: `head` runs on the
    /// active lanes and returns the condition over its value instructions (loads and
    /// value-returning atomics of sync words, as for [`Warp::spin`]); the lanes whose
    /// condition holds run `tail`, which receives term 0's value per lane; the others
    /// pass it over. `label` says what taking the tail means (`last CTA`). See the module
    /// docs for what is recorded and checked.
    #[track_caller]
    pub fn branch(
        &mut self,
        label: &'static str,
        mut head: impl FnMut(&mut Warp) -> Exit,
        mut tail: impl FnMut(&mut Warp, &Val<u32>),
    ) {
        let loc = Location::caller();
        self.region(
            loc,
            RegionKind::Branch,
            label,
            (0, 0),
            0,
            &mut head,
            &mut tail,
        );
    }

    /// A work-queue loop, recorded as a queue region: each iteration `head` runs on the
    /// lanes still in (it pops: an `ATOMG` on a sync word) and returns the condition
    /// under which a lane leaves (the queue is empty); the others run `tail` on term 0's
    /// value (the item popped), then the warp lets the other warps run and goes round.
    /// `backoff` is the timing model's wait between iterations, as for [`Warp::spin`];
    /// `fallback` is the template value of a lane that leaves in the first iteration (its
    /// recorded tail runs on it: any value the tail can run on, such as item 0). See the
    /// module docs for what is recorded and checked.
    #[track_caller]
    pub fn queue(
        &mut self,
        label: &'static str,
        backoff: (u32, u32),
        fallback: u32,
        mut head: impl FnMut(&mut Warp) -> Exit,
        mut tail: impl FnMut(&mut Warp, &Val<u32>),
    ) {
        let loc = Location::caller();
        self.region(
            loc,
            RegionKind::Queue,
            label,
            backoff,
            fallback,
            &mut head,
            &mut tail,
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn region(
        &mut self,
        loc: &'static Location<'static>,
        kind: RegionKind,
        label: &'static str,
        backoff: (u32, u32),
        fallback: u32,
        head: &mut dyn FnMut(&mut Warp) -> Exit,
        tail: &mut dyn FnMut(&mut Warp, &Val<u32>),
    ) {
        if self.spin.mode != SpinMode::Off {
            fail(format!(
                "a {} region inside a region's head or tail: regions do not nest",
                kind.name()
            ));
        }
        check_backoff(backoff);
        let saved = self.mask;
        let entry = self.active();
        if entry == 0 || self.exited == self.valid {
            return;
        }
        let mut inside = entry;
        let mut first: Option<Exit> = None;
        loop {
            let (exit, holds) = self.region_head(loc, inside, first.as_ref(), head);
            let Some(&t0) = exit.terms().first() else {
                fail("a region's exit condition needs a term".into());
            };
            // Term 0's value per lane, as that term reads it.
            let mut values = [0u32; WARP];
            for (l, v) in values.iter_mut().enumerate() {
                *v = self.spin.values[t0.value][t0.source(l)];
            }
            let reg = self.spin.value_regs[t0.value];
            let takers = match kind {
                RegionKind::Queue => inside & !holds,
                _ => holds,
            };
            if first.is_none() {
                let mut m = entry;
                while m != 0 {
                    let l = m.trailing_zeros() as usize;
                    m &= m - 1;
                    self.spin.template[l] = if kind == RegionKind::Queue && holds >> l & 1 == 1 {
                        fallback
                    } else {
                        values[l]
                    };
                }
                self.emit_test(loc, entry, &exit, true);
                let template = self.spin.template;
                self.tail_pass(SpinMode::Tail, entry, template, reg, tail);
                let mut probe = template;
                for v in &mut probe {
                    *v = v.wrapping_add(1);
                }
                self.spin.n_rebased = 0;
                self.tail_pass(SpinMode::Probe, entry, probe, reg, tail);
                self.register_spin(loc, kind, &exit, backoff, label);
                first = Some(exit);
            }
            if takers != 0 {
                self.tail_pass(SpinMode::TailCheck, takers, values, reg, tail);
            }
            inside = match kind {
                RegionKind::Queue => takers & !self.exited,
                _ => 0,
            };
            if inside == 0 {
                break;
            }
            self.mask = inside;
            self.spin_yield();
        }
        // The end, once, under the lanes in the region at entry.
        self.spin.mode = SpinMode::Off;
        self.mask = entry;
        self.emit(loc, 1, "BRA", None, &[], None, &[]);
        self.mask = saved;
    }

    /// Runs the tail under `lanes` on `values` (term 0's, per lane) in `mode`: recorded
    /// (`Tail`) or probed (`Probe`), both dry, or for real and checked (`TailCheck`).
    fn tail_pass(
        &mut self,
        mode: SpinMode,
        lanes: u32,
        values: [u32; WARP],
        reg: u16,
        tail: &mut dyn FnMut(&mut Warp, &Val<u32>),
    ) {
        self.mask = lanes;
        self.spin.mode = mode;
        self.spin.pos = 0;
        self.spin.spinning = lanes;
        self.spin.current = values;
        if mode == SpinMode::Tail {
            self.spin.tail = (0, 0);
        }
        let dry = mode != SpinMode::TailCheck;
        self.set_dry(dry);
        let exited = self.exited;
        tail(self, &Val { v: values, reg });
        self.set_dry(false);
        if self.exited != exited {
            fail("a branch or queue tail may not exit: its lanes join the others at the region's end".into());
        }
        if mode != SpinMode::Tail && self.spin.pos != self.spin.tail.1 {
            let what = if dry { "on other values" } else { "for real" };
            fail(format!(
                "a branch/queue tail ran {} instructions {what}, the recorded one {}: a branch/queue tail must run the same instructions for every value",
                self.spin.pos, self.spin.tail.1
            ));
        }
        self.spin.mode = SpinMode::Off;
        self.mask = lanes;
    }

    fn set_dry(&mut self, dry: bool) {
        self.spin.dry = dry;
        self.state().dry = dry;
    }

    /// The recorded tail instruction the tail's next one must match, with `what` and
    /// `why` for the message when its PC or opcode differs.
    fn tail_next(&mut self, pc: u32, opcode: u16, name: &str, why: &str) -> super::warp::RecInst {
        let (start, len) = self.spin.tail;
        let pos = self.spin.pos;
        if pos >= len {
            fail(format!(
                "a branch/queue tail ran {name} at pc {pc:#x} after the {len} instructions of its recorded tail ({why}): a branch/queue tail must run the same instructions for every value"
            ));
        }
        let idx = start + pos;
        let Some(&[i]) = self.rec.insts.get((idx, idx + 1)) else {
            fail("a region's recorded tail is incomplete".into());
        };
        if i.pc != pc || i.opcode != opcode {
            fail(format!(
                "a branch/queue tail ran {name} at pc {pc:#x} where its recorded tail has pc {:#x} ({why}): a branch/queue tail must run the same instructions for every value",
                i.pc
            ));
        }
        self.spin.pos += 1;
        i
    }

    /// The probe pass's instruction (the tail on the template values plus one): the same
    /// as the recorded one; its addresses, all moved by one delta, give its stride.
    pub(crate) fn tail_probe(
        &mut self,
        pc: u32,
        opcode: u16,
        name: &str,
        mask: u32,
        addrs: &[u64],
    ) {
        let why = "on each value plus one";
        let i = self.tail_next(pc, opcode, name, why);
        if i.mask != mask {
            fail(format!(
                "{name} at pc {pc:#x} of a branch/queue tail ran on lanes {mask:#x} {why}, on {:#x} when recorded: a branch/queue tail must run the same instructions for every value",
                i.mask
            ));
        }
        if i.mem_width == 0 {
            return;
        }
        let mut delta: Option<(usize, i64)> = None;
        let mut m = mask;
        let mut j = 0;
        while m != 0 {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            let now = addrs.get(j).copied().unwrap_or(0);
            let then = recorded_addr(self, &i, j).unwrap_or(0);
            let d = now.wrapping_sub(then) as i64;
            match delta {
                None => delta = Some((l, d)),
                Some((l0, d0)) if d0 != d => fail(format!(
                    "{name} at pc {pc:#x} of a branch/queue tail: lane {l0}'s address moved by {d0} and lane {l}'s by {d} when the value grew by one; a tail's addresses must be fixed or base + stride * value with one stride"
                )),
                _ => {}
            }
            j += 1;
        }
        let d = delta.map_or(0, |x| x.1);
        let n = self.spin.n_rebased;
        let known = self.spin.rebased[..n]
            .iter()
            .find(|r| r.0 == pc)
            .map(|r| r.1);
        match known {
            Some(s) if s == d => {}
            Some(s) => fail(format!(
                "{name} at pc {pc:#x} of a branch/queue tail moves by {d} per value here and by {s} where it ran before: one PC has one stride"
            )),
            None if d == 0 => {}
            None => {
                // An earlier instance of this PC did not move.
                let (start, _) = self.spin.tail;
                let before = self.spin.pos.saturating_sub(1);
                let earlier = self
                    .rec
                    .insts
                    .get((start, start + before))
                    .is_some_and(|s| s.iter().any(|x| x.pc == pc));
                if earlier {
                    fail(format!(
                        "{name} at pc {pc:#x} of a branch/queue tail moves by {d} per value here and not where it ran before: one PC has one stride"
                    ));
                }
                if n >= MAX_REBASED {
                    fail(format!(
                        "a branch/queue tail has more than {MAX_REBASED} accesses whose addresses depend on the value"
                    ));
                }
                self.spin.rebased[n] = (pc, d);
                self.spin.n_rebased += 1;
            }
        }
    }

    /// A real run's instruction: the recorded one narrowed to the lanes running it, at
    /// its addresses moved by `stride * (v - t)`, with the same operands.
    pub(crate) fn tail_check(
        &mut self,
        pc: u32,
        opcode: u16,
        name: &str,
        mask: u32,
        addrs: &[u64],
        operands: &[u64],
    ) {
        let why = "for real";
        let i = self.tail_next(pc, opcode, name, why);
        let want = i.mask & self.spin.spinning;
        if mask != want {
            fail(format!(
                "{name} at pc {pc:#x} of a branch/queue tail ran on lanes {mask:#x} where the recorded tail's mask narrowed to the lanes taking it is {want:#x}"
            ));
        }
        let stride = self.spin.rebased[..self.spin.n_rebased]
            .iter()
            .find(|r| r.0 == pc)
            .map_or(0, |r| r.1);
        let rec_ops = self.rec.operands.get(i.operands).unwrap_or(&[]);
        let n_rec = i.mask.count_ones() as usize;
        let per = rec_ops.len().checked_div(n_rec).unwrap_or(0);
        if operands.len() != per * mask.count_ones() as usize {
            fail(format!(
                "{name} at pc {pc:#x} of a branch/queue tail: its operands per lane differ from the recorded tail's"
            ));
        }
        let (current, template) = (self.spin.current, self.spin.template);
        let shift = |l: usize| {
            let (v, t) = (current[l], template[l]);
            stride.wrapping_mul(i64::from(v) - i64::from(t)) as u64
        };
        match self.lane_mismatch(&i, mask, addrs, operands, shift) {
            Some((l, Mismatch::Addr { now, then })) => {
                let (v, t) = (current[l], template[l]);
                fail(format!(
                    "{name} at pc {pc:#x} of a branch/queue tail: lane {l} accessed {now:#x} on value {v}, the recorded tail (value {t}, stride {stride}) gives {then:#x}"
                ))
            }
            Some((l, Mismatch::Operands)) => fail(format!(
                "{name} at pc {pc:#x} of a branch/queue tail: lane {l}'s operands differ from the recorded tail's; the timing model replays the recorded ones"
            )),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::record::{
        Atom, Buffer, Cmp, Exit, LaunchSpec, RecordError, Recorder, SyncCmp, Warp,
    };
    use tessera_traces::{RebasedAccess, RegionKind, TraceFile};

    /// A test kernel: the warp, 32 sync words `ctr` and 64 data words `out`.
    type Kernel = dyn Fn(&mut Warp, Buffer<u32>, Buffer<u32>) + Sync;

    /// Records one warp of 32 lanes running `kernel` with `ctr` (32 sync words, 0) and
    /// `out` (64 data words, 0); returns the trace and `out` after the kernel.
    fn record(
        dir: &std::path::Path,
        kernel: &Kernel,
    ) -> Result<(TraceFile, Vec<u32>), RecordError> {
        let path = dir.join("t.tst");
        let mut rec = Recorder::create(&path, 80, "test")?;
        let ctr = rec.alloc::<u32>("ctr", 32)?;
        let out = rec.alloc::<u32>("out", 64)?;
        rec.sync_words(ctr, false)?;
        let spec = LaunchSpec::new("region_test", [1, 1, 1], [32, 1, 1]);
        rec.launch(&spec, &|w| kernel(w, ctr, out))?;
        let got = rec.download(out)?;
        rec.finish()?;
        Ok((TraceFile::open(&path)?, got))
    }

    fn err(kernel: &Kernel) -> String {
        let dir = tempfile::tempdir().unwrap();
        match record(dir.path(), kernel) {
            Err(e @ RecordError::Kernel { .. }) => e.to_string(),
            Err(e) => panic!("not a kernel error: {e}"),
            Ok(_) => panic!("recorded"),
        }
    }

    /// Each lane bumps its own word by its lane index, then reads it back (value 1: the
    /// lane index); the condition holds for every lane but lane 0. The tail, recorded dry
    /// for all 32 lanes, writes `out[v + lane]` (rebased by the value) for the takers.
    #[test]
    fn a_branch_records_its_tail_for_every_lane_and_runs_it_for_the_takers() {
        let dir = tempfile::tempdir().unwrap();
        let (t, out) = record(dir.path(), &|w, ctr, out| {
            let lane = w.lane_id();
            let a = w.addr(&ctr, &lane);
            w.branch(
                "odd",
                |w| {
                    w.atomic(Atom::Add, &a, &lane, true);
                    w.ld_strong(&a);
                    Exit::when(1, SyncCmp::Eq, &lane).and_imm(1, SyncCmp::Ne, 0)
                },
                |w, v| {
                    let lane = w.lane_id();
                    let i = w.iadd(v, &lane);
                    let o = w.addr(&out, &i);
                    let k = w.iadd_imm(&i, 100);
                    w.st(&o, &k);
                },
            );
        })
        .unwrap();
        // Lane l > 0 wrote out[l + l] = 2l + 100; nothing else was written.
        let want: Vec<u32> = (0..64u32)
            .map(|i| if i > 0 && i % 2 == 0 { i + 100 } else { 0 })
            .collect();
        assert_eq!(out, want);
        let k = &t.kernels()[0];
        let r = &k.spin_regions[0];
        assert_eq!(r.kind, RegionKind::Branch);
        assert_eq!(r.test_operands(), 3);
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 0).unwrap().clone();
        let insts = d.warp(0);
        let at = |pc: u32| insts.iter().position(|i| i.pc == pc).unwrap();
        let (test, end) = (at(r.test_pc), at(r.end_pc));
        // Tail: S2R, IADD3, IMAD.WIDE, IADD3, STG under all 32 lanes.
        assert_eq!(end - test, 6);
        assert!(insts[test + 1..end].iter().all(|i| i.mask == u32::MAX));
        let st = &insts[end - 1];
        assert_eq!(
            r.rebased,
            [RebasedAccess {
                pc: st.pc,
                stride: 4
            }]
        );
        // Operands: per lane the two constants and the template (its own value).
        let ops = d.operands_of(d.warps[0].insts.start + test, 3).unwrap();
        let want: Vec<u64> = (0..32u64).flat_map(|l| [l, 0, l]).collect();
        assert_eq!(ops, &want[..]);
        tessera_traces::verify(&t).unwrap();
    }

    /// A term on lane 5's value: every lane compares it, and the tail gets it on every
    /// lane (the template too).
    #[test]
    fn a_broadcast_term_gives_every_lane_the_lanes_value() {
        let dir = tempfile::tempdir().unwrap();
        let (t, out) = record(dir.path(), &|w, ctr, out| {
            let lane = w.lane_id();
            let a = w.addr(&ctr, &lane);
            w.branch(
                "lane 5",
                |w| {
                    w.atomic(Atom::Add, &a, &lane, true);
                    w.ld_strong(&a);
                    Exit::when_lane(1, 5, SyncCmp::Eq, 5)
                },
                |w, v| {
                    let lane = w.lane_id();
                    let i = w.iadd(v, &lane);
                    w.store(&out, &i, &lane);
                },
            );
        })
        .unwrap();
        let want: Vec<u32> = (0..64u32)
            .map(|i| if (5..37).contains(&i) { i - 5 } else { 0 })
            .collect();
        assert_eq!(out, want);
        let r = &t.kernels()[0].spin_regions[0];
        assert_eq!(r.terms[0].lane, 5);
        assert_eq!(r.rebased.len(), 1);
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 0).unwrap().clone();
        let insts = d.warp(0);
        let test = insts.iter().position(|i| i.pc == r.test_pc).unwrap();
        let ops = d.operands_of(d.warps[0].insts.start + test, 2).unwrap();
        assert_eq!(ops, &[5u64; 64][..]);
        tessera_traces::verify(&t).unwrap();
    }

    /// Lane 0 alone draws a ticket (under an `if_` in the head) for the whole warp, which
    /// reads it from lane 0: the head's ATOMG runs on lane 0, the test and the tail on
    /// every lane, each lane's template the ticket.
    #[test]
    fn a_leader_lane_draws_the_value_for_the_warp() {
        let dir = tempfile::tempdir().unwrap();
        let (t, out) = record(dir.path(), &|w, ctr, out| {
            let lane = w.lane_id();
            let leader = w.icmp_imm(Cmp::Eq, &lane, 0);
            let zero = w.konst(0u32);
            let a = w.addr(&ctr, &zero);
            let one = w.konst(1u32);
            w.branch(
                "first",
                |w| {
                    w.if_(leader, |w| {
                        w.atomic(Atom::Add, &a, &one, true);
                    });
                    Exit::when_lane(0, 0, SyncCmp::Eq, 0)
                },
                |w, v| {
                    let lane = w.lane_id();
                    let i = w.iadd(v, &lane);
                    w.store(&out, &i, &lane);
                },
            );
        })
        .unwrap();
        let want: Vec<u32> = (0..64u32).map(|i| if i < 32 { i } else { 0 }).collect();
        assert_eq!(out, want);
        let k = &t.kernels()[0];
        let r = &k.spin_regions[0];
        assert_eq!((r.kind, r.terms[0].lane), (RegionKind::Branch, 0));
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 0).unwrap().clone();
        let insts = d.warp(0);
        let at = |pc: u32| insts.iter().position(|i| i.pc == pc).unwrap();
        let (start, test, end) = (at(r.start_pc), at(r.test_pc), at(r.end_pc));
        // Head: BSSY, BRA (lanes 1 to 31), ATOMG (lane 0), BSYNC, ISETP.
        let masks: Vec<u32> = insts[start..test].iter().map(|i| i.mask).collect();
        assert_eq!(masks, [u32::MAX, !1, 1, u32::MAX, u32::MAX]);
        assert!(insts[test..=end].iter().all(|i| i.mask == u32::MAX));
        // Tail: S2R, IADD3, IMAD.WIDE, STG, rebased by the ticket.
        assert_eq!(end - test, 5);
        assert_eq!(r.rebased.len(), 1);
        let ops = d.operands_of(d.warps[0].insts.start + test, 2).unwrap();
        assert_eq!(ops, &[0u64; 64][..]);
        tessera_traces::verify(&t).unwrap();
    }

    /// A value read by fewer lanes than the region's is compared only through a lane that
    /// read it.
    #[test]
    fn a_leaders_value_is_read_from_a_lane_that_read_it() {
        let head = |own: bool| {
            move |w: &mut Warp, ctr: Buffer<u32>, _out: Buffer<u32>| {
                let lane = w.lane_id();
                let leader = w.icmp_imm(Cmp::Eq, &lane, 0);
                let a = w.addr(&ctr, &lane);
                let one = w.konst(1u32);
                w.branch(
                    "x",
                    |w| {
                        w.if_(leader, |w| {
                            w.atomic(Atom::Add, &a, &one, true);
                        });
                        if own {
                            Exit::when_imm(0, SyncCmp::Eq, 0)
                        } else {
                            Exit::when_lane(0, 3, SyncCmp::Eq, 0)
                        }
                    },
                    |_, _| {},
                );
            }
        };
        let m = err(&head(true));
        assert!(
            m.contains("each lane's own value 0") && m.contains("when_lane"),
            "{m}"
        );
        let m = err(&head(false));
        assert!(
            m.contains("lane 3's value 0") && m.contains("does not read it"),
            "{m}"
        );
    }

    /// Lanes pop one shared counter until it reaches 40: the queue's lanes run the tail
    /// for each item, once; the dry passes leave memory as it is.
    #[test]
    fn a_queue_runs_each_item_once() {
        let dir = tempfile::tempdir().unwrap();
        let (t, out) = record(dir.path(), &|w, ctr, out| {
            let zero = w.konst(0u32);
            let one = w.konst(1u32);
            let a = w.addr(&ctr, &zero);
            w.queue(
                "popped",
                (0, 0),
                7,
                |w| {
                    w.atomic(Atom::Add, &a, &one, true);
                    Exit::when_imm(0, SyncCmp::Ge, 40)
                },
                |w, v| {
                    let o = w.addr(&out, v);
                    w.atomic(Atom::Add, &o, &one, false);
                },
            );
        })
        .unwrap();
        let want: Vec<u32> = (0..64).map(|i| u32::from(i < 40)).collect();
        assert_eq!(out, want);
        let r = &t.kernels()[0].spin_regions[0];
        assert_eq!(r.kind, RegionKind::Queue);
        assert_eq!(r.rebased.len(), 1);
        assert_eq!(r.rebased[0].stride, 4);
        // The test's template values: lanes 0..31 popped items 0..31 and stayed in.
        let mut dec = t.decoder();
        let d = dec.kernel_cta(0, 0).unwrap().clone();
        let insts = d.warp(0);
        let test = insts.iter().position(|i| i.pc == r.test_pc).unwrap();
        let ops = d.operands_of(d.warps[0].insts.start + test, 2).unwrap();
        let want: Vec<u64> = (0..32u64).flat_map(|l| [40, l]).collect();
        assert_eq!(ops, &want[..]);
        tessera_traces::verify(&t).unwrap();
    }

    #[test]
    fn addresses_that_are_not_base_plus_stride_times_value_are_an_error() {
        let m = err(&|w, ctr, out| {
            let lane = w.lane_id();
            let a = w.addr(&ctr, &lane);
            let one = w.konst(1u32);
            w.branch(
                "x",
                |w| {
                    w.atomic(Atom::Add, &a, &one, true);
                    Exit::when_imm(0, SyncCmp::Eq, 0)
                },
                |w, v| {
                    // Lane l moves by 4 * l per value.
                    let lane = w.lane_id();
                    let i = w.imad(v, &lane, &lane);
                    let i = w.and_imm(&i, 63);
                    let o = w.addr(&out, &i);
                    w.st(&o, &lane);
                },
            );
        });
        assert!(
            m.contains("base + stride * value") && m.contains("region_test"),
            "{m}"
        );
    }

    #[test]
    fn a_tail_that_runs_other_instructions_for_other_values_is_an_error() {
        let m = err(&|w, ctr, out| {
            let zero = w.konst(0u32);
            let one = w.konst(1u32);
            let a = w.addr(&ctr, &zero);
            w.branch(
                "x",
                |w| {
                    w.atomic(Atom::Add, &a, &one, true);
                    Exit::when_imm(0, SyncCmp::Lt, 100)
                },
                |w, v| {
                    if v.v[0] % 2 == 0 {
                        w.store(&out, &zero, &one);
                    } else {
                        w.konst(3u32);
                    }
                },
            );
        });
        assert!(m.contains("same instructions for every value"), "{m}");
    }

    #[test]
    fn a_tail_whose_operands_depend_on_the_value_is_an_error() {
        let m = err(&|w, ctr, _out| {
            let zero = w.konst(0u32);
            let one = w.konst(1u32);
            let a = w.addr(&ctr, &zero);
            let b = w.addr(&ctr, &one);
            w.queue(
                "x",
                (0, 0),
                0,
                |w| {
                    w.atomic(Atom::Add, &a, &one, true);
                    Exit::when_imm(0, SyncCmp::Ge, 64)
                },
                |w, v| {
                    w.st_strong(&b, v);
                },
            );
        });
        assert!(m.contains("operands differ"), "{m}");
    }

    #[test]
    fn blocking_and_nesting_in_a_tail_are_errors() {
        let m = err(&|w, ctr, _out| {
            let zero = w.konst(0u32);
            let one = w.konst(1u32);
            let a = w.addr(&ctr, &zero);
            w.branch(
                "x",
                |w| {
                    w.atomic(Atom::Add, &a, &one, true);
                    Exit::when_imm(0, SyncCmp::Lt, 100)
                },
                |w, _| w.barrier(),
            );
        });
        assert!(m.contains("may not block"), "{m}");
        let m = err(&|w, ctr, _out| {
            let zero = w.konst(0u32);
            let one = w.konst(1u32);
            let a = w.addr(&ctr, &zero);
            w.branch(
                "x",
                |w| {
                    w.atomic(Atom::Add, &a, &one, true);
                    Exit::when_imm(0, SyncCmp::Lt, 100)
                },
                |w, _| {
                    w.branch(
                        "y",
                        |w| {
                            w.ld_strong(&a);
                            Exit::when_imm(0, SyncCmp::Lt, 100)
                        },
                        |_, _| {},
                    )
                },
            );
        });
        assert!(m.contains("do not nest"), "{m}");
    }

    #[test]
    fn more_than_eight_rebased_accesses_are_an_error() {
        let m = err(&|w, ctr, out| {
            let zero = w.konst(0u32);
            let one = w.konst(1u32);
            let a = w.addr(&ctr, &zero);
            w.branch(
                "x",
                |w| {
                    w.atomic(Atom::Add, &a, &one, true);
                    Exit::when_imm(0, SyncCmp::Lt, 100)
                },
                |w, v| {
                    for j in 0..9u8 {
                        w.unrolled(j, |w| {
                            w.load::<u32>(&out, v);
                        });
                    }
                },
            );
        });
        assert!(m.contains("more than 8"), "{m}");
    }
}
