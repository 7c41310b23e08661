//! The memory messages: requests to an L2 or LLC slice and their responses, each naming
//! the context ([`Ctx`]) whose traffic it is. How they travel (with the control messages
//! of [`crate::gpu::control`]) is [`crate::packet`].
//!
//! Every response copies its request's context. Traffic a unit starts on its own is
//! attributed as follows:
//! - an SM's requests and writes: the kernel of its warps (the SM runs one kernel at a
//!   time, [`super::LdStUnit::new_kernel`]);
//! - the write-back of a dirty line evicted from an L1D, an L2 or an LLC slice: the
//!   context of the access whose fill or store evicted it;
//! - the L1D write-backs when an SM moves to another kernel, and a private L2's write-backs
//!   at a kernel-boundary flush: the kernel that ends there;
//! - lines a host-to-device copy installs (and what they evict): [`Ctx::HOST`];
//! - a private L2 slice's LLC read: the context of the access that missed (one whose
//!   sectors join a read in flight asks only for the sectors not yet asked, under its own).
//!
//! Room for what comes next, without a larger load/store message: a value an atomic
//! returns or a sync word holds is a response variant carrying the value instead of the
//! line and sector mask (`{ value, tag, sm, ctx }` fits the same 32 bytes and the same
//! three words); synchronization events and preemption commands are control messages
//! ([`crate::gpu::control`]); credits need no message of their own (a link's credit is a
//! [`tessera_interconnect::Payload::Signal`], or a control variant).

use tessera_traces::KernelMeta;

/// Which tenant, stream and kernel a memory message serves, packed in 32 bits: kernel
/// (its index in the trace's kernel listing) in bits 0..20, stream in 20..28, tenant in
/// 28..32. Today every kernel is tenant 0's; its stream is the rank of its trace stream
/// among the trace's streams ([`Ctx::for_kernels`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ctx(u32);

const KERNEL_BITS: u32 = 20;
const STREAM_BITS: u32 = 8;
const TENANT_BITS: u32 = 4;
/// The kernel field of [`Ctx::HOST`]: no kernel.
const NO_KERNEL: u32 = (1 << KERNEL_BITS) - 1;

/// A trace a context cannot name every kernel of.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CtxError {
    #[error("the trace has {0} kernels; a memory packet can name at most {max}", max = Ctx::MAX_KERNELS)]
    Kernels(usize),
    #[error("the trace's kernels use {0} streams; a memory packet can name at most {max}", max = Ctx::MAX_STREAMS)]
    Streams(usize),
}

impl Ctx {
    /// Kernels a context can name (indices `0..MAX_KERNELS`; the last field value is the
    /// host's).
    pub const MAX_KERNELS: u32 = NO_KERNEL;
    /// Streams a context can name.
    pub const MAX_STREAMS: u32 = 1 << STREAM_BITS;
    /// Tenants a context can name.
    pub const MAX_TENANTS: u32 = 1 << TENANT_BITS;
    /// The host's context, tenant 0's: what a host-to-device copy does.
    pub const HOST: Ctx = Ctx(NO_KERNEL);

    /// The context of `kernel` of `stream` of `tenant`; `None` when a field is out of range.
    pub fn new(tenant: u32, stream: u32, kernel: u32) -> Option<Ctx> {
        (tenant < Ctx::MAX_TENANTS && stream < Ctx::MAX_STREAMS && kernel < Ctx::MAX_KERNELS)
            .then_some(Ctx(tenant << (KERNEL_BITS + STREAM_BITS)
                | stream << KERNEL_BITS
                | kernel))
    }

    /// The context of every kernel of a trace, by listing index: tenant 0, the stream's
    /// rank in order of first use (listing order), the kernel's index.
    pub fn for_kernels(kernels: &[KernelMeta]) -> Result<Vec<Ctx>, CtxError> {
        if kernels.len() > Ctx::MAX_KERNELS as usize {
            return Err(CtxError::Kernels(kernels.len()));
        }
        let mut streams: Vec<u64> = Vec::new();
        kernels
            .iter()
            .enumerate()
            .map(|(k, m)| {
                let s = match streams.iter().position(|&s| s == m.stream) {
                    Some(s) => s,
                    None => {
                        streams.push(m.stream);
                        streams.len() - 1
                    }
                };
                Ctx::new(0, s as u32, k as u32).ok_or(CtxError::Streams(s + 1))
            })
            .collect()
    }

    /// Its tenant.
    pub fn tenant(self) -> u32 {
        self.0 >> (KERNEL_BITS + STREAM_BITS)
    }

    /// Its stream.
    pub fn stream(self) -> u32 {
        self.0 >> KERNEL_BITS & ((1 << STREAM_BITS) - 1)
    }

    /// Its kernel (listing index); `None` for the host's context.
    pub fn kernel(self) -> Option<u32> {
        let k = self.0 & NO_KERNEL;
        (k != NO_KERNEL).then_some(k)
    }

    /// Its 32 bits (every value is a context: the wire form decodes without a check).
    pub fn bits(self) -> u32 {
        self.0
    }

    /// The context of [`Ctx::bits`].
    pub fn from_bits(bits: u32) -> Ctx {
        Ctx(bits)
    }
}

/// A request to an L2 or LLC slice. Requests name the unit that gets the response (`sm`
/// or `unit`, a unit id) and a `tag` it chooses, so they can cross link interfaces and
/// still be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// SM -> channel: read `sectors` of L2 line `line`; the reply goes to unit `sm` and
    /// names `tag` (the SM's MSHR).
    Read {
        line: u64,
        sectors: u64,
        tag: u32,
        sm: u32,
        ctx: Ctx,
    },
    /// SM -> channel: write `sectors` of L2 line `line`. The slice that performs it
    /// acknowledges it to unit `sm` naming `tag` ([`Response::WriteAck`]) unless `tag` is
    /// [`Request::NO_ACK`] (an L1D write-back, which no instruction waits for).
    Write {
        line: u64,
        sectors: u64,
        tag: u32,
        sm: u32,
        ctx: Ctx,
    },
    /// SM -> channel: an atomic of `ops` lane operations (at most a warp's lanes) on
    /// `sectors` of L2 line `line`.
    Atomic {
        line: u64,
        sectors: u64,
        tag: u32,
        sm: u32,
        ctx: Ctx,
        ops: u8,
    },
    /// Private L2 slice -> home LLC slice: read `sectors` of line `line`; the reply goes to
    /// channel unit `unit` and names `tag` (the requesting slice inside that unit).
    LlcRead {
        line: u64,
        sectors: u64,
        tag: u32,
        unit: u32,
        ctx: Ctx,
    },
    /// Private L2 slice -> home LLC slice: write `sectors` of line `line` (a write-through
    /// store, or a write-back of dirty sectors; no reply).
    LlcWrite { line: u64, sectors: u64, ctx: Ctx },
    /// SM -> the home of sync word `addr` (its memory-side L2 slice, or its LLC slice with
    /// private L2s): `lanes` lanes of one instruction apply `op` with operands `a` (and
    /// `b`, a compare-and-swap's new value) in lane order; the answer is a
    /// [`Response::Value`] with the word's value before the first (issue 24).
    Sync {
        addr: u64,
        tag: u32,
        sm: u32,
        ctx: Ctx,
        op: SyncOp,
        lanes: u8,
        a: u32,
        b: u32,
    },
}

/// What a [`Request::Sync`] does to its word (32-bit, unsigned; `Add` wraps).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SyncOp {
    /// A strong load: the value.
    Load = 0,
    /// A strong store of `a`.
    Store,
    Add,
    Exch,
    /// Where the word equals `a`, it becomes `b`.
    Cas,
    Min,
    Max,
    And,
    Or,
    Xor,
    /// CUDA's `atomicInc`: `old >= a ? 0 : old + 1`.
    Inc,
    /// CUDA's `atomicDec`: `old == 0 || old > a ? a : old - 1`.
    Dec,
}

impl SyncOp {
    /// Every operation, by code.
    pub const ALL: [SyncOp; 12] = [
        SyncOp::Load,
        SyncOp::Store,
        SyncOp::Add,
        SyncOp::Exch,
        SyncOp::Cas,
        SyncOp::Min,
        SyncOp::Max,
        SyncOp::And,
        SyncOp::Or,
        SyncOp::Xor,
        SyncOp::Inc,
        SyncOp::Dec,
    ];

    /// The operation of code `c` (its discriminant).
    pub fn from_code(c: u8) -> Option<SyncOp> {
        SyncOp::ALL.get(c as usize).copied()
    }

    /// The word after one lane applies the operation to `old`.
    #[inline]
    pub fn apply(self, old: u32, a: u32, b: u32) -> u32 {
        match self {
            SyncOp::Load => old,
            SyncOp::Store | SyncOp::Exch => a,
            SyncOp::Add => old.wrapping_add(a),
            SyncOp::Cas => {
                if old == a {
                    b
                } else {
                    old
                }
            }
            SyncOp::Min => old.min(a),
            SyncOp::Max => old.max(a),
            SyncOp::And => old & a,
            SyncOp::Or => old | a,
            SyncOp::Xor => old ^ a,
            SyncOp::Inc => {
                if old >= a {
                    0
                } else {
                    old + 1
                }
            }
            SyncOp::Dec => {
                if old == 0 || old > a {
                    a
                } else {
                    old - 1
                }
            }
        }
    }

    /// Whether it changes the word (a load does not).
    pub fn writes(self) -> bool {
        self != SyncOp::Load
    }
}

impl Request {
    /// The `tag` of a [`Request::Write`] that wants no acknowledgement.
    pub const NO_ACK: u32 = u32::MAX;

    /// The line it is about.
    #[inline]
    pub fn line(&self) -> u64 {
        match *self {
            Request::Read { line, .. }
            | Request::Write { line, .. }
            | Request::Atomic { line, .. }
            | Request::LlcRead { line, .. }
            | Request::LlcWrite { line, .. } => line,
            // An address in the line: what homes and routes a request.
            Request::Sync { addr, .. } => addr,
        }
    }

    /// The sectors of its line it reads or writes.
    #[inline]
    pub fn sectors(&self) -> u64 {
        match *self {
            Request::Read { sectors, .. }
            | Request::Write { sectors, .. }
            | Request::Atomic { sectors, .. }
            | Request::LlcRead { sectors, .. }
            | Request::LlcWrite { sectors, .. } => sectors,
            // A word: one sector's data on a wire.
            Request::Sync { .. } => 1,
        }
    }

    /// The context it serves.
    #[inline]
    pub fn ctx(&self) -> Ctx {
        match *self {
            Request::Read { ctx, .. }
            | Request::Write { ctx, .. }
            | Request::Atomic { ctx, .. }
            | Request::LlcRead { ctx, .. }
            | Request::LlcWrite { ctx, .. }
            | Request::Sync { ctx, .. } => ctx,
        }
    }

    /// Whether it carries data (a write or an atomic's operands).
    #[inline]
    pub fn carries_data(&self) -> bool {
        match self {
            Request::Write { .. } | Request::Atomic { .. } | Request::LlcWrite { .. } => true,
            Request::Sync { op, .. } => op.writes(),
            _ => false,
        }
    }
}

/// The response to a [`Request`], with its context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response {
    /// Channel -> SM `sm`: the data of a read or the result of an atomic.
    Reply {
        line: u64,
        sectors: u64,
        tag: u32,
        sm: u32,
        ctx: Ctx,
    },
    /// Channel -> SM `sm`: the write of a [`Request::Write`] naming `tag` is performed at
    /// the slice (no data; the header alone crosses the NoC).
    WriteAck {
        line: u64,
        tag: u32,
        sm: u32,
        ctx: Ctx,
    },
    /// Home LLC slice -> private L2 slice `tag` of channel unit `unit`: the data of a
    /// [`Request::LlcRead`].
    LlcReply {
        line: u64,
        sectors: u64,
        tag: u32,
        unit: u32,
        ctx: Ctx,
    },
    /// Home -> SM `sm`: the value sync word `addr` held before the [`Request::Sync`]
    /// naming `tag` (a load's value; after a store, the stored one).
    Value {
        addr: u64,
        value: u32,
        tag: u32,
        sm: u32,
        ctx: Ctx,
    },
}

impl Response {
    /// The line it answers for.
    #[inline]
    pub fn line(&self) -> u64 {
        match *self {
            Response::Reply { line, .. }
            | Response::WriteAck { line, .. }
            | Response::LlcReply { line, .. } => line,
            Response::Value { addr, .. } => addr,
        }
    }

    /// The sectors of its line it carries.
    #[inline]
    pub fn sectors(&self) -> u64 {
        match *self {
            Response::Reply { sectors, .. } | Response::LlcReply { sectors, .. } => sectors,
            Response::WriteAck { .. } => 0,
            Response::Value { .. } => 1,
        }
    }

    /// The context it serves (its request's).
    #[inline]
    pub fn ctx(&self) -> Ctx {
        match *self {
            Response::Reply { ctx, .. }
            | Response::WriteAck { ctx, .. }
            | Response::LlcReply { ctx, .. }
            | Response::Value { ctx, .. } => ctx,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctx_fields() {
        let c = Ctx::new(
            Ctx::MAX_TENANTS - 1,
            Ctx::MAX_STREAMS - 1,
            Ctx::MAX_KERNELS - 1,
        );
        let c = c.expect("in range");
        assert_eq!(c.tenant(), Ctx::MAX_TENANTS - 1);
        assert_eq!(c.stream(), Ctx::MAX_STREAMS - 1);
        assert_eq!(c.kernel(), Some(Ctx::MAX_KERNELS - 1));
        assert_eq!(Ctx::from_bits(c.bits()), c);
        assert_eq!(Ctx::new(0, 0, 7).and_then(|c| c.kernel()), Some(7));
        assert_eq!(Ctx::HOST.kernel(), None);
        assert_eq!((Ctx::HOST.tenant(), Ctx::HOST.stream()), (0, 0));
        assert!(Ctx::new(Ctx::MAX_TENANTS, 0, 0).is_none());
        assert!(Ctx::new(0, Ctx::MAX_STREAMS, 0).is_none());
        assert!(Ctx::new(0, 0, Ctx::MAX_KERNELS).is_none());
    }

    /// The load/store message stays as small as before it carried a context (a partition's
    /// inbox entry holds one; see `gpu/partition.rs`).
    #[test]
    fn message_sizes() {
        assert!(std::mem::size_of::<Request>() <= 32);
        assert!(std::mem::size_of::<Response>() <= 32);
        assert_eq!(std::mem::size_of::<Ctx>(), 4);
    }
}
