//! What the units of a GPU send each other: a [`Packet`] is a memory request or response
//! ([`crate::mem::message`]) or a control message ([`crate::gpu::control`]); units send
//! them through a [`Net`]. A packet that crosses partitions travels in its inline form,
//! [`Payload::Words3`] (three words, no heap), which is exact: decoding gives the packet
//! back.

use tessera_interconnect::Payload;

use crate::gpu::control::Control;
use crate::gpu::wiring::{Port, Wiring};
use crate::mem::{Ctx, Request, Response, SyncOp};
use crate::Picos;

/// Bytes of a packet header on the NoC (GPGPU-Sim's 8-byte control size).
pub(crate) const HEADER_BYTES: u64 = 8;

/// Bytes of the largest packet on a wire: a header and a whole L2 line of `line_bytes` (a
/// write, an atomic or a reply of every sector).
pub(crate) const fn largest_packet_bytes(line_bytes: u64) -> u64 {
    HEADER_BYTES + line_bytes
}

/// Largest unit id a packet can name (16 bits of the third word).
pub const MAX_UNIT: u32 = u16::MAX as u32;

/// Most sectors per L2 line a memory packet's sector mask can hold (the mask shares its
/// word with the context; checked when a GPU is built).
pub const MAX_SECTORS: u32 = 32;

/// One packet between units of a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet {
    Request(Request),
    Response(Response),
    Control(Control),
}

impl From<Request> for Packet {
    #[inline]
    fn from(r: Request) -> Packet {
        Packet::Request(r)
    }
}

impl From<Response> for Packet {
    #[inline]
    fn from(r: Response) -> Packet {
        Packet::Response(r)
    }
}

impl From<Control> for Packet {
    #[inline]
    fn from(c: Control) -> Packet {
        Packet::Control(c)
    }
}

/// Where units send packets. A unit sends a packet with its departure time on a
/// connection; the net adds the connection's latency, declared once in the system's
/// [`Wiring`] (`gpu/wiring.rs`), and its owner stamps the per-source sequence number and
/// delivers each packet to its destination unit at the arrival, in `(arrival, src, seq)`
/// order.
pub trait Net {
    /// The connections and their latencies.
    fn wiring(&self) -> &Wiring;

    /// Delivers `pkt` from unit `src` to unit `dst` at `arrive_at` (the departure plus the
    /// connection's latency: only [`Net::send`] and [`Net::send_on`] call it).
    fn deliver(&mut self, src: u32, dst: u32, arrive_at: Picos, pkt: Packet);

    /// Sends `pkt` from unit `src` to unit `dst`, leaving at `depart` (no earlier than the
    /// sender's current time): it arrives [`Wiring::latency`] later.
    #[inline(always)]
    fn send(&mut self, src: u32, dst: u32, depart: Picos, pkt: Packet) {
        // Through the chiplet's crossbar, when the NoC has one (`Wiring::hop`).
        let (to, latency) = self.wiring().hop(src, dst);
        self.deliver(src, to, depart + latency, pkt);
    }

    /// [`Net::send`] on a named port of the sender ([`Port`]).
    #[inline]
    fn send_on(&mut self, port: Port, src: u32, dst: u32, depart: Picos, pkt: Packet) {
        let at = depart + self.wiring().port_latency(port);
        self.deliver(src, dst, at, pkt);
    }
}

/// A payload that is not a packet of this model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a GPU packet: {0:?}")]
pub struct PacketError(pub Payload);

// The kind byte of the inline form. Free values (18..=255) are for the kinds to come.
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
const WRITE_ACK: u64 = 16;
const CREDIT: u64 = 17;
const SYNC: u64 = 18;
const VALUE: u64 = 19;

/// Bits of a [`Request::Sync`]'s tag on the wire, and of its word index (`addr >> 2`):
/// sync words lie below `1 << (SYNC_WORD_BITS + 2)` (256 TiB, every recorded address).
pub const SYNC_TAG_BITS: u32 = 14;
pub const SYNC_WORD_BITS: u32 = 46;

/// A sync request's third word: `kind | tag << 8 | word_hi << 22 | (lanes - 1) << 36 |
/// op << 41 | unit << 48` (tag at most [`SYNC_TAG_BITS`] bits, the word index's high 14
/// bits, lanes 1 to 32; the sender checks the ranges).
#[inline]
fn sync_word3(tag: u32, word_hi: u64, lanes: u8, op: SyncOp, unit: u32) -> u64 {
    SYNC | ((tag & ((1 << SYNC_TAG_BITS) - 1)) as u64) << 8
        | (word_hi & 0x3fff) << 22
        | ((lanes.saturating_sub(1) & 31) as u64) << 36
        | (op as u64) << 41
        | ((unit & 0xffff) as u64) << 48
}

/// The inline form: `[a, b, kind | tag << 8 | ops << 40 | unit << 48]` (`ops` at most 255,
/// `unit` at most [`MAX_UNIT`]).
#[inline]
fn words(a: u64, b: u64, kind: u64, tag: u32, ops: u8, unit: u32) -> Payload {
    Payload::Words3([
        a,
        b,
        kind | (tag as u64) << 8 | (ops as u64) << 40 | ((unit & 0xffff) as u64) << 48,
    ])
}

/// A memory packet's second word: its sector mask (at most [`MAX_SECTORS`] bits) and its
/// context in the high half.
#[inline]
fn mem_word(sectors: u64, ctx: Ctx) -> u64 {
    debug_assert!(sectors >> MAX_SECTORS == 0, "sector mask {sectors:#x}");
    sectors & 0xffff_ffff | (ctx.bits() as u64) << 32
}

impl Packet {
    /// The context of a memory packet (`None` for control).
    #[inline]
    pub fn ctx(&self) -> Option<Ctx> {
        match self {
            Packet::Request(r) => Some(r.ctx()),
            Packet::Response(r) => Some(r.ctx()),
            Packet::Control(_) => None,
        }
    }

    /// Inline form: `[line or first index, sectors | ctx << 32 or second index, kind | tag
    /// << 8 | ops << 40 | unit << 48]` (`unit`, the SM or channel unit a response goes to,
    /// at most [`MAX_UNIT`], and the sector mask at most [`MAX_SECTORS`] bits: both checked
    /// when a GPU is built).
    pub fn to_payload(self) -> Payload {
        match self {
            Packet::Request(r) => match r {
                Request::Read {
                    line,
                    sectors,
                    tag,
                    sm,
                    ctx,
                } => words(line, mem_word(sectors, ctx), READ, tag, 0, sm),
                Request::Write {
                    line,
                    sectors,
                    tag,
                    sm,
                    ctx,
                } => words(line, mem_word(sectors, ctx), WRITE, tag, 0, sm),
                Request::Atomic {
                    line,
                    sectors,
                    tag,
                    sm,
                    ctx,
                    ops,
                } => words(line, mem_word(sectors, ctx), ATOMIC, tag, ops, sm),
                Request::LlcRead {
                    line,
                    sectors,
                    tag,
                    unit,
                    ctx,
                } => words(line, mem_word(sectors, ctx), LLC_READ, tag, 0, unit),
                Request::LlcWrite { line, sectors, ctx } => {
                    words(line, mem_word(sectors, ctx), LLC_WRITE, 0, 0, 0)
                }
                Request::Sync {
                    addr,
                    tag,
                    sm,
                    ctx,
                    op,
                    lanes,
                    a,
                    b,
                } => {
                    let word = addr >> 2;
                    Payload::Words3([
                        a as u64 | (b as u64) << 32,
                        (word & 0xffff_ffff) | (ctx.bits() as u64) << 32,
                        sync_word3(tag, word >> 32, lanes, op, sm),
                    ])
                }
            },
            Packet::Response(r) => match r {
                Response::Reply {
                    line,
                    sectors,
                    tag,
                    sm,
                    ctx,
                } => words(line, mem_word(sectors, ctx), REPLY, tag, 0, sm),
                Response::WriteAck { line, tag, sm, ctx } => {
                    words(line, mem_word(0, ctx), WRITE_ACK, tag, 0, sm)
                }
                Response::LlcReply {
                    line,
                    sectors,
                    tag,
                    unit,
                    ctx,
                } => words(line, mem_word(sectors, ctx), LLC_REPLY, tag, 0, unit),
                Response::Value {
                    addr,
                    value,
                    tag,
                    sm,
                    ctx,
                } => {
                    let word = addr >> 2;
                    words(
                        value as u64 | (word & 0xffff_ffff) << 32,
                        (word >> 32) | (ctx.bits() as u64) << 32,
                        VALUE,
                        tag,
                        0,
                        sm,
                    )
                }
            },
            Packet::Control(c) => {
                let w = |a: u32, b: u32, kind| words(a as u64, b as u64, kind, 0, 0, 0);
                match c {
                    Control::Dispatch { kernel, cta } => w(kernel, cta, DISPATCH),
                    Control::CtaDone { kernel, cta } => w(kernel, cta, CTA_DONE),
                    Control::Memcpy { command } => w(command, 0, MEMCPY),
                    Control::Slice { kernel } => w(kernel, 0, SLICE),
                    Control::SliceDone { kernel } => w(kernel, 0, SLICE_DONE),
                    Control::Flush { kernel } => w(kernel, 0, FLUSH),
                    Control::FlushDone { kernel } => w(kernel, 0, FLUSH_DONE),
                    Control::Launch { kernel, launch } => w(kernel, launch, LAUNCH),
                    Control::KernelDone { gpu } => w(gpu, 0, KERNEL_DONE),
                    Control::Credit { link, vc, bytes } => words(
                        link as u64 | (vc as u64) << 32,
                        bytes as u64,
                        CREDIT,
                        0,
                        0,
                        0,
                    ),
                }
            }
        }
    }

    /// Decodes [`Packet::to_payload`]'s form.
    pub fn from_payload(p: &Payload) -> Result<Packet, PacketError> {
        let Payload::Words3([a, b, c]) = *p else {
            return Err(PacketError(p.clone()));
        };
        let tag = (c >> 8) as u32;
        let ops = (c >> 40) as u8;
        let unit = (c >> 48) as u32;
        let (line, sectors, ctx) = (a, b & 0xffff_ffff, Ctx::from_bits((b >> 32) as u32));
        let (x, y) = (a as u32, b as u32);
        Ok(match c & 0xff {
            READ => Packet::Request(Request::Read {
                line,
                sectors,
                tag,
                sm: unit,
                ctx,
            }),
            WRITE => Packet::Request(Request::Write {
                line,
                sectors,
                tag,
                sm: unit,
                ctx,
            }),
            ATOMIC => Packet::Request(Request::Atomic {
                line,
                sectors,
                tag,
                sm: unit,
                ctx,
                ops,
            }),
            LLC_READ => Packet::Request(Request::LlcRead {
                line,
                sectors,
                tag,
                unit,
                ctx,
            }),
            LLC_WRITE => Packet::Request(Request::LlcWrite { line, sectors, ctx }),
            REPLY => Packet::Response(Response::Reply {
                line,
                sectors,
                tag,
                sm: unit,
                ctx,
            }),
            WRITE_ACK => Packet::Response(Response::WriteAck {
                line,
                tag,
                sm: unit,
                ctx,
            }),
            LLC_REPLY => Packet::Response(Response::LlcReply {
                line,
                sectors,
                tag,
                unit,
                ctx,
            }),
            DISPATCH => Packet::Control(Control::Dispatch { kernel: x, cta: y }),
            CTA_DONE => Packet::Control(Control::CtaDone { kernel: x, cta: y }),
            MEMCPY => Packet::Control(Control::Memcpy { command: x }),
            SLICE => Packet::Control(Control::Slice { kernel: x }),
            SLICE_DONE => Packet::Control(Control::SliceDone { kernel: x }),
            FLUSH => Packet::Control(Control::Flush { kernel: x }),
            FLUSH_DONE => Packet::Control(Control::FlushDone { kernel: x }),
            LAUNCH => Packet::Control(Control::Launch {
                kernel: x,
                launch: y,
            }),
            KERNEL_DONE => Packet::Control(Control::KernelDone { gpu: x }),
            SYNC => {
                let op = SyncOp::from_code((c >> 41 & 0x7f) as u8).ok_or(PacketError(p.clone()))?;
                let word = (b & 0xffff_ffff) | (c >> 22 & 0x3fff) << 32;
                Packet::Request(Request::Sync {
                    addr: word << 2,
                    tag: (c >> 8) as u32 & ((1 << SYNC_TAG_BITS) - 1),
                    sm: unit,
                    ctx,
                    op,
                    lanes: (c >> 36 & 31) as u8 + 1,
                    a: a as u32,
                    b: (a >> 32) as u32,
                })
            }
            VALUE => {
                let word = (a >> 32) | (b & 0xffff_ffff) << 32;
                Packet::Response(Response::Value {
                    addr: word << 2,
                    value: a as u32,
                    tag,
                    sm: unit,
                    ctx,
                })
            }
            CREDIT => Packet::Control(Control::Credit {
                link: x,
                vc: (a >> 32) as u32,
                bytes: y,
            }),
            _ => return Err(PacketError(p.clone())),
        })
    }

    /// Bytes on a wire (NoC or link): the 8-byte header plus the data sectors a write,
    /// atomic or reply carries (`sector_bytes` each).
    pub fn wire_bytes(&self, sector_bytes: u64) -> u64 {
        let data = |m: u64| m.count_ones() as u64 * sector_bytes;
        HEADER_BYTES
            + match self {
                Packet::Request(r) if r.carries_data() => data(r.sectors()),
                Packet::Response(r) => data(r.sectors()),
                _ => 0,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(tenant: u32, stream: u32, kernel: u32) -> Ctx {
        Ctx::new(tenant, stream, kernel).unwrap_or_default()
    }

    #[test]
    fn round_trip() {
        let max = ctx(
            Ctx::MAX_TENANTS - 1,
            Ctx::MAX_STREAMS - 1,
            Ctx::MAX_KERNELS - 1,
        );
        let full = (1u64 << MAX_SECTORS) - 1;
        let requests = [
            Request::Read {
                line: 0x7f00_0000_0080,
                sectors: 0b1010,
                tag: u32::MAX,
                sm: MAX_UNIT,
                ctx: max,
            },
            Request::Read {
                line: u64::MAX,
                sectors: full,
                tag: 0,
                sm: 0,
                ctx: Ctx::HOST,
            },
            Request::Write {
                line: 128,
                sectors: full,
                tag: Request::NO_ACK,
                sm: 0,
                ctx: max,
            },
            Request::Write {
                line: 0x100,
                sectors: 1,
                tag: 12,
                sm: MAX_UNIT,
                ctx: Ctx::HOST,
            },
            Request::Atomic {
                line: 256,
                sectors: 1,
                tag: 7,
                sm: MAX_UNIT,
                ctx: ctx(1, 2, 3),
                ops: u8::MAX,
            },
            Request::LlcRead {
                line: 0x40,
                sectors: 0b11,
                tag: 3,
                unit: MAX_UNIT,
                ctx: max,
            },
            Request::LlcWrite {
                line: 0x80,
                sectors: full,
                ctx: Ctx::HOST,
            },
        ];
        let responses = [
            Response::Reply {
                line: 0,
                sectors: 0xf,
                tag: 3,
                sm: 1,
                ctx: max,
            },
            Response::Reply {
                line: u64::MAX,
                sectors: full,
                tag: u32::MAX,
                sm: MAX_UNIT,
                ctx: ctx(0, 5, 0),
            },
            Response::WriteAck {
                line: u64::MAX,
                tag: u32::MAX - 1,
                sm: MAX_UNIT,
                ctx: max,
            },
            Response::LlcReply {
                line: 0xc0,
                sectors: 1,
                tag: 7,
                unit: MAX_UNIT,
                ctx: max,
            },
        ];
        let controls = [
            Control::Slice { kernel: u32::MAX },
            Control::SliceDone { kernel: 2 },
            Control::Dispatch {
                kernel: u32::MAX,
                cta: u32::MAX,
            },
            Control::CtaDone { kernel: 0, cta: 9 },
            Control::Memcpy { command: u32::MAX },
            Control::Flush { kernel: 5 },
            Control::FlushDone { kernel: 6 },
            Control::Launch {
                kernel: 7,
                launch: u32::MAX,
            },
            Control::KernelDone { gpu: 63 },
            Control::Credit {
                link: u32::MAX,
                vc: u32::MAX - 1,
                bytes: u32::MAX,
            },
            Control::Credit {
                link: 3,
                vc: 0,
                bytes: 144,
            },
        ];
        let syncs = SyncOp::ALL.map(|op| Request::Sync {
            addr: ((1u64 << SYNC_WORD_BITS) - 1) << 2,
            tag: (1 << SYNC_TAG_BITS) - 1,
            sm: MAX_UNIT,
            ctx: max,
            op,
            lanes: 32,
            a: u32::MAX,
            b: 7,
        });
        let values = [Response::Value {
            addr: ((1u64 << SYNC_WORD_BITS) - 1) << 2,
            value: u32::MAX - 3,
            tag: u32::MAX,
            sm: MAX_UNIT,
            ctx: max,
        }];
        let all = requests
            .iter()
            .chain(syncs.iter())
            .map(|&r| Packet::from(r))
            .chain(values.iter().map(|&r| Packet::from(r)))
            .chain(std::iter::once(Packet::from(Request::Sync {
                addr: 0x7f00_0000_1004,
                tag: 3,
                sm: 2,
                ctx: ctx(0, 0, 1),
                op: SyncOp::Load,
                lanes: 1,
                a: 0,
                b: 0,
            })))
            .chain(responses.iter().map(|&r| Packet::from(r)))
            .chain(controls.iter().map(|&c| Packet::from(c)));
        for p in all {
            assert_eq!(Packet::from_payload(&p.to_payload()), Ok(p));
        }
        assert!(Packet::from_payload(&Payload::Word(1)).is_err());
        assert!(Packet::from_payload(&Payload::Words3([0, 0, 99])).is_err());
    }

    #[test]
    fn contexts_and_wire_bytes() {
        let c = ctx(0, 1, 2);
        let r = Packet::from(Request::Write {
            line: 0,
            sectors: 0b111,
            tag: 0,
            sm: 0,
            ctx: c,
        });
        assert_eq!(r.ctx(), Some(c));
        assert_eq!(r.wire_bytes(32), HEADER_BYTES + 3 * 32);
        let ack = Packet::from(Response::WriteAck {
            line: 0,
            tag: 0,
            sm: 0,
            ctx: c,
        });
        assert_eq!((ack.ctx(), ack.wire_bytes(32)), (Some(c), HEADER_BYTES));
        let read = Packet::from(Request::Read {
            line: 0,
            sectors: 0b111,
            tag: 0,
            sm: 0,
            ctx: c,
        });
        assert_eq!(read.wire_bytes(32), HEADER_BYTES);
        assert_eq!(Packet::from(Control::Slice { kernel: 0 }).ctx(), None);
    }

    /// A partition's inbox entry holds a packet: kept small (`gpu/partition.rs`).
    #[test]
    fn packet_size() {
        assert!(std::mem::size_of::<Packet>() <= 40);
    }
}
