//! The packets the units of one GPU exchange, and their inline form
//! ([`Payload::Words3`]: three words, no heap).

use tessera_interconnect::Payload;

/// One packet between units of a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet {
    /// SM -> channel: read `sectors` of L2 line `line`; the reply names `tag` (the SM's
    /// MSHR).
    Read { line: u64, sectors: u64, tag: u32 },
    /// SM -> channel: write `sectors` of L2 line `line` (no reply).
    Write { line: u64, sectors: u64 },
    /// SM -> channel: an atomic of `ops` lane operations on `sectors` of L2 line `line`.
    Atomic {
        line: u64,
        sectors: u64,
        tag: u32,
        ops: u32,
    },
    /// Channel -> SM: the data of a read or the result of an atomic.
    Reply { line: u64, sectors: u64, tag: u32 },
    /// Local CP -> SM: CTA `cta` of kernel `kernel` (listing indices).
    Dispatch { kernel: u32, cta: u32 },
    /// SM -> local CP: CTA `cta` of kernel `kernel` has completed.
    CtaDone { kernel: u32, cta: u32 },
    /// Host -> channel: the trace's command `command` (a `MemcpyHtoD`) has happened.
    Memcpy { command: u32 },
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

impl Packet {
    /// Inline form: `[address or first index, mask or second index, kind | tag << 8 | ops << 40]`.
    pub fn to_payload(self) -> Payload {
        let w = |a: u64, b: u64, kind: u64, tag: u32, ops: u32| {
            Payload::Words3([a, b, kind | (tag as u64) << 8 | (ops as u64) << 40])
        };
        match self {
            Packet::Read { line, sectors, tag } => w(line, sectors, READ, tag, 0),
            Packet::Write { line, sectors } => w(line, sectors, WRITE, 0, 0),
            Packet::Atomic {
                line,
                sectors,
                tag,
                ops,
            } => w(line, sectors, ATOMIC, tag, ops),
            Packet::Reply { line, sectors, tag } => w(line, sectors, REPLY, tag, 0),
            Packet::Dispatch { kernel, cta } => w(kernel as u64, cta as u64, DISPATCH, 0, 0),
            Packet::CtaDone { kernel, cta } => w(kernel as u64, cta as u64, CTA_DONE, 0, 0),
            Packet::Memcpy { command } => w(command as u64, 0, MEMCPY, 0, 0),
        }
    }

    /// Decodes [`Packet::to_payload`]'s form.
    pub fn from_payload(p: &Payload) -> Result<Packet, PacketError> {
        let Payload::Words3([a, b, c]) = *p else {
            return Err(PacketError(p.clone()));
        };
        let tag = (c >> 8) as u32;
        let ops = (c >> 40) as u32;
        Ok(match c & 0xff {
            READ => Packet::Read {
                line: a,
                sectors: b,
                tag,
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
            },
            REPLY => Packet::Reply {
                line: a,
                sectors: b,
                tag,
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
            _ => return Err(PacketError(p.clone())),
        })
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
            },
            Packet::Reply {
                line: 0,
                sectors: 0xf,
                tag: 3,
            },
            Packet::Dispatch {
                kernel: 4,
                cta: 1_000_000,
            },
            Packet::CtaDone { kernel: 0, cta: 9 },
            Packet::Memcpy { command: 12 },
        ];
        for p in all {
            assert_eq!(Packet::from_payload(&p.to_payload()), Ok(p));
        }
        assert!(Packet::from_payload(&Payload::Word(1)).is_err());
        assert!(Packet::from_payload(&Payload::Words3([0, 0, 99])).is_err());
    }
}
