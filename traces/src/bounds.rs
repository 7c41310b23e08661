//! Where a kernel's accesses may go, by the rule [`crate::verify`] checks: when the trace
//! records allocations (recorded traces; Accel-Sim imports record none), every global
//! access lies inside one allocation made before the kernel's launch, and every shared
//! access inside the CTA's shared memory. The run checks the same rule as it decodes each
//! warp ([`crate::WarpCursor`]), with [`AccessBounds::check`]: the lanes' lowest and
//! highest address against the allocation that held the warp's last access, and lane by
//! lane only when that does not settle it.

use crate::codec::{Addrs, WarpInst};
use crate::opcode::OpClass;
use crate::reader::TraceFile;
use crate::schema::{Command, KernelMeta};

/// The trace's allocations `(base, end)` in command order, and for each kernel how many of
/// them precede its launch: one pass over the commands for the whole file.
pub(crate) fn allocations(t: &TraceFile) -> (Vec<(u64, u64)>, Vec<usize>) {
    let mut allocs = Vec::new();
    let mut before = vec![0usize; t.kernels().len()];
    for c in t.commands() {
        match *c {
            Command::Alloc { addr, bytes, .. } => allocs.push((addr, addr.saturating_add(bytes))),
            Command::KernelLaunch { kernel, .. } => {
                if let Some(b) = before.get_mut(kernel as usize) {
                    *b = allocs.len();
                }
            }
            _ => {}
        }
    }
    (allocs, before)
}

/// Which rule an instruction's lanes follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Space {
    /// Not checked: not a memory instruction, or local, constant, texture or generic.
    Free,
    Global,
    Shared,
}

/// The space of an instruction of class `class`.
fn space(class: OpClass) -> Space {
    match class {
        _ if !class.is_memory() => Space::Free,
        OpClass::LoadShared | OpClass::StoreShared | OpClass::AtomicShared => Space::Shared,
        OpClass::LoadLocal
        | OpClass::StoreLocal
        | OpClass::LoadConst
        | OpClass::Texture
        | OpClass::LoadGeneric
        | OpClass::StoreGeneric
        | OpClass::AtomicGeneric => Space::Free,
        _ => Space::Global,
    }
}

/// The AND (when `and`; else `u64::MAX`) and the OR of `l` (0 when empty): a full warp's
/// 32 addresses (most lists) in SSE2 registers (part of every x86-64), which the compiler
/// does not vectorize by itself here; other lengths by a plain fold.
#[inline(always)]
fn and_or(l: &[u64], and: bool) -> (u64, u64) {
    #[cfg(target_arch = "x86_64")]
    if let Some(w) = l.first_chunk::<32>().filter(|_| l.len() == 32) {
        use std::arch::x86_64::{
            __m128i, _mm_and_si128, _mm_cvtsi128_si64, _mm_loadu_si128, _mm_or_si128,
            _mm_set1_epi64x, _mm_unpackhi_epi64,
        };
        let p = w.as_ptr() as *const __m128i;
        // Both words of a register, combined by `f`.
        let fold = |v: __m128i, f: fn(u64, u64) -> u64| {
            // SAFETY: SSE2 is part of the x86-64 baseline (register moves only).
            unsafe {
                f(
                    _mm_cvtsi128_si64(v) as u64,
                    _mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v)) as u64,
                )
            }
        };
        // SAFETY: SSE2 is part of the x86-64 baseline; the loads read the 32 addresses of
        // `w`, two at a time (unaligned loads).
        let (a, o) = unsafe {
            let mut o = _mm_loadu_si128(p);
            for k in 1..16 {
                o = _mm_or_si128(o, _mm_loadu_si128(p.add(k)));
            }
            let mut a = _mm_set1_epi64x(-1);
            if and {
                for k in 0..16 {
                    a = _mm_and_si128(a, _mm_loadu_si128(p.add(k)));
                }
            }
            (a, o)
        };
        return (fold(a, |x, y| x & y), fold(o, |x, y| x | y));
    }
    let a = if and {
        l.iter().fold(u64::MAX, |a, &x| a & x)
    } else {
        u64::MAX
    };
    (a, l.iter().fold(0, |o, &x| o | x))
}

/// One kernel's allocations and shared-memory size, and per static instruction the space
/// and width of its accesses.
#[derive(Debug)]
pub struct AccessBounds {
    /// Allocations made before the launch, `(base, end)` sorted by base.
    allocs: Box<[(u64, u64)]>,
    shmem: u64,
    /// Per static slot: its space and access width in bytes (at least 1).
    slots: Box<[(Space, u64)]>,
}

/// A lane whose access breaks the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outside {
    pub lane: u32,
    pub addr: u64,
    pub width: u64,
}

/// An access outside every allocation (or outside shared memory), where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessFault {
    pub warp_id: u32,
    pub pc: u32,
    pub slot: u32,
    pub lane: Outside,
}

impl std::fmt::Display for AccessFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Outside { lane, addr, width } = self.lane;
        write!(
            f,
            "warp {} lane {lane}: the instruction at pc {:#x} accesses {width} bytes at \
             {addr:#x}, outside every allocation",
            self.warp_id, self.pc
        )
    }
}

impl AccessFault {
    /// What `verify` and the run say of it (`meta`: its kernel).
    pub fn describe(&self, meta: &KernelMeta) -> String {
        let name = meta
            .statics
            .get(self.slot as usize)
            .and_then(|st| meta.opcodes.get(st.opcode as usize))
            .map_or("?", |op| op.name.as_str());
        let Outside { lane, addr, width } = self.lane;
        format!(
            "warp {} lane {lane}: {name} at pc {:#x} accesses {width} bytes at {addr:#x}, \
             outside every allocation",
            self.warp_id, self.pc
        )
    }
}

impl AccessBounds {
    /// The bounds of kernel `meta` given the allocations before its launch; `None` when
    /// there are none (the trace records no allocations: nothing is checked).
    pub fn new(meta: &KernelMeta, mut allocs: Vec<(u64, u64)>) -> Option<AccessBounds> {
        if allocs.is_empty() {
            return None;
        }
        allocs.sort_unstable();
        let slots = meta
            .statics
            .iter()
            .map(|st| match meta.opcodes.get(st.opcode as usize) {
                Some(op) => (space(op.class), op.width_bytes.max(1) as u64),
                None => (Space::Free, 1),
            })
            .collect();
        Some(AccessBounds {
            allocs: allocs.into(),
            shmem: meta.shmem_bytes as u64,
            slots,
        })
    }

    /// Per kernel of `t`, its bounds (`None`: not checked).
    pub fn of_trace(t: &TraceFile) -> Vec<Option<std::sync::Arc<AccessBounds>>> {
        let (all, before) = allocations(t);
        t.kernels()
            .iter()
            .zip(&before)
            .map(|(m, &b)| AccessBounds::new(m, all[..b].to_vec()).map(std::sync::Arc::new))
            .collect()
    }

    /// Whether `width` bytes at `addr` lie inside the allocation with the highest base at
    /// or below `addr`.
    fn inside(&self, addr: u64, width: u64) -> bool {
        let i = self.allocs.partition_point(|&(b, _)| b <= addr);
        i > 0 && {
            let (b, e) = self.allocs[i - 1];
            addr >= b && addr.saturating_add(width) <= e
        }
    }

    /// The space and access width of static instruction `slot` (`None`: not checked).
    #[inline]
    pub(crate) fn rule(&self, slot: u32) -> Option<(Space, u64)> {
        self.slots
            .get(slot as usize)
            .copied()
            .filter(|&(space, _)| space != Space::Free)
    }

    /// Whether an access of `width` bytes at `addr` in `space` keeps the rule.
    #[inline]
    pub(crate) fn allows(&self, space: Space, width: u64, addr: u64) -> bool {
        match space {
            Space::Free => true,
            Space::Global => self.inside(addr, width),
            Space::Shared => addr.saturating_add(width) <= self.shmem,
        }
    }

    /// The first active lane of `inst` (its list-mode addresses in `list`, as a
    /// [`crate::LaneAddrSource`] holds them) whose access breaks the rule. `hint` is the
    /// allocation that held the lanes of an earlier instruction, kept by the caller.
    #[inline(always)]
    pub fn check(&self, inst: &WarpInst, list: &[u64], hint: &mut usize) -> Option<Outside> {
        if matches!(inst.addrs, Addrs::None) || inst.mask == 0 {
            return None;
        }
        let &(space, width) = self.slots.get(inst.slot as usize)?;
        if space == Space::Free {
            return None;
        }
        // Bounds of the lane addresses, settling every lane with one comparison: for a
        // stride the first and last lane's (unless they wrap around the address space),
        // for a list the AND and OR of its addresses (below and above every one of them,
        // and as tight for the addresses of one array), which vectorize, unlike min and
        // max.
        let span = match inst.addrs {
            Addrs::None => return None,
            Addrs::Stride { base, stride } => {
                let lanes = if inst.mask == u32::MAX {
                    32
                } else {
                    inst.mask.count_ones()
                };
                let last = (lanes - 1) as u64 * stride.unsigned_abs() as u64;
                if stride >= 0 {
                    base.checked_add(last).map(|hi| (base, hi))
                } else {
                    base.checked_sub(last).map(|lo| (lo, base))
                }
            }
            // Shared memory starts at 0: only the highest address matters.
            Addrs::List { start, len } => Some(and_or(
                list.get(start as usize..(start + len) as usize)
                    .unwrap_or(&[]),
                space == Space::Global,
            )),
        };
        match span {
            Some((lo, hi)) if self.fits(space, lo, hi, width, hint) => None,
            _ => self.exact(inst, list, space, width, hint),
        }
    }

    /// Whether every address in `lo..=hi` keeps the rule of `space` for `width` bytes.
    #[inline(always)]
    fn fits(&self, space: Space, lo: u64, hi: u64, width: u64, hint: &mut usize) -> bool {
        let end = hi.saturating_add(width);
        match space {
            Space::Shared => end <= self.shmem,
            _ => self.holds(lo, hi, end, hint),
        }
    }

    /// [`AccessBounds::check`] when its bounds do not settle it: a list's lowest and
    /// highest address, then lane by lane.
    #[cold]
    #[inline(never)]
    fn exact(
        &self,
        inst: &WarpInst,
        list: &[u64],
        space: Space,
        width: u64,
        hint: &mut usize,
    ) -> Option<Outside> {
        if let Addrs::List { start, len } = inst.addrs {
            let l = list
                .get(start as usize..(start + len) as usize)
                .unwrap_or(&[]);
            if let (Some(&lo), Some(&hi)) = (l.iter().min(), l.iter().max()) {
                if self.fits(space, lo, hi, width, hint) {
                    return None;
                }
            }
        }
        self.first_outside(inst, list)
    }

    /// Whether one allocation holds `lo..end` and no other allocation starts in
    /// `lo..=hi` (so that [`AccessBounds::inside`] finds that one for every lane).
    #[inline]
    fn holds(&self, lo: u64, hi: u64, end: u64, hint: &mut usize) -> bool {
        let fits = |i: usize| {
            self.allocs
                .get(i)
                .is_some_and(|&(b, e)| b <= lo && end <= e)
                && self.allocs.get(i + 1).is_none_or(|&(b, _)| b > hi)
        };
        if fits(*hint) {
            return true;
        }
        let i = self.allocs.partition_point(|&(b, _)| b <= lo);
        match i.checked_sub(1) {
            Some(i) if fits(i) => {
                *hint = i;
                true
            }
            _ => false,
        }
    }

    /// Lane by lane, the first that breaks the rule.
    fn first_outside(&self, inst: &WarpInst, list: &[u64]) -> Option<Outside> {
        let mut out = None;
        let (space, width) = self.rule(inst.slot)?;
        crate::LaneAddrSource(list).for_each_lane_addr(inst, |lane, addr| {
            if out.is_none() && !self.allows(space, width, addr) {
                out = Some(Outside { lane, addr, width });
            }
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bounds(allocs: Vec<(u64, u64)>, shmem: u64, space: Space, width: u64) -> AccessBounds {
        let mut allocs = allocs;
        allocs.sort_unstable();
        AccessBounds {
            allocs: allocs.into(),
            shmem,
            slots: vec![(space, width)].into(),
        }
    }

    proptest! {
        /// The fast check agrees with the lane-by-lane rule of `verify`
        /// ([`AccessBounds::lane`]) on any allocations, lanes and hint.
        #[test]
        fn check_agrees_with_lanes(
            allocs in proptest::collection::vec((0u64..4096, 0u64..2048), 1..5),
            shared in any::<bool>(),
            shmem in 0u64..4096,
            width in prop_oneof![Just(1u64), Just(4), Just(8), Just(16)],
            mask in prop_oneof![Just(u32::MAX), any::<u32>()],
            stride in prop_oneof![Just(None), (any::<u64>(), -64i32..64).prop_map(Some)],
            base in prop_oneof![0u64..4096, any::<u64>()],
            lanes in proptest::collection::vec(0u64..512, 32),
            hint in 0usize..6,
        ) {
            let allocs = allocs.into_iter().map(|(b, n)| (b, b + n)).collect();
            let space = if shared { Space::Shared } else { Space::Global };
            let b = bounds(allocs, shmem, space, width);
            let n = mask.count_ones() as usize;
            let list: Vec<u64> = lanes[..n].iter().map(|&x| base.wrapping_add(x)).collect();
            let addrs = match stride {
                Some((sb, s)) => Addrs::Stride { base: sb, stride: s },
                None => Addrs::List { start: 0, len: n as u32 },
            };
            let inst = WarpInst {
                pc: 0,
                mask,
                slot: 0,
                class: OpClass::LoadGlobal,
                addr_mode: 0,
                addrs,
            };
            let mut want = None;
            crate::LaneAddrSource(&list).for_each_lane_addr(&inst, |lane, addr| {
                if want.is_none() && !b.allows(space, width, addr) {
                    want = Some(Outside { lane, addr, width });
                }
            });
            let mut hint = hint;
            prop_assert_eq!(b.check(&inst, &list, &mut hint), want);
        }

        #[test]
        fn and_or_folds(l in proptest::collection::vec(any::<u64>(), 0..40), full in any::<bool>()) {
            let mut l = l;
            if full {
                l.resize(32, 0x5a5a);
            }
            let want = l.iter().fold((u64::MAX, 0), |(a, o), &x| (a & x, o | x));
            prop_assert_eq!(and_or(&l, true), want);
            prop_assert_eq!(and_or(&l, false), (u64::MAX, want.1));
        }
    }
}
