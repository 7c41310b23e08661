//! The functional executor and the recorder: runs a kernel's warps on real data in a
//! fixed, deterministic interleaving and streams what they record into a `.tst` file.
//!
//! Each live warp runs on a thread of its own, but only one runs at a time: the
//! executor's state (device memory, shared memories, the kernel's PC and register tables)
//! is handed to a warp with the baton and handed back when it blocks (`BAR.SYNC`), yields
//! (a spin loop) or finishes. Runnable warps wait in one FIFO queue, so the interleaving,
//! and with it every recorded value, address and atomic result, depends only on the
//! kernel and its inputs. Up to `resident_ctas` CTAs are live at once, as on a GPU; a CTA that waits for
//! another (a flag set by a later CTA) makes progress as long as that one is resident.
//!
//! Memory is bounded by the resident CTAs, not by the grid or the trace: each CTA goes to
//! the writer when it and every earlier CTA have finished, warp threads come from a pool
//! as large as the resident warps, and record buffers are reused (see `run_grid`).

use super::mem::{Buffer, DeviceMemory, Elem, OutOfBounds};
use super::spin::{SpinCtx, SpinSite};
use super::warp::{Aborted, RecInst, Warp, WarpRecord, WARP};
use crate::opcodes::{decode_opcode, ArchFamily};
use rustc_hash::FxHashMap as HashMap;
use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use tessera_traces::codec::{AddrRecord, ADDR_DELTA};
use tessera_traces::schema::RZ;
use tessera_traces::{
    ArrayAnnotation, Command, DeviceInfo, Index, KernelCounts, KernelMeta, MBarrierOp,
    NamedBarrier, RawInst, SyncWords, TraceError, TraceWriter, WriterOptions,
};

/// A recording failure.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("kernel {kernel}: CTA ({},{},{}) warp {warp}: {msg}", cta[0], cta[1], cta[2])]
    Kernel {
        kernel: String,
        cta: [u32; 3],
        warp: u32,
        msg: String,
    },
    #[error("{0}")]
    Invalid(String),
}

pub(crate) enum Resume {
    /// The baton, to a warp that has run before.
    Go(Box<ExecState>),
    /// The baton and a warp to run, to an idle thread of the pool.
    Start(Box<ExecState>, WarpJob),
}

/// A warp for a pooled thread to run, with the (emptied) buffers to record into.
pub(crate) struct WarpJob {
    slot: usize,
    id: [u32; 3],
    cta: u32,
    warp: u32,
    rec: WarpRecord,
}

pub(crate) enum WarpEvent {
    Barrier(Box<ExecState>, usize),
    Yield(Box<ExecState>, usize),
    /// The warp waits for a named barrier or an mbarrier ([`ExecState::named_wait`] says
    /// which); the scheduler resumes it once the barrier's phase moves (a named barrier)
    /// or the phase it waits for has completed (an mbarrier).
    NamedWait(Box<ExecState>, usize),
    /// The warp's buffers (in [`ExecState::room`]) or the kernel's tables are nearly
    /// full: the scheduler grows them on its own thread and resumes the same warp at
    /// once (see [`run_grid`] on why warp threads do not allocate).
    Room(Box<ExecState>),
    Done(Box<ExecState>, usize, WarpRecord),
    Failed(Option<Box<ExecState>>, String),
}

impl WarpEvent {
    pub(crate) fn barrier(st: Box<ExecState>, slot: usize) -> Self {
        WarpEvent::Barrier(st, slot)
    }
    pub(crate) fn named_wait(st: Box<ExecState>, slot: usize) -> Self {
        WarpEvent::NamedWait(st, slot)
    }
    pub(crate) fn yielded(st: Box<ExecState>, slot: usize) -> Self {
        WarpEvent::Yield(st, slot)
    }
    pub(crate) fn room(st: Box<ExecState>, _slot: usize) -> Self {
        WarpEvent::Room(st)
    }
}

/// A channel between the scheduler and warp threads built on a mutex and a condition
/// variable, with its queue allocated by its creator: neither sending nor waiting
/// allocates on a warp thread (`std::sync::mpsc` allocates blocks as senders fill them
/// and waker entries as receivers wait). At most one message is in flight at a time (the
/// baton's); [`Mailbox::close`] makes [`Mailbox::recv`] return `None` once drained.
pub(crate) struct Mailbox<T> {
    state: Mutex<MailState<T>>,
    ready: Condvar,
}

struct MailState<T> {
    queue: VecDeque<T>,
    closed: bool,
}

impl<T> Mailbox<T> {
    fn new() -> Arc<Self> {
        Arc::new(Mailbox {
            state: Mutex::new(MailState {
                queue: VecDeque::with_capacity(4),
                closed: false,
            }),
            ready: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, MailState<T>> {
        // Nothing panics while holding the lock; a poisoned one is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `v`; gives it back when the mailbox is closed.
    pub(crate) fn send(&self, v: T) -> Result<(), T> {
        let mut g = self.lock();
        if g.closed {
            return Err(v);
        }
        g.queue.push_back(v);
        drop(g);
        self.ready.notify_one();
        Ok(())
    }

    /// The next message, waiting for it; `None` when closed and drained.
    pub(crate) fn recv(&self) -> Option<T> {
        let mut g = self.lock();
        loop {
            if let Some(v) = g.queue.pop_front() {
                return Some(v);
            }
            if g.closed {
                return None;
            }
            g = self.ready.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
    }

    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

/// Mnemonics that differ between families.
#[derive(Clone, Copy)]
pub(crate) struct Sass {
    family: ArchFamily,
}

impl Sass {
    /// The kernel's architecture family.
    pub(crate) fn family(&self) -> ArchFamily {
        self.family
    }

    /// Volta and Turing spell the default (system-coherent) global access `.SYS`.
    fn sys(&self) -> bool {
        matches!(self.family, ArchFamily::Volta | ArchFamily::Turing)
    }

    pub(crate) fn ldg(&self, bytes: u32) -> &'static str {
        match (bytes, self.sys()) {
            (8, false) => "LDG.E.64",
            (8, true) => "LDG.E.64.SYS",
            (_, false) => "LDG.E",
            (_, true) => "LDG.E.SYS",
        }
    }

    pub(crate) fn stg(&self, bytes: u32) -> &'static str {
        match (bytes, self.sys()) {
            (8, false) => "STG.E.64",
            (8, true) => "STG.E.64.SYS",
            (_, false) => "STG.E",
            (_, true) => "STG.E.SYS",
        }
    }
}

/// Per-kernel tables: PC by source location, destination register by PC, opcodes.
pub(crate) struct KernelTables {
    pcs: HashMap<(usize, u32, u32, u16), u32>,
    /// The unrolled copy the running warp is in ([`Warp::unrolled`]; 0 outside): part of
    /// every PC's key. Set by the warp holding the baton whenever it takes it.
    pub(crate) copy: u8,
    next_pc: u32,
    dst: HashMap<u32, u16>,
    next_reg: u16,
    max_reg: u16,
    reg_budget: u16,
    pub(crate) opcodes: Vec<&'static str>,
    opcode_ids: HashMap<&'static str, u16>,
    pub(crate) sass: Sass,
    /// The kernel's spin regions, one per call site of [`Warp::spin`], in order of first
    /// execution (the writer's thread copies them into the kernel's metadata).
    pub(crate) spins: Vec<SpinSite>,
    /// The kernel's named barriers ([`Warp::bar_sync`], [`Warp::bar_arrive`]), one per
    /// PC, in order of first execution (copied into the kernel's metadata likewise).
    pub(crate) named: Vec<NamedBarrier>,
    /// The kernel's mbarrier instructions ([`Warp::mbar_init`], [`Warp::mbar_arrive`],
    /// [`Warp::mbar_wait`]), one per PC, in order of first execution (copied likewise).
    pub(crate) mbars: Vec<MBarrierOp>,
}

/// Bytes between consecutive SASS instructions (sm_70 and later).
pub const INST_BYTES: u32 = 16;

/// Free entries each kernel table keeps before a warp thread records an instruction: one
/// instruction adds at most a few (its PC, destination and opcode, and the PCs a caller
/// pins before emitting it).
const TABLE_HEADROOM: usize = 8;

impl KernelTables {
    fn new(family: ArchFamily, reg_budget: u16) -> Self {
        let mut t = KernelTables {
            pcs: HashMap::default(),
            copy: 0,
            next_pc: 0,
            dst: HashMap::default(),
            next_reg: 0,
            max_reg: 1,
            reg_budget: reg_budget.clamp(8, 254),
            opcodes: Vec::new(),
            opcode_ids: HashMap::default(),
            sass: Sass { family },
            spins: Vec::new(),
            named: Vec::new(),
            mbars: Vec::new(),
        };
        t.grow();
        t
    }

    fn needs_room(&self) -> bool {
        self.pcs.capacity() - self.pcs.len() < TABLE_HEADROOM
            || self.dst.capacity() - self.dst.len() < TABLE_HEADROOM
            || self.opcodes.capacity() - self.opcodes.len() < TABLE_HEADROOM
            || self.opcode_ids.capacity() - self.opcode_ids.len() < TABLE_HEADROOM
            || self.spins.capacity() == self.spins.len()
            || self.named.capacity() == self.named.len()
            || self.mbars.capacity() == self.mbars.len()
    }

    /// Doubles the tables (at least 64 entries more).
    fn grow(&mut self) {
        self.pcs.reserve(self.pcs.len().max(64));
        self.dst.reserve(self.dst.len().max(64));
        self.opcodes.reserve(self.opcodes.len().max(64));
        self.opcode_ids.reserve(self.opcode_ids.len().max(64));
        if self.spins.capacity() == self.spins.len() {
            self.spins.reserve(self.spins.len().max(4));
        }
        if self.named.capacity() == self.named.len() {
            self.named.reserve(self.named.len().max(4));
        }
        if self.mbars.capacity() == self.mbars.len() {
            self.mbars.reserve(self.mbars.len().max(4));
        }
    }

    /// Registers an mbarrier instruction (room as for [`KernelTables::register_spin`]):
    /// once per PC; running it again must give the same entry.
    pub(crate) fn register_mbar(&mut self, m: MBarrierOp, inline: bool) -> Result<(), String> {
        if let Some(r) = self.mbars.iter().find(|r| r.pc == m.pc) {
            if *r != m {
                return Err(format!(
                    "the mbarrier instruction at pc {:#x} changed between runs of its call site ({} of mbarrier {} then {} of mbarrier {}): a call site must always name the same mbarrier",
                    m.pc,
                    r.kind.name(),
                    r.id,
                    m.kind.name(),
                    m.id,
                ));
            }
            return Ok(());
        }
        if !inline && self.mbars.len() == self.mbars.capacity() {
            return Err("the kernel's mbarrier table is full".into());
        }
        self.mbars.push(m);
        Ok(())
    }

    /// Registers a named barrier instruction (room as for [`KernelTables::register_spin`]):
    /// once per PC; running it again must give the same entry.
    pub(crate) fn register_named(&mut self, b: NamedBarrier, inline: bool) -> Result<(), String> {
        if let Some(r) = self.named.iter().find(|r| r.pc == b.pc) {
            if *r != b {
                return Err(format!(
                    "the named barrier at pc {:#x} changed between runs of its call site (barrier {} of {} threads{} then barrier {} of {} threads{}): a call site must always name the same barrier",
                    b.pc,
                    r.id,
                    r.threads,
                    if r.arrive { ", arrive" } else { "" },
                    b.id,
                    b.threads,
                    if b.arrive { ", arrive" } else { "" },
                ));
            }
            return Ok(());
        }
        if !inline && self.named.len() == self.named.capacity() {
            return Err("the kernel's named-barrier table is full".into());
        }
        self.named.push(b);
        Ok(())
    }

    /// Registers a spin region (from a warp thread the table has room, see
    /// [`KernelTables::needs_room`]; an inline warp, on the scheduler's thread, may grow
    /// it). A call site registers once; running it again must give the same region, and
    /// no two call sites may share a start PC.
    pub(crate) fn register_spin(&mut self, site: SpinSite, inline: bool) -> Result<(), String> {
        if let Some(r) = self.spins.iter().find(|r| r.test_pc == site.test_pc) {
            if *r != site {
                return Err(format!(
                    "the spin region at pc {:#x} changed between runs of its call site (start pc {:#x} then {:#x}, or its exit terms, back-off or label): a call site must always record the same region",
                    site.test_pc, r.start_pc, site.start_pc
                ));
            }
            return Ok(());
        }
        if let Some(r) = self.spins.iter().find(|r| r.start_pc == site.start_pc) {
            return Err(format!(
                "two spin regions (tests at pc {:#x} and {:#x}) start at pc {:#x}: each region's head must begin with an instruction of its own",
                r.test_pc, site.test_pc, site.start_pc
            ));
        }
        if !inline && self.spins.len() == self.spins.capacity() {
            return Err("the kernel's spin-region table is full".into());
        }
        self.spins.push(site);
        Ok(())
    }

    /// The PC of the `sub`-th instruction emitted at source location `loc` (in the
    /// current unrolled copy).
    pub(crate) fn pc(&mut self, loc: &'static Location<'static>, sub: u8) -> u32 {
        let key = (
            loc.file().as_ptr() as usize,
            loc.line(),
            loc.column(),
            u16::from(sub) | u16::from(self.copy) << 8,
        );
        let next = &mut self.next_pc;
        *self.pcs.entry(key).or_insert_with(|| {
            let pc = *next;
            *next += INST_BYTES;
            pc
        })
    }

    pub(crate) fn opcode(&mut self, name: &'static str) -> u16 {
        let ops = &mut self.opcodes;
        *self.opcode_ids.entry(name).or_insert_with(|| {
            ops.push(name);
            (ops.len() - 1) as u16
        })
    }

    /// The destination register of `pc`, allocated the first time it executes: R0, then
    /// R2 upwards (R1 is the stack pointer), pairs aligned to even registers, wrapping
    /// within the register budget.
    pub(crate) fn dst_reg(&mut self, pc: u32, pair: bool) -> u16 {
        if let Some(&r) = self.dst.get(&pc) {
            return r;
        }
        let mut r = self.next_reg;
        if r == 1 {
            r = 2;
        }
        if pair && r % 2 == 1 {
            r += 1;
        }
        let width = if pair { 2 } else { 1 };
        if r + width > self.reg_budget {
            r = 2;
        }
        self.next_reg = r + width;
        self.max_reg = self.max_reg.max(r + width - 1);
        self.dst.insert(pc, r);
        r
    }

    /// Fixes `pc`'s destination to `reg` (accumulators updated in place); a pair covers
    /// `reg + 1` too. RZ (a value produced after its warp exited) pins nothing.
    pub(crate) fn pin_dst(&mut self, pc: u32, reg: u16, pair: bool) {
        if reg == RZ {
            return;
        }
        self.dst.entry(pc).or_insert(reg);
        self.max_reg = self.max_reg.max(reg + u16::from(pair));
    }
}

/// Named barriers supported per CTA (`BAR` ids 0 to 15).
pub const NAMED_BARRIERS: usize = 16;

/// mbarrier objects supported per CTA (ids 0 to 31, as `tessera_traces::MBarrierOp`).
pub const MBARRIERS: usize = 32;

/// One mbarrier object of a CTA, as the timing model keeps it (`partitions/src/sm/mbarrier.rs`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MBar {
    /// Arrivals each phase expects (0 before its init).
    pub(crate) expected: u32,
    /// Arrivals still missing in the current phase.
    pub(crate) pending: u32,
    /// Phases completed.
    pub(crate) completed: u32,
}

/// What a blocked warp waits for within its CTA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CtaWait {
    /// A named barrier: its id, the phase it waits to see move, and the thread count it
    /// names.
    Named(usize, u32, u32),
    /// An mbarrier: its id and the phase it waits to complete.
    MBar(usize, u32),
}

/// A CTA's named-barrier and mbarrier state, made on the scheduler's thread when the CTA
/// starts (warp threads only update it).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CtaBars {
    /// Per barrier id: threads arrived in the current phase and the phase (generation),
    /// which moves each time the barrier completes.
    pub(crate) bars: [(u32, u32); NAMED_BARRIERS],
    /// Per mbarrier id: its count and phases.
    pub(crate) mbars: [MBar; MBARRIERS],
    /// Warps of the CTA, and those that have finished.
    pub(crate) warps: u32,
    pub(crate) done: u32,
}

impl CtaBars {
    /// Completes barrier `id` (resets its count, moves its phase) when enough threads
    /// have arrived for a wait that names `threads` (0: every unfinished warp).
    pub(crate) fn complete(&mut self, id: usize, threads: u32) -> bool {
        let target = if threads == 0 {
            self.warps.saturating_sub(self.done) * WARP as u32
        } else {
            threads
        };
        match self.bars.get_mut(id) {
            Some(s) if s.0 > 0 && s.0 >= target => {
                s.0 = 0;
                s.1 = s.1.wrapping_add(1);
                true
            }
            _ => false,
        }
    }

    /// Whether a warp waiting for `wait` may go on (completing a named barrier whose
    /// count is now reached, as [`CtaBars::complete`]).
    pub(crate) fn released(&mut self, wait: CtaWait) -> bool {
        match wait {
            CtaWait::Named(id, phase, threads) => {
                self.bars.get(id).is_some_and(|s| s.1 != phase) || self.complete(id, threads)
            }
            CtaWait::MBar(id, phase) => self.mbars.get(id).is_some_and(|m| m.completed > phase),
        }
    }
}

/// What moves with the baton.
pub(crate) struct ExecState {
    pub(crate) mem: DeviceMemory,
    pub(crate) kernel: KernelTables,
    shared: HashMap<u32, Vec<u8>>,
    /// Named-barrier state of the live CTAs, by CTA.
    pub(crate) bars: HashMap<u32, CtaBars>,
    /// Set by a warp about to wait on a named barrier or an mbarrier: what it waits for.
    pub(crate) named_wait: Option<CtaWait>,
    error: Option<String>,
    /// A warp's record while the scheduler grows it ([`WarpEvent::Room`]).
    pub(crate) room: WarpRecord,
    /// The declared sync words, `[start, end)` byte ranges in address order.
    pub(crate) sync: Vec<(u64, u64)>,
    /// Set while the warp holding the baton runs a dry pass of a branch or queue tail
    /// (`Warp::branch`, `Warp::queue`): stores, atomics and reductions leave memory as it
    /// is (an atomic returns the current value), and a load outside every allocation
    /// reads 0 instead of failing (a dry pass runs the tail on values the lane may never
    /// take).
    pub(crate) dry: bool,
}

impl ExecState {
    fn new(mem: DeviceMemory, kernel: KernelTables) -> Box<Self> {
        Box::new(ExecState {
            mem,
            kernel,
            shared: HashMap::default(),
            bars: HashMap::default(),
            named_wait: None,
            error: None,
            room: WarpRecord::default(),
            sync: Vec::new(),
            dry: false,
        })
    }

    /// Whether `addr` lies in a declared sync word.
    #[inline]
    pub(crate) fn is_sync(&self, addr: u64) -> bool {
        let i = self.sync.partition_point(|&(_, end)| end <= addr);
        self.sync.get(i).is_some_and(|&(start, _)| start <= addr)
    }

    /// Whether a warp thread must have its record (`rec`) or the kernel's tables grown
    /// before it records the next instruction.
    pub(crate) fn needs_room(&self, rec: &WarpRecord) -> bool {
        rec.needs_room() || self.kernel.needs_room()
    }

    /// Grows the record in `room` and the tables, on the scheduler's thread.
    fn grow(&mut self) {
        self.room.grow();
        if self.kernel.needs_room() {
            self.kernel.grow();
        }
    }

    fn fail(&mut self, msg: String) {
        self.error.get_or_insert(msg);
    }

    /// Makes a starting CTA's shared memory and barrier state (scheduler's thread).
    fn start_cta(&mut self, cta: u32, shmem_bytes: u32, warps: u32) {
        self.shared.insert(cta, vec![0u8; shmem_bytes as usize]);
        self.bars.insert(
            cta,
            CtaBars {
                warps,
                ..CtaBars::default()
            },
        );
    }

    fn end_cta(&mut self, cta: u32) {
        self.shared.remove(&cta);
        self.bars.remove(&cta);
    }

    fn warp_done(&mut self, cta: u32) {
        if let Some(b) = self.bars.get_mut(&cta) {
            b.done += 1;
        }
    }

    pub(crate) fn read_global(&mut self, addr: u64, bytes: u32) -> u64 {
        match self.mem.read(addr, bytes) {
            Ok(v) => v,
            Err(_) if self.dry => 0,
            Err(e) => {
                self.fail(format!("load: {e}"));
                0
            }
        }
    }

    pub(crate) fn write_global(&mut self, addr: u64, bytes: u32, v: u64) {
        if self.dry {
            return;
        }
        if let Err(e) = self.mem.write(addr, bytes, v) {
            self.fail(format!("store: {e}"));
        }
    }

    fn shared_slot(&mut self, cta: u32, off: u32, bytes: u32) -> Option<&mut [u8]> {
        let end = off as usize + bytes as usize;
        let n = self.shared.get(&cta).map_or(0, |sm| sm.len());
        if end > n {
            self.fail(format!(
                "shared-memory access of {bytes} bytes at offset {off} beyond the CTA's {n} bytes"
            ));
            return None;
        }
        self.shared
            .get_mut(&cta)
            .map(|sm| &mut sm[off as usize..end])
    }

    pub(crate) fn read_shared(&mut self, cta: u32, off: u32, bytes: u32) -> u64 {
        if self.dry {
            let n = self.shared.get(&cta).map_or(0, |sm| sm.len());
            if off as usize + bytes as usize > n {
                return 0;
            }
        }
        match self.shared_slot(cta, off, bytes) {
            Some(s) => {
                let mut b = [0u8; 8];
                b[..s.len()].copy_from_slice(s);
                u64::from_le_bytes(b)
            }
            None => 0,
        }
    }

    pub(crate) fn write_shared(&mut self, cta: u32, off: u32, bytes: u32, v: u64) {
        if self.dry {
            return;
        }
        if let Some(s) = self.shared_slot(cta, off, bytes) {
            let n = s.len();
            s.copy_from_slice(&v.to_le_bytes()[..n]);
        }
    }
}

/// One kernel launch.
#[derive(Clone, Debug)]
pub struct LaunchSpec {
    pub name: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Shared memory per CTA, bytes.
    pub shmem_bytes: u32,
    /// Registers per thread to declare in the trace (occupancy studies); the recorded
    /// register use when `None` or smaller.
    pub regs_per_thread: Option<u32>,
    pub annotations: Vec<ArrayAnnotation>,
    /// CTAs live at once in the capture (see the module docs).
    pub resident_ctas: u32,
    /// Whether warps may block (`barrier`, `spin_yield`). A kernel that never does runs
    /// its warps inline, one after the other, in the order the scheduler would pick them
    /// (so the trace is the same), much faster; blocking in such a kernel is an error.
    pub blocking: bool,
    /// The kernel's own binary version (its `-binary version` and the SASS table its
    /// opcodes are decoded with), when it differs from the recording's
    /// ([`Recorder::create`]): a kernel that uses Hopper-only instructions (mbarriers,
    /// [`Warp::mbar_init`]) sets 90. `None`: the recording's.
    pub binary_version: Option<u32>,
}

/// Largest CTA: 1024 threads (all NVIDIA GPUs since Fermi).
pub const MAX_THREADS_PER_CTA: u32 = 1024;
/// Largest shared memory per CTA: 227 KiB (H100, the largest of any preset).
pub const MAX_SHMEM_PER_CTA: u32 = 227 * 1024;
/// Register budget the allocator wraps within, unless a launch declares more.
pub const DEFAULT_REG_BUDGET: u16 = 32;

impl LaunchSpec {
    pub fn new(name: &str, grid: [u32; 3], block: [u32; 3]) -> Self {
        LaunchSpec {
            name: name.to_string(),
            grid,
            block,
            shmem_bytes: 0,
            regs_per_thread: None,
            annotations: Vec::new(),
            resident_ctas: 16,
            blocking: true,
            binary_version: None,
        }
    }

    fn check(&self) -> Result<(u32, u32), RecordError> {
        let bad = |m: String| Err(RecordError::Invalid(format!("kernel {}: {m}", self.name)));
        if self.grid.contains(&0) || self.block.contains(&0) {
            return bad(format!(
                "grid {:?} and block {:?} must have no zero dimension",
                self.grid, self.block
            ));
        }
        let threads = self.block.iter().map(|&d| d as u64).product::<u64>();
        if threads > MAX_THREADS_PER_CTA as u64 {
            return bad(format!(
                "{threads} threads per CTA; at most {MAX_THREADS_PER_CTA}"
            ));
        }
        if self.shmem_bytes > MAX_SHMEM_PER_CTA {
            return bad(format!(
                "{} bytes of shared memory per CTA; at most {MAX_SHMEM_PER_CTA}",
                self.shmem_bytes
            ));
        }
        let ctas = self.grid.iter().map(|&d| d as u64).product::<u64>();
        match u32::try_from(ctas) {
            Ok(c) => Ok((c, threads as u32)),
            Err(_) => bad(format!("{ctas} CTAs; at most 2^32-1")),
        }
    }
}

/// What a recording wrote so far.
#[derive(Clone, Debug, Default)]
pub struct RecordStats {
    pub kernels: u64,
    pub ctas: u64,
    pub warps: u64,
    pub warp_insts: u64,
    pub thread_insts: u64,
    /// Most CTAs held in memory at once by any launch: running, or finished and waiting
    /// for an earlier CTA to be written. Bounded by the launch's `resident_ctas` (plus
    /// CTAs that finish ahead of a slow earlier one), not by its grid.
    pub peak_held_ctas: u64,
    /// Most bytes of finished warps' records waiting to be written at once, over all
    /// launches (the records of running warps are bounded by the same resident CTAs).
    pub peak_held_bytes: u64,
    /// Most warp threads one launch started: a pool sized by the resident warps
    /// (`resident_ctas` times the warps of a CTA), reused from CTA to CTA; 0 for a
    /// launch run inline.
    pub peak_warp_threads: u64,
    /// Allocations warp threads made while running warps, over all launches (counted in
    /// test builds only): none, or the allocator keeps pages per thread.
    #[cfg(test)]
    pub(crate) warp_thread_allocs: u64,
}

/// What one launch held at most (see [`RecordStats`]).
#[derive(Default)]
struct Held {
    ctas: u64,
    bytes: u64,
    threads: u64,
    #[cfg_attr(not(test), allow(dead_code))]
    thread_allocs: u64,
}

impl Held {
    fn note(&mut self, ctas: usize, bytes: u64) {
        self.ctas = self.ctas.max(ctas as u64);
        self.bytes = self.bytes.max(bytes);
    }
}

/// Records a whole program (allocations, copies, kernel launches) into one `.tst` file.
pub struct Recorder {
    writer: TraceWriter,
    mem: Option<DeviceMemory>,
    family: ArchFamily,
    binary_version: u32,
    /// The device that alloc, upload and launch commands go to (see [`Recorder::set_device`]).
    device: u32,
    /// Devices added so far (device 0 by [`Recorder::create`]).
    n_devices: u32,
    next_kernel_id: u32,
    generator: String,
    /// Declared sync words ([`Recorder::sync_words`]).
    sync: Vec<SyncDecl>,
    pub stats: RecordStats,
}

/// Sync words declared by [`Recorder::sync_words`].
struct SyncDecl {
    /// Index in the writer's sync words.
    index: usize,
    buf: Buffer<u32>,
    checked: bool,
}

/// Yields one warp may make before the capture gives up on it: a spin loop that never
/// ends (a flag nobody sets) is reported, not run forever.
pub const MAX_SPIN_YIELDS: u64 = 100_000;

struct WarpSlot {
    yields: u64,
    /// The pooled thread running the warp.
    worker: usize,
    /// The warp's assignment until it first runs.
    job: Option<WarpJob>,
    cta: u32,
    warp: u32,
    at_barrier: bool,
    /// Waiting on a named barrier or an mbarrier.
    named: Option<CtaWait>,
    done: bool,
    record: Option<WarpRecord>,
}

struct CtaRun {
    id: [u32; 3],
    slots: Vec<usize>,
    arrived: usize,
    done: usize,
}

impl Recorder {
    /// Starts a recording into `path` for an architecture given by its binary version
    /// (80 = sm_80, the default of `trace gen`). `generator` names the workload and its
    /// parameters, stored with every kernel.
    pub fn create(path: &Path, binary_version: u32, generator: &str) -> Result<Self, RecordError> {
        let family = record_family(binary_version)?;
        let mut writer = TraceWriter::create(path, WriterOptions::default())?;
        let device = writer.add_device(DeviceInfo {
            source: "kernelslist.g".into(),
        });
        Ok(Recorder {
            writer,
            mem: Some(DeviceMemory::new()),
            family,
            binary_version,
            device,
            n_devices: 1,
            next_kernel_id: 1,
            generator: generator.to_string(),
            sync: Vec::new(),
            stats: RecordStats::default(),
        })
    }

    /// Adds a device (a CUDA context of its own, as on a multi-GPU node) and returns its
    /// number; commands keep going to the current device until [`Recorder::set_device`].
    /// All devices share one functional memory and one address space (CUDA's unified
    /// virtual addressing), so a kernel may access any device's allocations: a peer
    /// access when the allocation is another device's.
    pub fn add_device(&mut self) -> u32 {
        // Zero-padded so that Accel-Sim export and re-import (lists sorted by name) keep
        // the device order.
        let d = self.writer.add_device(DeviceInfo {
            source: format!("kernelslist_ctx_{:04}.g", self.n_devices),
        });
        self.n_devices += 1;
        d
    }

    /// Makes `device` the one later `alloc`, `upload` and `launch` calls record on
    /// (`cudaSetDevice`); an error for a device not added.
    pub fn set_device(&mut self, device: u32) -> Result<(), RecordError> {
        if device >= self.n_devices {
            return Err(RecordError::Invalid(format!(
                "set_device({device}): the recording has {} device(s); add_device first",
                self.n_devices
            )));
        }
        self.device = device;
        Ok(())
    }

    /// The device commands currently go to.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// Number of devices in the recording.
    pub fn devices(&self) -> u32 {
        self.n_devices
    }

    fn mem(&mut self) -> &mut DeviceMemory {
        self.mem.get_or_insert_with(DeviceMemory::new)
    }

    /// `cudaMalloc` of `n` elements, zero-filled; recorded as an `Alloc` command.
    pub fn alloc<T: Elem>(&mut self, name: &str, n: u64) -> Result<Buffer<T>, RecordError> {
        let bytes = n * T::BYTES as u64;
        let base = self.mem().alloc(name, bytes);
        self.writer.add_command(Command::Alloc {
            device: self.device,
            addr: base,
            bytes,
        })?;
        Ok(Buffer::new(base, n))
    }

    /// `cudaMemcpy` host to device of all of `buf`; recorded as `MemcpyHtoD`.
    pub fn upload<T: Elem>(&mut self, buf: Buffer<T>, data: &[T]) -> Result<(), RecordError> {
        self.check_not_sync(buf.base, buf.base + buf.bytes())?;
        if data.len() as u64 != buf.len {
            return Err(RecordError::Invalid(format!(
                "upload of {} elements into a buffer of {}",
                data.len(),
                buf.len
            )));
        }
        self.mem()
            .write_slice(buf, data)
            .map_err(|e: OutOfBounds| RecordError::Invalid(e.to_string()))?;
        self.writer.add_command(Command::MemcpyHtoD {
            device: self.device,
            addr: buf.base,
            bytes: buf.bytes(),
        })?;
        Ok(())
    }

    /// `cudaMemcpy` host to device of all of `buf` from `data`, generated element by
    /// element (no host copy of the whole array); recorded as `MemcpyHtoD`. An error when
    /// `data` does not give exactly `buf.len` elements.
    pub fn upload_iter<T: Elem>(
        &mut self,
        buf: Buffer<T>,
        data: impl IntoIterator<Item = T>,
    ) -> Result<(), RecordError> {
        self.check_not_sync(buf.base, buf.base + buf.bytes())?;
        let mut n = 0u64;
        for v in data {
            if n < buf.len {
                self.mem()
                    .write(buf.addr(n), T::BYTES, v.to_bits())
                    .map_err(|e| RecordError::Invalid(e.to_string()))?;
            }
            n += 1;
        }
        if n != buf.len {
            return Err(RecordError::Invalid(format!(
                "upload of {n} elements into a buffer of {}",
                buf.len
            )));
        }
        self.writer.add_command(Command::MemcpyHtoD {
            device: self.device,
            addr: buf.base,
            bytes: buf.bytes(),
        })?;
        Ok(())
    }

    /// Elements `first..first + n` of `buf` (a part of [`Recorder::download`], for
    /// checking a large result piece by piece).
    pub fn download_range<T: Elem>(
        &mut self,
        buf: Buffer<T>,
        first: u64,
        n: u64,
    ) -> Result<Vec<T>, RecordError> {
        match first.checked_add(n) {
            Some(end) if end <= buf.len => {}
            _ => {
                return Err(RecordError::Invalid(format!(
                    "download of {n} elements from element {first} of a buffer of {}",
                    buf.len
                )))
            }
        }
        self.mem()
            .read_slice(Buffer::<T>::new(buf.addr(first), n))
            .map_err(|e| RecordError::Invalid(e.to_string()))
    }

    /// The current contents of `buf` (device to host; not a trace command: Accel-Sim
    /// traces do not carry them either).
    pub fn download<T: Elem>(&mut self, buf: Buffer<T>) -> Result<Vec<T>, RecordError> {
        self.mem()
            .read_slice(buf)
            .map_err(|e| RecordError::Invalid(e.to_string()))
    }

    /// Runs `kernel` over the grid of `spec`, recording every warp; returns the kernel's
    /// counts.
    pub fn launch(
        &mut self,
        spec: &LaunchSpec,
        kernel: &(dyn Fn(&mut Warp) + Sync),
    ) -> Result<KernelCounts, RecordError> {
        let (n_ctas, threads) = spec.check()?;
        let (binary_version, family) = match spec.binary_version {
            None => (self.binary_version, self.family),
            Some(v) => (
                v,
                record_family(v)
                    .map_err(|e| RecordError::Invalid(format!("kernel {}: {e}", spec.name)))?,
            ),
        };
        let warps_per_cta = threads.div_ceil(WARP as u32);
        let mut meta = KernelMeta::new(&spec.name, spec.grid, spec.block);
        meta.id = self.next_kernel_id;
        self.next_kernel_id += 1;
        meta.shmem_bytes = spec.shmem_bytes;
        meta.binary_version = binary_version;
        meta.nvbit_version = format!("tessera {}", env!("CARGO_PKG_VERSION"));
        meta.tracer_version = 5;
        meta.device = self.device;
        meta.source = format!("kernel-{}.traceg", meta.id);
        meta.records_operands = true;
        meta.annotations = spec.annotations.clone();
        meta.generator = self.generator.clone();
        let kidx = self.writer.begin_kernel(meta)?;
        self.writer.add_command(Command::KernelLaunch {
            device: self.device,
            kernel: kidx,
        })?;
        let budget = spec
            .regs_per_thread
            .map_or(DEFAULT_REG_BUDGET, |r| r.clamp(8, 254) as u16);
        let mut state = ExecState::new(
            self.mem.take().unwrap_or_default(),
            KernelTables::new(family, budget),
        );
        state.sync = self
            .sync
            .iter()
            .map(|d| (d.buf.base, d.buf.base + d.buf.bytes()))
            .collect();
        state.sync.sort_unstable();
        let mut written = (0usize, 0usize, 0usize, 0usize);
        let writer = &mut self.writer;
        let mut sink = |st: &ExecState, id: [u32; 3], recs: &[WarpRecord]| {
            write_cta(writer, &st.kernel, &mut written, family, id, recs)
        };
        let mut held = Held::default();
        let (res, state) = if spec.blocking {
            run_grid(
                spec,
                n_ctas,
                threads,
                warps_per_cta,
                state,
                kernel,
                &mut sink,
                &mut held,
            )
        } else {
            run_inline(
                spec,
                n_ctas,
                threads,
                warps_per_cta,
                state,
                kernel,
                &mut sink,
                &mut held,
            )
        };
        self.stats.peak_held_ctas = self.stats.peak_held_ctas.max(held.ctas);
        self.stats.peak_held_bytes = self.stats.peak_held_bytes.max(held.bytes);
        self.stats.peak_warp_threads = self.stats.peak_warp_threads.max(held.threads);
        #[cfg(test)]
        {
            self.stats.warp_thread_allocs += held.thread_allocs;
        }
        let max_reg = state.kernel.max_reg as u32;
        self.mem = Some(state.mem);
        res?;
        if let Some(m) = self.writer.kernel_meta_mut() {
            m.nregs = (max_reg + 1).max(spec.regs_per_thread.unwrap_or(0));
        }
        let c = self.writer.end_kernel()?;
        self.stats.kernels += 1;
        self.stats.ctas += c.ctas;
        self.stats.warps += c.warps;
        self.stats.warp_insts += c.warp_insts;
        self.stats.thread_insts += c.thread_insts;
        Ok(c)
    }

    /// Declares `buf` as sync words of the current device (format version 3): 32-bit
    /// words whose values the timing model computes as atomics and strong stores reach
    /// them, and that spin regions read ([`Warp::spin`]). Their initial values are the
    /// buffer's contents now: declare them after their last upload (uploading to them
    /// afterwards is an error). When `checked`, their contents at [`Recorder::finish`]
    /// are the values the model must end with: set it only where the final values do
    /// not depend on scheduling (a lock back to 0, a barrier counter). In kernels, a
    /// spin head's loads and value-returning atomics must read sync words, stores to them
    /// must be [`Warp::st_strong`], and atomics on them 32-bit integer ones.
    pub fn sync_words(&mut self, buf: Buffer<u32>, checked: bool) -> Result<(), RecordError> {
        let (lo, hi) = (buf.base, buf.base + buf.bytes());
        if buf.len == 0 {
            return Err(RecordError::Invalid("sync words: an empty buffer".into()));
        }
        if let Some(d) = self
            .sync
            .iter()
            .find(|d| d.buf.base < hi && lo < d.buf.base + d.buf.bytes())
        {
            return Err(RecordError::Invalid(format!(
                "sync words at {lo:#x} overlap those declared at {:#x}",
                d.buf.base
            )));
        }
        let name = self
            .mem()
            .name_of(buf.base)
            .ok_or_else(|| {
                RecordError::Invalid(format!(
                    "sync words at {lo:#x}: not an allocation of the recording"
                ))
            })?
            .to_string();
        let init = self.download(buf)?;
        self.writer.add_sync_words(SyncWords {
            name,
            device: self.device,
            addr: buf.base,
            init,
            expect: Vec::new(),
        });
        let index = self.writer.index().sync_words.len() - 1;
        self.sync.push(SyncDecl {
            index,
            buf,
            checked,
        });
        Ok(())
    }

    /// An error when `[lo, hi)` overlaps declared sync words (their initial values are
    /// fixed at declaration).
    fn check_not_sync(&self, lo: u64, hi: u64) -> Result<(), RecordError> {
        match self
            .sync
            .iter()
            .find(|d| d.buf.base < hi && lo < d.buf.base + d.buf.bytes())
        {
            Some(d) => Err(RecordError::Invalid(format!(
                "upload to the sync words at {:#x} after their declaration: declare sync words after their last upload",
                d.buf.base
            ))),
            None => Ok(()),
        }
    }

    /// Writes the index; the file is complete. Checked sync words get their expected
    /// values: their contents now.
    pub fn finish(mut self) -> Result<Index, RecordError> {
        let decls = std::mem::take(&mut self.sync);
        for d in decls.iter().filter(|d| d.checked) {
            let v = self.download(d.buf)?;
            if let Some(w) = self.writer.sync_words_mut().get_mut(d.index) {
                w.expect = v;
            }
        }
        Ok(self.writer.finish()?)
    }
}

/// The family the recorder emits SASS of for `binary_version` (sm_70 and later).
fn record_family(binary_version: u32) -> Result<ArchFamily, RecordError> {
    ArchFamily::from_binary_version(binary_version)
        .filter(|f| {
            matches!(
                f,
                ArchFamily::Volta
                    | ArchFamily::Turing
                    | ArchFamily::Ampere
                    | ArchFamily::Ada
                    | ArchFamily::Hopper
            )
        })
        .ok_or_else(|| {
            RecordError::Invalid(format!(
                "cannot record for binary version {binary_version}: the recorder emits sm_70 and later SASS (70, 72, 75, 80, 86, 87, 89, 90)"
            ))
        })
}

type CtaSink<'a> = dyn FnMut(&ExecState, [u32; 3], &[WarpRecord]) -> Result<(), RecordError> + 'a;

fn cta_coords(i: u32, grid: [u32; 3]) -> [u32; 3] {
    [i % grid[0], i / grid[0] % grid[1], i / (grid[0] * grid[1])]
}

impl Warp {
    /// Warp `w` of CTA `id` (linear index `cta`), lanes past the CTA's `threads` invalid;
    /// `baton` is the slot and channels of a threaded warp, `None` inline.
    fn new(
        st: Box<ExecState>,
        baton: Option<Baton>,
        spec: &LaunchSpec,
        id: [u32; 3],
        cta: u32,
        w: u32,
        threads: u32,
    ) -> Warp {
        let lanes = (threads - w * WARP as u32).min(WARP as u32);
        let valid = if lanes == 32 {
            u32::MAX
        } else {
            (1u32 << lanes) - 1
        };
        let mut st = st;
        st.kernel.copy = 0;
        let (slot, resume, events) = match baton {
            Some((slot, rx, tx)) => (slot, Some(rx), Some(tx)),
            None => (0, None, None),
        };
        Warp {
            st: Some(st),
            resume,
            events,
            slot,
            cta: id,
            warp: w,
            block: spec.block,
            grid: spec.grid,
            cta_linear: cta,
            valid,
            mask: valid,
            exited: 0,
            rec: WarpRecord::default(),
            spin: SpinCtx::default(),
            unroll: 0,
        }
    }
}

/// Runs the kernel body on `warp` between the prologue and the epilogue, catching panics.
fn run_body(warp: &mut Warp, kernel: &(dyn Fn(&mut Warp) + Sync)) -> std::thread::Result<()> {
    catch_unwind(AssertUnwindSafe(|| {
        warp.prologue();
        kernel(warp);
        warp.epilogue();
    }))
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "kernel code panicked".into())
}

/// Runs a non-blocking kernel's warps one after the other on this thread: CTA by CTA,
/// warp by warp, the order the scheduler's FIFO gives when no warp blocks. One CTA's
/// records are held at a time, in buffers reused from CTA to CTA.
#[allow(clippy::too_many_arguments)]
fn run_inline(
    spec: &LaunchSpec,
    n_ctas: u32,
    threads: u32,
    warps_per_cta: u32,
    mut st: Box<ExecState>,
    kernel: &(dyn Fn(&mut Warp) + Sync),
    sink: &mut CtaSink<'_>,
    held: &mut Held,
) -> (Result<(), RecordError>, Box<ExecState>) {
    let mut recs: Vec<WarpRecord> = Vec::with_capacity(warps_per_cta as usize);
    for cta in 0..n_ctas {
        let id = cta_coords(cta, spec.grid);
        st.start_cta(cta, spec.shmem_bytes, warps_per_cta);
        for w in 0..warps_per_cta {
            let mut warp = Warp::new(st, None, spec, id, cta, w, threads);
            if let Some(r) = recs.get_mut(w as usize) {
                r.clear();
                warp.rec = std::mem::take(r);
            }
            let r = run_body(&mut warp, kernel);
            st = match warp.st.take() {
                Some(s) => s,
                None => {
                    return (
                        Err(RecordError::Invalid("executor lost its state".into())),
                        fallback_state(),
                    )
                }
            };
            let kerr = |msg: String| RecordError::Kernel {
                kernel: spec.name.clone(),
                cta: id,
                warp: w,
                msg,
            };
            if let Err(p) = r {
                let msg = if p.is::<super::warp::InlineBlocked>() {
                    "the kernel blocked (BAR.SYNC or a spin loop) but was launched with blocking = false".to_string()
                } else {
                    panic_message(&p)
                };
                return (Err(kerr(msg)), st);
            }
            if let Some(msg) = st.error.take() {
                return (Err(kerr(msg)), st);
            }
            st.warp_done(cta);
            let rec = std::mem::take(&mut warp.rec);
            match recs.get_mut(w as usize) {
                Some(r) => *r = rec,
                None => recs.push(rec),
            }
        }
        st.end_cta(cta);
        held.note(1, recs.iter().map(WarpRecord::bytes).sum());
        if let Err(e) = sink(&st, id, &recs) {
            return (Err(e), st);
        }
    }
    (Ok(()), st)
}

fn fallback_state() -> Box<ExecState> {
    ExecState::new(
        DeviceMemory::new(),
        KernelTables::new(ArchFamily::Ampere, DEFAULT_REG_BUDGET),
    )
}

/// A threaded warp's slot and mailboxes (resumptions in, events out).
type Baton = (usize, Arc<Mailbox<Resume>>, Arc<Mailbox<WarpEvent>>);

/// A thread of the warp pool: runs the warps it is given, one after the other, each
/// until it finishes (waiting for the baton whenever it blocks or yields); ends when the
/// scheduler closes its mailbox.
fn warp_worker(
    rx: Arc<Mailbox<Resume>>,
    events: Arc<Mailbox<WarpEvent>>,
    spec: &LaunchSpec,
    threads: u32,
    kernel: &(dyn Fn(&mut Warp) + Sync),
    allocs: &AtomicU64,
) {
    while let Some(Resume::Start(first, job)) = rx.recv() {
        let allocs_before = thread_allocs();
        let WarpJob {
            slot,
            id,
            cta,
            warp: w,
            rec,
        } = job;
        let baton = Some((slot, rx.clone(), events.clone()));
        let mut warp = Warp::new(first, baton, spec, id, cta, w, threads);
        warp.rec = rec;
        match run_body(&mut warp, kernel) {
            Ok(()) => {
                let Some(stv) = warp.st.take() else {
                    return;
                };
                let rec = std::mem::take(&mut warp.rec);
                allocs.fetch_add(thread_allocs() - allocs_before, Ordering::Relaxed);
                if events.send(WarpEvent::Done(stv, slot, rec)).is_err() {
                    return;
                }
            }
            Err(p) if p.is::<Aborted>() => return,
            Err(p) => {
                let msg = panic_message(&p);
                let _ = events.send(WarpEvent::Failed(warp.st.take(), msg));
                return;
            }
        }
    }
}

/// The warp threads' mailboxes; dropping the pool closes them, which ends the threads
/// (idle, or waiting for a baton that will not come) before the scope joins them.
struct Pool(Vec<Arc<Mailbox<Resume>>>);

impl Drop for Pool {
    fn drop(&mut self) {
        for w in &self.0 {
            w.close();
        }
    }
}

/// The scheduler: see the module docs. Returns the state (always) and the outcome.
///
/// Memory stays bounded by the resident CTAs, whatever the grid: finished CTAs go to the
/// writer in order as soon as every earlier one has, warps run on a pool of threads that
/// grows to the most warps resident at once and is reused from CTA to CTA, and so are the
/// buffers warps record into. Warp threads allocate nothing: the buffers and kernel tables
/// are allocated and grown on this thread ([`WarpEvent::Room`]) and the mailboxes hold
/// their queues. With a thread per warp that allocated its own buffers, the allocator
/// (mimalloc, with transparent huge pages) kept a few MiB of every warp thread's pages
/// resident: 2.6 GiB of RSS for a 512^3 gemm whose trace is 377 KB.
#[allow(clippy::too_many_arguments)]
fn run_grid(
    spec: &LaunchSpec,
    n_ctas: u32,
    threads: u32,
    warps_per_cta: u32,
    state: Box<ExecState>,
    kernel: &(dyn Fn(&mut Warp) + Sync),
    sink: &mut CtaSink<'_>,
    held: &mut Held,
) -> (Result<(), RecordError>, Box<ExecState>) {
    let resident = spec.resident_ctas.max(1);
    let max_live_warps = resident as usize * warps_per_cta as usize;
    let mut st: Option<Box<ExecState>> = Some(state);
    let worker_allocs = AtomicU64::new(0);
    let allocs = &worker_allocs;
    let res = std::thread::scope(|s| -> Result<(), RecordError> {
        let events = Mailbox::<WarpEvent>::new();
        let mut pool = Pool(Vec::new());
        // Threads without a warp.
        let mut idle: Vec<usize> = Vec::new();
        // Emptied record buffers, for the next warps.
        let mut spare: Vec<WarpRecord> = Vec::new();
        let mut slots: HashMap<usize, WarpSlot> = HashMap::default();
        let mut ctas: BTreeMap<u32, CtaRun> = BTreeMap::new();
        let mut queue: VecDeque<usize> = VecDeque::new();
        let mut finished: BTreeMap<u32, ([u32; 3], Vec<WarpRecord>)> = BTreeMap::new();
        // Bytes of finished warps' records not yet written.
        let mut done_bytes = 0u64;
        let mut next_cta = 0u32;
        let mut next_write = 0u32;
        let mut next_slot = 0usize;
        let kerr = |cta: [u32; 3], warp: u32, msg: String| RecordError::Kernel {
            kernel: spec.name.clone(),
            cta,
            warp,
            msg,
        };
        loop {
            while (ctas.len() as u32) < resident && next_cta < n_ctas {
                let id = cta_coords(next_cta, spec.grid);
                if let Some(stv) = st.as_mut() {
                    stv.start_cta(next_cta, spec.shmem_bytes, warps_per_cta);
                }
                let mut run = CtaRun {
                    id,
                    slots: Vec::new(),
                    arrived: 0,
                    done: 0,
                };
                for w in 0..warps_per_cta {
                    let slot = next_slot;
                    next_slot += 1;
                    let worker = match idle.pop() {
                        Some(k) => k,
                        None => {
                            let rx = Mailbox::<Resume>::new();
                            let (rx2, ev) = (rx.clone(), events.clone());
                            s.spawn(move || warp_worker(rx2, ev, spec, threads, kernel, allocs));
                            pool.0.push(rx);
                            held.threads = held.threads.max(pool.0.len() as u64);
                            pool.0.len() - 1
                        }
                    };
                    let job = WarpJob {
                        slot,
                        id,
                        cta: next_cta,
                        warp: w,
                        rec: spare.pop().unwrap_or_else(WarpRecord::preallocated),
                    };
                    slots.insert(
                        slot,
                        WarpSlot {
                            yields: 0,
                            worker,
                            job: Some(job),
                            cta: next_cta,
                            warp: w,
                            at_barrier: false,
                            named: None,
                            done: false,
                            record: None,
                        },
                    );
                    run.slots.push(slot);
                    queue.push_back(slot);
                }
                ctas.insert(next_cta, run);
                next_cta += 1;
                held.note(ctas.len() + finished.len(), done_bytes);
            }
            let Some(slot) = queue.pop_front() else {
                if ctas.is_empty() {
                    return Ok(());
                }
                let (c, run) = ctas
                    .iter()
                    .next()
                    .map(|(c, r)| (*c, r.id))
                    .unwrap_or((0, [0; 3]));
                return Err(kerr(run, 0, format!(
                    "deadlock: every live warp waits at a barrier that can never complete (CTA {c} onwards); a warp exited or diverged around BAR.SYNC, or an mbarrier phase waited for never completes"
                )));
            };
            let Some(ws) = slots.get_mut(&slot) else {
                continue;
            };
            let (cta, warp) = (ws.cta, ws.warp);
            let Some(mailbox) = pool.0.get(ws.worker) else {
                return Err(RecordError::Invalid("a warp has no thread".into()));
            };
            let Some(stv) = st.take() else {
                return Err(RecordError::Invalid("executor lost its state".into()));
            };
            let mut msg = match ws.job.take() {
                Some(job) => Resume::Start(stv, job),
                None => Resume::Go(stv),
            };
            // Run the warp until it blocks, yields, finishes or fails; growing its
            // buffers when it asks does not count as a switch.
            let ev = loop {
                if mailbox.send(msg).is_err() {
                    return Err(RecordError::Invalid("a warp thread ended early".into()));
                }
                match events.recv() {
                    Some(WarpEvent::Room(mut s2)) => {
                        s2.grow();
                        msg = Resume::Go(s2);
                    }
                    Some(ev) => break ev,
                    None => return Err(RecordError::Invalid("every warp thread ended".into())),
                }
            };
            match ev {
                WarpEvent::Barrier(s2, sl) => {
                    st = Some(s2);
                    if let Some(w) = slots.get_mut(&sl) {
                        w.at_barrier = true;
                    }
                    if let Some(run) = ctas.get_mut(&cta) {
                        run.arrived += 1;
                    }
                }
                WarpEvent::NamedWait(mut s2, sl) => {
                    let wait = s2.named_wait.take();
                    st = Some(s2);
                    if let Some(w) = slots.get_mut(&sl) {
                        w.named = wait;
                    }
                }
                WarpEvent::Yield(s2, sl) => {
                    st = Some(s2);
                    let n = slots.get_mut(&sl).map_or(0, |w| {
                        w.yields += 1;
                        w.yields
                    });
                    if n > MAX_SPIN_YIELDS {
                        let id = ctas.get(&cta).map_or([0; 3], |r| r.id);
                        return Err(kerr(id, warp, format!(
                            "spin loop still waiting after {MAX_SPIN_YIELDS} iterations: livelock, or it waits for a CTA that is not resident (resident_ctas = {resident})"
                        )));
                    }
                    queue.push_back(sl);
                }
                WarpEvent::Done(mut s2, sl, rec) => {
                    s2.warp_done(cta);
                    st = Some(s2);
                    done_bytes += rec.bytes();
                    if let Some(w) = slots.get_mut(&sl) {
                        w.done = true;
                        w.record = Some(rec);
                        // The thread takes the next warp.
                        idle.push(w.worker);
                    }
                    if let Some(run) = ctas.get_mut(&cta) {
                        run.done += 1;
                    }
                }
                WarpEvent::Room(s2) => {
                    // Handled above; never reaches here.
                    st = Some(s2);
                }
                WarpEvent::Failed(s2, msg) => {
                    st = s2;
                    let id = ctas.get(&cta).map_or([0; 3], |r| r.id);
                    return Err(kerr(id, warp, msg));
                }
            }
            if let Some(msg) = st.as_mut().and_then(|x| x.error.take()) {
                let id = ctas.get(&cta).map_or([0; 3], |r| r.id);
                return Err(kerr(id, warp, msg));
            }
            // Named-barrier waits of the CTA whose phase moved (an arrival completed the
            // barrier) or that are now complete (a warp finished, for a count of 0), and
            // mbarrier waits whose phase has completed.
            if let (Some(run), Some(stv)) = (ctas.get(&cta), st.as_mut()) {
                if let Some(b) = stv.bars.get_mut(&cta) {
                    for &sl in &run.slots {
                        let Some(w) = slots.get_mut(&sl) else {
                            continue;
                        };
                        let Some(wait) = w.named else {
                            continue;
                        };
                        if b.released(wait) {
                            w.named = None;
                            queue.push_back(sl);
                        }
                    }
                }
            }
            // Barrier release and CTA completion.
            if let Some(run) = ctas.get_mut(&cta) {
                let n = run.slots.len();
                if run.arrived > 0 && run.arrived + run.done == n {
                    run.arrived = 0;
                    for &sl in &run.slots {
                        if let Some(w) = slots.get_mut(&sl) {
                            if w.at_barrier {
                                w.at_barrier = false;
                                queue.push_back(sl);
                            }
                        }
                    }
                }
                if run.done == n {
                    let recs: Vec<WarpRecord> = run
                        .slots
                        .iter()
                        .filter_map(|sl| slots.remove(sl).and_then(|w| w.record))
                        .collect();
                    finished.insert(cta, (run.id, recs));
                    ctas.remove(&cta);
                    if let Some(stv) = st.as_mut() {
                        stv.end_cta(cta);
                    }
                }
            }
            held.note(ctas.len() + finished.len(), done_bytes);
            while let Some((id, recs)) = finished.remove(&next_write) {
                if let Some(stv) = st.as_deref() {
                    sink(stv, id, &recs)?;
                }
                next_write += 1;
                for mut r in recs {
                    done_bytes = done_bytes.saturating_sub(r.bytes());
                    if spare.len() < max_live_warps {
                        r.clear();
                        spare.push(r);
                    }
                }
            }
        }
    });
    held.thread_allocs = worker_allocs.into_inner();
    (res, st.unwrap_or_else(fallback_state))
}

/// Allocations the current thread has made: counted in test builds (a counting global
/// allocator, in `alloc_count`), so that tests can check that warp threads allocate
/// nothing; 0 otherwise.
fn thread_allocs() -> u64 {
    #[cfg(test)]
    {
        alloc_count::this_thread()
    }
    #[cfg(not(test))]
    {
        0
    }
}

/// The system allocator, counting each thread's allocations (test builds).
#[cfg(test)]
mod alloc_count {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        // Const-initialized, no destructor: reading it never allocates.
        static ALLOCS: Cell<u64> = const { Cell::new(0) };
    }

    struct Counting;

    fn count() {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
    }

    // SAFETY: every call goes to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count();
            // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count();
            // SAFETY: as for `alloc`.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count();
            // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
            unsafe { System.realloc(ptr, layout, new_size) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    pub(super) fn this_thread() -> u64 {
        ALLOCS.try_with(Cell::get).unwrap_or(0)
    }
}

/// Tracer-style address compression (the NVBit tracer's `base_stride_compress`): a run of
/// consecutive active lanes with one stride is mode 1, anything else mode 2. An empty
/// mask gives base 0, stride 0, as the tracer prints it.
pub fn compress_addrs(mask: u32, addrs: &[u64]) -> AddrRecord<'_> {
    if mask == 0 {
        return AddrRecord::Stride { base: 0, stride: 0 };
    }
    let first = mask.trailing_zeros();
    let run = (mask >> first).trailing_ones();
    let contiguous = first + run == 32 || mask >> (first + run) == 0;
    if run >= 2 && contiguous {
        let d = addrs[1].wrapping_sub(addrs[0]) as i64;
        if let Ok(stride) = i32::try_from(d) {
            if addrs
                .windows(2)
                .all(|w| w[1].wrapping_sub(w[0]) as i64 == d)
            {
                return AddrRecord::Stride {
                    base: addrs[0],
                    stride,
                };
            }
        }
    }
    AddrRecord::List {
        mode: ADDR_DELTA,
        addrs,
    }
}

fn write_cta(
    w: &mut TraceWriter,
    tables: &KernelTables,
    written: &mut (usize, usize, usize, usize),
    family: ArchFamily,
    id: [u32; 3],
    recs: &[WarpRecord],
) -> Result<(), RecordError> {
    let (written_ops, written_spins, written_named, written_mbars) = (
        &mut written.0,
        &mut written.1,
        &mut written.2,
        &mut written.3,
    );
    // Spin regions go into the kernel's metadata before any CTA that runs them: the
    // writer gives their tests one operand per exit term.
    if *written_spins < tables.spins.len() {
        let meta = w
            .kernel_meta_mut()
            .ok_or_else(|| RecordError::Invalid("a CTA written outside its kernel".into()))?;
        for site in &tables.spins[*written_spins..] {
            meta.spin_regions.push(site.region());
        }
        *written_spins = tables.spins.len();
    }
    // Named barriers likewise, before the CTAs that run them.
    if *written_named < tables.named.len() {
        let meta = w
            .kernel_meta_mut()
            .ok_or_else(|| RecordError::Invalid("a CTA written outside its kernel".into()))?;
        meta.named_barriers
            .extend_from_slice(&tables.named[*written_named..]);
        *written_named = tables.named.len();
    }
    // mbarrier instructions likewise: the writer gives them one operand per active lane.
    if *written_mbars < tables.mbars.len() {
        let meta = w
            .kernel_meta_mut()
            .ok_or_else(|| RecordError::Invalid("a CTA written outside its kernel".into()))?;
        meta.mbarriers
            .extend_from_slice(&tables.mbars[*written_mbars..]);
        *written_mbars = tables.mbars.len();
    }
    while *written_ops < tables.opcodes.len() {
        let name = tables.opcodes[*written_ops];
        let info = decode_opcode(family, name).ok_or_else(|| {
            RecordError::Invalid(format!(
                "the recorder emitted {name}, which is not in the {} table",
                family.name()
            ))
        })?;
        w.add_opcode(info)?;
        *written_ops += 1;
    }
    w.begin_cta(id, None)?;
    for (wi, r) in recs.iter().enumerate() {
        w.begin_warp(wi as u32)?;
        for i in r.insts.iter() {
            write_inst(w, r, i)?;
        }
        w.end_warp()?;
    }
    w.end_cta()?;
    Ok(())
}

fn write_inst(w: &mut TraceWriter, r: &WarpRecord, i: &RecInst) -> Result<(), RecordError> {
    let lost = || RecordError::Invalid("a warp's record lost its addresses or operands".into());
    let addrs = r.addrs.get(i.addrs).ok_or_else(lost)?;
    // Compressed when recorded (`Warp::emit`).
    let addrs = match (i.mem_width, i.strided, addrs) {
        (0, ..) => AddrRecord::None,
        (_, true, &[base, stride]) => AddrRecord::Stride {
            base,
            stride: stride as i64 as i32,
        },
        (_, false, addrs) => AddrRecord::List {
            mode: ADDR_DELTA,
            addrs,
        },
        (_, true, addrs) => compress_addrs(i.mask, addrs),
    };
    let raw = RawInst {
        pc: i.pc,
        mask: i.mask,
        opcode: i.opcode,
        dsts: &i.dsts[..i.n_dsts as usize],
        srcs: &i.srcs[..i.n_srcs as usize],
        mem_width: i.mem_width,
        imm: Some(0),
        line: None,
        addrs,
    };
    w.push_with_operands(&raw, r.operands.get(i.operands).ok_or_else(lost)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_added_and_selected() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = Recorder::create(&dir.path().join("d.tst"), 80, "test").unwrap();
        assert_eq!((rec.device(), rec.devices()), (0, 1));
        assert!(matches!(rec.set_device(1), Err(RecordError::Invalid(_))));
        assert_eq!(rec.add_device(), 1);
        rec.set_device(1).unwrap();
        let b = rec.alloc::<u32>("x", 4).unwrap();
        rec.upload(b, &[1, 2, 3, 4]).unwrap();
        // Device 0 reads device 1's allocation: one address space.
        rec.set_device(0).unwrap();
        assert_eq!(rec.download(b).unwrap(), [1, 2, 3, 4]);
        let idx = rec.finish().unwrap();
        assert_eq!(idx.devices.len(), 2);
        assert!(matches!(
            idx.commands[..],
            [
                Command::Alloc { device: 1, .. },
                Command::MemcpyHtoD { device: 1, .. }
            ]
        ));
    }

    fn gemm_stats(m: u32, k: u32) -> RecordStats {
        let dir = tempfile::tempdir().unwrap();
        let kv = [
            ("m", m.to_string()),
            ("n", m.to_string()),
            ("k", k.to_string()),
            ("tile", "8".to_string()),
        ];
        let params: Vec<(String, String)> =
            kv.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        crate::workloads::generate("gemm", &params, 80, &dir.path().join("g.tst"))
            .unwrap()
            .stats
    }

    /// Recording memory is bounded by the resident CTAs, not by the grid: over a grid 16
    /// times larger (1,024 CTAs of 2 warps, 16 resident), the same kernel starts no more
    /// warp threads (a thread per warp made the allocator keep every exited thread's
    /// pages: 2.6 GiB of RSS for a 512^3 gemm) and holds no more CTAs or record bytes.
    #[test]
    fn held_state_does_not_grow_with_the_grid() {
        let small = gemm_stats(64, 32);
        let big = gemm_stats(256, 32);
        assert_eq!(big.ctas, 16 * small.ctas);
        assert_eq!(small.peak_warp_threads, 16 * 2, "{small:?}");
        assert_eq!(big.peak_warp_threads, small.peak_warp_threads, "{big:?}");
        assert!(small.peak_held_ctas <= 16 + 1, "{small:?}");
        assert!(
            big.peak_held_ctas <= small.peak_held_ctas,
            "{big:?} {small:?}"
        );
        assert!(small.peak_held_bytes > 0, "{small:?}");
        assert!(
            big.peak_held_bytes <= small.peak_held_bytes,
            "{big:?} {small:?}"
        );
        // Warp threads allocate nothing: buffers and tables grow on the scheduler's
        // thread (with mimalloc and transparent huge pages, each allocating thread kept
        // megabytes resident).
        assert_eq!(small.warp_thread_allocs, 0, "{small:?}");
        assert_eq!(big.warp_thread_allocs, 0, "{big:?}");
    }

    /// A launch run inline holds one CTA at a time and starts no thread.
    #[test]
    fn inline_launches_hold_one_cta() {
        let dir = tempfile::tempdir().unwrap();
        let mut held = Vec::new();
        for n in [4096u32, 65536] {
            let params = vec![("n".to_string(), n.to_string())];
            let path = dir.path().join(format!("v{n}.tst"));
            let st = crate::workloads::generate("vectoradd", &params, 80, &path)
                .unwrap()
                .stats;
            assert_eq!((st.peak_held_ctas, st.peak_warp_threads), (1, 0), "{st:?}");
            held.push(st.peak_held_bytes);
        }
        assert_eq!(held[0], held[1]);
    }

    /// Records the same barrier-free kernel with blocking on (warp threads, buffers grown
    /// by the scheduler on request) and off (inline): long warps with coalesced and
    /// scattered accesses and atomics, whose buffers and kernel tables grow many times.
    /// The two files are the same byte for byte.
    #[test]
    fn threaded_and_inline_recordings_are_identical() {
        let dir = tempfile::tempdir().unwrap();
        let record = |blocking: bool| -> Vec<u8> {
            let path = dir.path().join(format!("b{blocking}.tst"));
            let mut rec = Recorder::create(&path, 80, "test").unwrap();
            let n = 4096u64;
            let x = rec.alloc::<u32>("x", n).unwrap();
            let data: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2654435761)).collect();
            rec.upload(x, &data).unwrap();
            let mut spec = LaunchSpec::new("long", [40, 1, 1], [96, 1, 1]);
            spec.blocking = blocking;
            spec.resident_ctas = 4;
            rec.launch(&spec, &|w| {
                let i = w.global_id_x();
                let a = w.addr(&x, &i);
                let mut acc = w.load(&x, &i);
                for _ in 0..300 {
                    // Scattered: an address from the data.
                    let j = w.and_imm(&acc, (n - 1) as u32);
                    let v = w.load(&x, &j);
                    acc = w.iadd(&acc, &v);
                    w.atomic(crate::record::Atom::Add, &a, &acc, false);
                }
                w.store(&x, &i, &acc);
            })
            .unwrap();
            // Every buffer grew many times, on the scheduler's thread.
            assert_eq!(rec.stats.warp_thread_allocs, 0, "{:?}", rec.stats);
            rec.finish().unwrap();
            std::fs::read(&path).unwrap()
        };
        let threaded = record(true);
        assert!(
            threaded == record(false),
            "threaded and inline traces differ"
        );
    }

    /// A failing warp ends a threaded launch with an error that names its CTA and warp
    /// (a panic, an access outside every allocation, a spin loop that never ends), and
    /// every thread of the pool ends (the test returns).
    #[test]
    fn threaded_launch_failures_end_every_thread() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = LaunchSpec::new("f", [6, 1, 1], [64, 1, 1]);
        spec.resident_ctas = 2;
        let fail = |how: u32| -> (RecordError, String) {
            let path = dir.path().join(format!("f{how}.tst"));
            let mut rec = Recorder::create(&path, 80, "test").unwrap();
            let x = rec.alloc::<u32>("x", 64).unwrap();
            let e = rec
                .launch(&spec, &|w| {
                    let i = w.global_id_x();
                    w.barrier();
                    if w.cta[0] == 3 && w.warp == 1 {
                        match how {
                            0 => panic!("boom"),
                            1 => {
                                let far = w.iadd_imm(&i, 1 << 20);
                                w.load(&x, &far);
                            }
                            _ => loop {
                                w.spin_yield();
                            },
                        }
                    }
                    w.barrier();
                    let j = w.and_imm(&i, 63);
                    w.store(&x, &j, &i);
                })
                .unwrap_err();
            let msg = e.to_string();
            (e, msg)
        };
        for (how, want) in [
            (0, "boom"),
            (1, "outside every allocation"),
            (2, "spin loop still waiting"),
        ] {
            let (e, msg) = fail(how);
            assert!(
                matches!(
                    e,
                    RecordError::Kernel {
                        cta: [3, 0, 0],
                        warp: 1,
                        ..
                    }
                ),
                "{msg}"
            );
            assert!(msg.contains(want), "{msg}");
        }
    }

    #[test]
    fn upload_iter_and_download_range_check_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let mut rec = Recorder::create(&dir.path().join("u.tst"), 80, "test").unwrap();
        let b = rec.alloc::<u32>("x", 5).unwrap();
        rec.upload_iter(b, 10..15).unwrap();
        assert_eq!(rec.download_range(b, 1, 3).unwrap(), [11, 12, 13]);
        assert_eq!(rec.download_range(b, 5, 0).unwrap(), Vec::<u32>::new());
        for (first, n) in [(4, 2), (6, 0), (u64::MAX, 2)] {
            assert!(matches!(
                rec.download_range(b, first, n),
                Err(RecordError::Invalid(_))
            ));
        }
        for data in [0..4u32, 0..6] {
            let e = rec.upload_iter(b, data).unwrap_err().to_string();
            assert!(e.contains("into a buffer of 5"), "{e}");
        }
        let idx = rec.finish().unwrap();
        // Only the upload of the right length is a command.
        assert_eq!(idx.commands.len(), 2);
    }

    #[test]
    fn compression_follows_the_tracer() {
        let a: Vec<u64> = (0..32).map(|l| 0x1000 + 4 * l).collect();
        assert_eq!(
            compress_addrs(u32::MAX, &a),
            AddrRecord::Stride {
                base: 0x1000,
                stride: 4
            }
        );
        // A gap in the mask: base + deltas even with a constant stride.
        let b = [0x1000, 0x1004];
        assert!(matches!(
            compress_addrs(0b101, &b),
            AddrRecord::List { mode: 2, .. }
        ));
        // A single active lane is mode 2 with no delta.
        assert!(matches!(
            compress_addrs(1 << 5, &b[..1]),
            AddrRecord::List { mode: 2, .. }
        ));
        assert_eq!(
            compress_addrs(0, &[]),
            AddrRecord::Stride { base: 0, stride: 0 }
        );
    }
}
