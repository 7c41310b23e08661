//! What the SM needs of one kernel's static instructions, decoded once per kernel and
//! shared by its SMs ([`KernelPrep`]): the registers each instruction waits on, reads and
//! writes (for the scoreboard and the operand collectors), and the kernel's code address
//! (for the I-cache).

use super::spin::SpinRole;
use tessera_traces::{KernelMeta, OpClass, Scope, SpinRegion};

/// Per static instruction: the registers its issue waits on (sources and destinations,
/// RZ excluded, deduplicated), the registers it reads (RZ excluded, deduplicated, in
/// register order: the order of its operand reads) and the registers it writes.
pub(super) struct SlotRegs {
    pub(super) wait: Box<[u16]>,
    pub(super) srcs: Box<[u16]>,
    pub(super) dsts: Box<[u16]>,
    /// What it is to the kernel's spin regions.
    pub(super) spin: SpinRole,
    /// A global atomic, a global load, or a strong (GPU- or system-scope) global store: on
    /// a declared sync word it is performed at the word's home with its value (a weak load
    /// through the L1's copy of the word; issue 24).
    pub(super) sync: bool,
    /// It waits for its warp's memory results before it issues: a fence (`MEMBAR`), or a
    /// spin region's test (its branch reads the values the head loaded).
    pub(super) fence: bool,
    /// Operands its instances record per active lane (an atomic's, a strong store's
    /// value, a spin test's constants).
    pub(super) operands: u8,
    /// A named barrier (`BAR.SYNC id, n`, `BAR.ARV`; issue 24); `None` for the CTA's
    /// barrier 0 and every other instruction.
    pub(super) bar: Option<tessera_traces::NamedBarrier>,
    /// An mbarrier instruction (issue 24).
    pub(super) mbar: Option<tessera_traces::MBarrierOp>,
}

/// What the issue stage needs of one kernel, prepared once per kernel and shared by its
/// SMs.
pub struct KernelPrep {
    pub(super) slots: Vec<SlotRegs>,
    /// One past the highest register any instruction names: the scoreboard's size per
    /// warp (so a warp's reset and its cache footprint follow the kernel, not R0..R255).
    pub(super) regs: usize,
    /// Address of the kernel's code for the I-cache: a hash of its name in the high
    /// half (PCs are offsets in the kernel's code), so that every launch of one kernel
    /// shares lines and different kernels do not.
    pub(super) code_base: u64,
    /// Its spin regions (format version 3).
    pub(super) regions: Vec<SpinRegion>,
    /// Whether any instruction has a spin role, may be a sync access or is an mbarrier
    /// operation: warps then decode their operands.
    pub(super) special: bool,
}

impl KernelPrep {
    /// The kernel of a trace without sync words (its atomics are timed only).
    pub fn new(kernel: &KernelMeta) -> KernelPrep {
        KernelPrep::of_trace(kernel, false)
    }

    /// The kernel of a trace that declares sync words (`sync_words`) or not: with them,
    /// its global atomics and strong loads and stores may be sync accesses.
    pub fn of_trace(kernel: &KernelMeta, sync_words: bool) -> KernelPrep {
        let slots: Vec<SlotRegs> = kernel
            .statics
            .iter()
            .map(|st| {
                let op = &kernel.opcodes[st.opcode as usize];
                let dsts: Vec<u16> = st.dst_regs(op).collect();
                let mut wait: Vec<u16> = st.src_regs().chain(dsts.iter().copied()).collect();
                wait.sort_unstable();
                wait.dedup();
                let mut srcs: Vec<u16> = st.src_regs().collect();
                srcs.sort_unstable();
                srcs.dedup();
                let spin = kernel
                    .spin_regions
                    .iter()
                    .enumerate()
                    .find_map(|(r, reg)| {
                        let r = r as u16;
                        if st.pc == reg.start_pc {
                            Some(SpinRole::Start(r))
                        } else if st.pc == reg.test_pc {
                            Some(SpinRole::Test(r))
                        } else if st.pc == reg.end_pc {
                            Some(SpinRole::End(r))
                        } else {
                            None
                        }
                    })
                    .unwrap_or_default();
                let strong = matches!(op.scope, Scope::Gpu | Scope::Sys);
                let sync = sync_words
                    && kernel.records_operands
                    && op.width_bytes == 4
                    && match op.class {
                        OpClass::AtomicGlobal | OpClass::AtomicGeneric | OpClass::Reduction => true,
                        // A weak load of a sync word reads it too (through the L1's copy).
                        OpClass::LoadGlobal | OpClass::LoadGeneric => true,
                        OpClass::StoreGlobal | OpClass::StoreGeneric => strong,
                        _ => false,
                    };
                SlotRegs {
                    wait: wait.into(),
                    srcs: srcs.into(),
                    dsts: dsts.into(),
                    fence: op.class == OpClass::Fence || matches!(spin, SpinRole::Test(_)),
                    bar: kernel
                        .named_barriers
                        .iter()
                        .find(|b| b.pc == st.pc && op.class == OpClass::Barrier)
                        .copied(),
                    mbar: kernel.mbarriers.iter().find(|m| m.pc == st.pc).copied(),
                    operands: if kernel.records_operands {
                        tessera_traces::codec::operands_at(kernel, st.pc, op)
                    } else {
                        0
                    },
                    spin,
                    sync,
                }
            })
            .collect();
        let regs = slots
            .iter()
            .flat_map(|s| s.wait.iter())
            .map(|&r| r as usize + 1)
            .max()
            .unwrap_or(0)
            .max(1);
        // FNV-1a: stable across runs and platforms, unlike the std hasher.
        let hash = kernel.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        });
        let special = slots
            .iter()
            .any(|s| s.sync || s.spin != SpinRole::None || s.mbar.is_some());
        KernelPrep {
            slots,
            regs,
            code_base: (hash & 0xffff_ffff) << 32,
            regions: kernel.spin_regions.clone(),
            special,
        }
    }
}
