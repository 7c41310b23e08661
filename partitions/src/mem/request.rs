//! What a warp's memory instruction asks of the LD/ST unit.

/// What a memory instruction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Load,
    Store,
    /// Atomics and reductions: performed at the L2 slice of the address.
    Atomic,
}

/// Which memory a memory instruction addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Global,
    Local,
    Shared,
    Const,
}

/// One warp memory instruction.
#[derive(Clone, Copy, Debug)]
pub struct MemRequest<'a> {
    pub access: Access,
    pub space: Space,
    /// Bytes per lane.
    pub width_bytes: u32,
    /// `(lane, address)` of each active lane, in lane order (may be left empty when
    /// `contiguous` is given for a global, local or constant load or store).
    pub lanes: &'a [(u32, u64)],
    /// `(address, bytes)` when the active lanes' bytes are known to form this one range
    /// (the k-th active lane at `address + k * width_bytes`, the trace's stride mode):
    /// coalesced as one range, without looking at `lanes`.
    pub contiguous: Option<(u64, u64)>,
}
