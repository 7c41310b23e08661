//! The packets the units of one GPU exchange, and their inline form
//! ([`Payload::Words3`]: three words, no heap).

use tessera_interconnect::Payload;

/// Bytes of a packet header on the NoC (GPGPU-Sim's 8-byte control size).
pub(crate) const HEADER_BYTES: u64 = 8;

/// One packet between units of a GPU. Memory packets name the SM they serve (`sm`, its
/// unit id), so they can travel through the chiplets' link interfaces and still be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet {
    /// SM -> channel: read `sectors` of L2 line `line`; the reply goes to unit `sm` and names
    /// `tag` (the SM's MSHR).
    Read {
        line: u64,
        sectors: u64,
        tag: u32,
        sm: u32,
    },
    /// SM -> channel: write `sectors` of L2 line `line` (no reply).
    Write { line: u64, sectors: u64 },
    /// SM -> channel: an atomic of `ops` lane operations on `sectors` of L2 line `line`.
    Atomic {
        line: u64,
        sectors: u64,
        tag: u32,
        ops: u32,
        sm: u32,
    },
    /// Channel -> SM `sm`: the data of a read or the result of an atomic.
    Reply {
        line: u64,
        sectors: u64,
        tag: u32,
        sm: u32,
    },
    /// Local CP -> SM: CTA `cta` of kernel `kernel` (listing indices).
    Dispatch { kernel: u32, cta: u32 },
    /// SM -> local CP: CTA `cta` of kernel `kernel` has completed.
    CtaDone { kernel: u32, cta: u32 },
    /// Host -> channel: the trace's command `command` (a `MemcpyHtoD`) has happened.
    Memcpy { command: u32 },
    /// Global CP -> local CP: run this chiplet's share of kernel `kernel`.
    Slice { kernel: u32 },
    /// Local CP -> global CP: this chiplet's share of kernel `kernel` has completed.
    SliceDone { kernel: u32 },
    /// Private L2 slice -> home LLC slice: read `sectors` of line `line`; the reply goes to
    /// channel unit `unit` and names `tag` (the requesting slice inside that unit).
    LlcRead {
        line: u64,
        sectors: u64,
        tag: u32,
        unit: u32,
    },
    /// Private L2 slice -> home LLC slice: write `sectors` of line `line` (a write-through
    /// store, or a write-back of dirty sectors; no reply).
    LlcWrite { line: u64, sectors: u64 },
    /// Home LLC slice -> private L2 slice `tag` of channel unit `unit`: the data of an
    /// [`Packet::LlcRead`].
    LlcReply {
        line: u64,
        sectors: u64,
        tag: u32,
        unit: u32,
    },
    /// Global CP -> local CP, and local CP -> its channels: write back and invalidate the
    /// private L2 at the end of kernel `kernel` (the kernel-boundary release and acquire).
    Flush { kernel: u32 },
    /// Channel -> local CP (its write-backs have left), and local CP -> global CP (all its
    /// channels have): the flush after kernel `kernel` is done.
    FlushDone { kernel: u32 },
    /// Host -> a GPU's global CP (`system.gpus` > 1, GPUs other than 0): the host launched
    /// `kernel`; it is the `launch`-th launch of the command list.
    Launch { kernel: u32, launch: u32 },
    /// A GPU's global CP -> host: a kernel of GPU `gpu` has completed (`system.gpus` > 1).
    KernelDone { gpu: u32 },
}

/// A payload that is not a packet of this model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a GPU packet: {0:?}")]
pub struct PacketError(pub Payload);

const READ: u64 = 0;
const WRITE: u64 = 1;
const ATOMIC: u64 = 2;
const REPLY: u64 = 3;
const DISPATCH: u64 = 4;
const CTA_DONE: u64 = 5;
const MEMCPY: u64 = 6;
const SLICE: u64 = 7;
const SLICE_DONE: u64 = 8;
const LLC_READ: u64 = 9;
const LLC_WRITE: u64 = 10;
const LLC_REPLY: u64 = 11;
const FLUSH: u64 = 12;
const FLUSH_DONE: u64 = 13;
const LAUNCH: u64 = 14;
const KERNEL_DONE: u64 = 15;

/// Largest unit id a memory packet can name (16 bits of the third word).
pub const MAX_UNIT: u32 = u16::MAX as u32;

impl Packet {
    /// Inline form: `[address or first index, mask or second index, kind | tag << 8 |
    /// ops << 40 | sm << 48]` (`ops` at most 255: lanes of one warp; `sm` at most
    /// [`MAX_UNIT`], checked when a GPU is built).
    pub fn to_payload(self) -> Payload {
        let w = |a: u64, b: u64, kind: u64, tag: u32, ops: u32, sm: u32| {
            Payload::Words3([
                a,
                b,
                kind | (tag as u64) << 8
                    | ((ops & 0xff) as u64) << 40
                    | ((sm & 0xffff) as u64) << 48,
            ])
        };
        match self {
            Packet::Read {
                line,
                sectors,
                tag,
                sm,
            } => w(line, sectors, READ, tag, 0, sm),
            Packet::Write { line, sectors } => w(line, sectors, WRITE, 0, 0, 0),
            Packet::Atomic {
                line,
                sectors,
                tag,
                ops,
                sm,
            } => w(line, sectors, ATOMIC, tag, ops, sm),
            Packet::Reply {
                line,
                sectors,
                tag,
                sm,
            } => w(line, sectors, REPLY, tag, 0, sm),
            Packet::Dispatch { kernel, cta } => w(kernel as u64, cta as u64, DISPATCH, 0, 0, 0),
            Packet::CtaDone { kernel, cta } => w(kernel as u64, cta as u64, CTA_DONE, 0, 0, 0),
            Packet::Memcpy { command } => w(command as u64, 0, MEMCPY, 0, 0, 0),
            Packet::Slice { kernel } => w(kernel as u64, 0, SLICE, 0, 0, 0),
            Packet::SliceDone { kernel } => w(kernel as u64, 0, SLICE_DONE, 0, 0, 0),
            Packet::LlcRead {
                line,
                sectors,
                tag,
                unit,
            } => w(line, sectors, LLC_READ, tag, 0, unit),
            Packet::LlcWrite { line, sectors } => w(line, sectors, LLC_WRITE, 0, 0, 0),
            Packet::LlcReply {
                line,
                sectors,
                tag,
                unit,
            } => w(line, sectors, LLC_REPLY, tag, 0, unit),
            Packet::Flush { kernel } => w(kernel as u64, 0, FLUSH, 0, 0, 0),
            Packet::FlushDone { kernel } => w(kernel as u64, 0, FLUSH_DONE, 0, 0, 0),
            Packet::Launch { kernel, launch } => w(kernel as u64, launch as u64, LAUNCH, 0, 0, 0),
            Packet::KernelDone { gpu } => w(gpu as u64, 0, KERNEL_DONE, 0, 0, 0),
        }
    }

    /// Decodes [`Packet::to_payload`]'s form.
    pub fn from_payload(p: &Payload) -> Result<Packet, PacketError> {
        let Payload::Words3([a, b, c]) = *p else {
            return Err(PacketError(p.clone()));
        };
        let tag = (c >> 8) as u32;
        let ops = ((c >> 40) & 0xff) as u32;
        let sm = (c >> 48) as u32;
        Ok(match c & 0xff {
            READ => Packet::Read {
                line: a,
                sectors: b,
                tag,
                sm,
            },
            WRITE => Packet::Write {
                line: a,
                sectors: b,
            },
            ATOMIC => Packet::Atomic {
                line: a,
                sectors: b,
                tag,
                ops,
                sm,
            },
            REPLY => Packet::Reply {
                line: a,
                sectors: b,
                tag,
                sm,
            },
            DISPATCH => Packet::Dispatch {
                kernel: a as u32,
                cta: b as u32,
            },
            CTA_DONE => Packet::CtaDone {
                kernel: a as u32,
                cta: b as u32,
            },
            MEMCPY => Packet::Memcpy { command: a as u32 },
            SLICE => Packet::Slice { kernel: a as u32 },
            SLICE_DONE => Packet::SliceDone { kernel: a as u32 },
            LLC_READ => Packet::LlcRead {
                line: a,
                sectors: b,
                tag,
                unit: sm,
            },
            LLC_WRITE => Packet::LlcWrite {
                line: a,
                sectors: b,
            },
            LLC_REPLY => Packet::LlcReply {
                line: a,
                sectors: b,
                tag,
                unit: sm,
            },
            FLUSH => Packet::Flush { kernel: a as u32 },
            FLUSH_DONE => Packet::FlushDone { kernel: a as u32 },
            LAUNCH => Packet::Launch {
                kernel: a as u32,
                launch: b as u32,
            },
            KERNEL_DONE => Packet::KernelDone { gpu: a as u32 },
            _ => return Err(PacketError(p.clone())),
        })
    }

    /// Bytes on a wire (NoC or link): the 8-byte header plus the data sectors a write,
    /// atomic or reply carries (`sector_bytes` each).
    pub fn wire_bytes(&self, sector_bytes: u64) -> u64 {
        let data = |m: u64| m.count_ones() as u64 * sector_bytes;
        HEADER_BYTES
            + match *self {
                Packet::Write { sectors, .. }
                | Packet::Atomic { sectors, .. }
                | Packet::Reply { sectors, .. }
                | Packet::LlcWrite { sectors, .. }
                | Packet::LlcReply { sectors, .. } => data(sectors),
                _ => 0,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let all = [
            Packet::Read {
                line: 0x7f00_0000_0080,
                sectors: 0b1010,
                tag: u32::MAX,
                sm: MAX_UNIT,
            },
            Packet::Write {
                line: 128,
                sectors: u64::MAX,
            },
            Packet::Atomic {
                line: 256,
                sectors: 1,
                tag: 7,
                ops: 32,
                sm: 5,
            },
            Packet::Reply {
                line: 0,
                sectors: 0xf,
                tag: 3,
                sm: 1,
            },
            Packet::Slice { kernel: 3 },
            Packet::SliceDone { kernel: 2 },
            Packet::Dispatch {
                kernel: 4,
                cta: 1_000_000,
            },
            Packet::CtaDone { kernel: 0, cta: 9 },
            Packet::Memcpy { command: 12 },
            Packet::LlcRead {
                line: 0x40,
                sectors: 0b11,
                tag: 3,
                unit: MAX_UNIT,
            },
            Packet::LlcWrite {
                line: 0x80,
                sectors: 0b10,
            },
            Packet::LlcReply {
                line: 0xc0,
                sectors: 1,
                tag: 7,
                unit: 42,
            },
            Packet::Flush { kernel: 5 },
            Packet::FlushDone { kernel: 6 },
            Packet::Launch {
                kernel: 7,
                launch: 8,
            },
            Packet::KernelDone { gpu: 63 },
        ];
        for p in all {
            assert_eq!(Packet::from_payload(&p.to_payload()), Ok(p));
        }
        assert!(Packet::from_payload(&Payload::Word(1)).is_err());
        assert!(Packet::from_payload(&Payload::Words3([0, 0, 99])).is_err());
    }
}
