//! On-disk layout of a `.tst` file (DESIGN.md section 7).
//!
//! ```text
//! header   16 B   MAGIC (8) | format version u32 LE | reserved u32
//! chunks          zstd frames, one per run of consecutive CTAs of one kernel
//! padding         zeros up to a multiple of 16
//! index           rkyv archive of schema::Index (validated on open)
//! footer   32 B   index offset u64 | index length u64 | index CRC-32 u32 |
//!                 format version u32 | FOOTER_MAGIC (8)
//! ```
//! A file whose last 8 bytes are not `FOOTER_MAGIC` was cut short (or is still being
//! written: writers write to `<name>.partial` and rename when complete), or has bytes
//! appended after a complete footer (the reader tells the two apart).

/// First 8 bytes of every `.tst` file.
pub const MAGIC: &[u8; 8] = b"TESSTRC\0";
/// Last 8 bytes of every complete `.tst` file.
pub const FOOTER_MAGIC: &[u8; 8] = b"TSTINDEX";
/// The format version this build writes.
///
/// - 1: Accel-Sim imports (commands, kernels, three columns per warp).
/// - 2: recorded traces: `Alloc` commands, array annotations, a fourth column per warp
///   with the per-lane operands of atomics and reductions.
/// - 3: synchronization as values: sync words with initial and expected values, spin
///   regions per kernel (whose exit tests record their constants in the operand column).
/// - 4: value-dependent paths: a region's kind (spin loop, branch, work queue), exit terms
///   that read a broadcast lane's value, tail accesses rebased by a value.
pub const FORMAT_VERSION: u32 = 4;
/// The oldest format version this build reads.
pub const MIN_READ_VERSION: u32 = 1;
pub const HEADER_LEN: usize = 16;
pub const FOOTER_LEN: usize = 32;
/// Alignment of the index, so the mapped archive can be validated in place.
pub const INDEX_ALIGN: usize = 16;
