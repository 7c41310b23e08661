//! The message envelope that crosses partitions, its total order, and its wire form.

use std::fmt;

use crate::Picos;

/// Stable id of a port in the modeled system (DESIGN.md section 3).
///
/// It names the port's place in the modeled system (for example "the egress port of chiplet
/// 2's link to chiplet 3"), never the partition, thread or rank that happens to host it, so
/// the order of arrivals it decides is the same for every partitioning. How ids are
/// allocated is the system builder's choice; the engine only needs them unique.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PortId(pub u32);

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a message carries.
///
/// A small closed enum rather than opaque bytes: messages stay plain data that every
/// transport can move as is (the sequential and thread transports never encode them) and
/// that the MPI transport encodes with [`Message::encode`], and fixed-size variants never
/// touch the heap, so a steady stream of requests, credits and acknowledgements allocates
/// nothing. The models add their own variants here (memory requests and responses, CTA
/// dispatch, credits, coherence actions) as they arrive; [`Payload::Bytes`] is the escape
/// hatch for tests and for anything not yet given a variant, and costs one allocation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Payload {
    /// No data: a pure signal (a token, a credit, an acknowledgement).
    #[default]
    Signal,
    /// One inline 64-bit word.
    Word(u64),
    /// Three inline 64-bit words: a model's packet (a memory request or reply, a CTA
    /// dispatch or completion), laid out by the model, without touching the heap.
    Words3([u64; 3]),
    /// Opaque bytes (heap-allocated).
    Bytes(Vec<u8>),
}

/// A timed message from one port to another (DESIGN.md sections 3 and 4).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Message {
    /// When the message reaches the receiver's ingress: departure plus link latency.
    pub arrive_at: Picos,
    /// The sending port (stable, never a partition number).
    pub src_port: PortId,
    /// Per-sending-port sequence number, from 0, stamped by [`crate::Port`].
    pub src_seq: u64,
    /// The receiving port; the engine routes on it.
    pub dst_port: PortId,
    /// What the message carries.
    pub payload: Payload,
}

/// The key of the total order in which a receiver consumes arrivals:
/// `(arrive_at, src_port, src_seq)`, compared in that order (the derived `Ord` follows the
/// field order). A port never reuses a sequence number, so no two messages of one run share
/// a key and the order is strict: sorting needs no stability and never depends on which
/// partition or worker a message came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OrderKey {
    /// First: arrival time.
    pub arrive_at: Picos,
    /// Then: sending port.
    pub src_port: PortId,
    /// Then: the sending port's sequence number.
    pub src_seq: u64,
}

impl Message {
    /// This message's place in the total order of arrivals.
    #[inline]
    pub fn key(&self) -> OrderKey {
        OrderKey {
            arrive_at: self.arrive_at,
            src_port: self.src_port,
            src_seq: self.src_seq,
        }
    }

    /// Appends the wire form of this message to `out` (little endian: `arrive_at` u64,
    /// `src_port` u32, `src_seq` u64, `dst_port` u32, a payload tag byte, then the payload:
    /// nothing for `Signal`, a u64 for `Word`, three u64 for `Words3`, a u32 length and the bytes for `Bytes`).
    /// A `Bytes` payload longer than `u32::MAX` bytes is an error.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        out.extend_from_slice(&self.arrive_at.to_le_bytes());
        out.extend_from_slice(&self.src_port.0.to_le_bytes());
        out.extend_from_slice(&self.src_seq.to_le_bytes());
        out.extend_from_slice(&self.dst_port.0.to_le_bytes());
        match &self.payload {
            Payload::Signal => out.push(TAG_SIGNAL),
            Payload::Word(w) => {
                out.push(TAG_WORD);
                out.extend_from_slice(&w.to_le_bytes());
            }
            Payload::Words3(w) => {
                out.push(TAG_WORDS3);
                for x in w {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
            Payload::Bytes(b) => {
                let len = u32::try_from(b.len()).map_err(|_| WireError::TooLong {
                    src_port: self.src_port,
                    len: b.len(),
                })?;
                out.push(TAG_BYTES);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(b);
            }
        }
        Ok(())
    }

    /// Decodes one message from the front of `bytes`; returns it and the number of bytes
    /// it took. Truncated input or an unknown payload tag is an error, never a panic.
    pub fn decode(bytes: &[u8]) -> Result<(Message, usize), WireError> {
        let mut r = Reader { bytes, pos: 0 };
        let arrive_at = r.u64()?;
        let src_port = PortId(r.u32()?);
        let src_seq = r.u64()?;
        let dst_port = PortId(r.u32()?);
        let payload = match r.u8()? {
            TAG_SIGNAL => Payload::Signal,
            TAG_WORD => Payload::Word(r.u64()?),
            TAG_WORDS3 => Payload::Words3([r.u64()?, r.u64()?, r.u64()?]),
            TAG_BYTES => {
                let len = r.u32()? as usize;
                Payload::Bytes(r.take(len)?.to_vec())
            }
            tag => return Err(WireError::BadTag { src_port, tag }),
        };
        let msg = Message {
            arrive_at,
            src_port,
            src_seq,
            dst_port,
            payload,
        };
        Ok((msg, r.pos))
    }
}

/// Sorts arrivals into the total order of [`OrderKey`] (no allocation).
#[inline]
pub fn sort_arrivals(msgs: &mut [Message]) {
    msgs.sort_unstable_by_key(Message::key);
}

const TAG_SIGNAL: u8 = 0;
const TAG_WORD: u8 = 1;
const TAG_BYTES: u8 = 2;
const TAG_WORDS3: u8 = 3;

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).ok_or(WireError::Truncated)?;
        let s = self.bytes.get(self.pos..end).ok_or(WireError::Truncated)?;
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
}

/// An error in the wire form of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The input ends inside a message.
    Truncated,
    /// An unknown payload tag.
    BadTag {
        /// The sending port of the damaged message.
        src_port: PortId,
        /// The tag found.
        tag: u8,
    },
    /// A `Bytes` payload too long to encode.
    TooLong {
        /// The sending port.
        src_port: PortId,
        /// The payload length.
        len: usize,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated => write!(f, "encoded message is truncated"),
            WireError::BadTag { src_port, tag } => {
                write!(
                    f,
                    "encoded message from port {src_port}: unknown payload tag {tag}"
                )
            }
            WireError::TooLong { src_port, len } => write!(
                f,
                "message from port {src_port}: payload of {len} bytes is too long to encode"
            ),
        }
    }
}

impl std::error::Error for WireError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(arrive_at: Picos, src: u32, seq: u64, payload: Payload) -> Message {
        Message {
            arrive_at,
            src_port: PortId(src),
            src_seq: seq,
            dst_port: PortId(99),
            payload,
        }
    }

    #[test]
    fn order_is_time_then_port_then_seq() {
        let mut v = vec![
            msg(10, 2, 0, Payload::Signal),
            msg(5, 9, 3, Payload::Signal),
            msg(10, 1, 7, Payload::Signal),
            msg(10, 1, 2, Payload::Signal),
            msg(5, 9, 1, Payload::Signal),
        ];
        sort_arrivals(&mut v);
        let keys: Vec<(Picos, u32, u64)> = v
            .iter()
            .map(|m| (m.arrive_at, m.src_port.0, m.src_seq))
            .collect();
        assert_eq!(
            keys,
            vec![(5, 9, 1), (5, 9, 3), (10, 1, 2), (10, 1, 7), (10, 2, 0)]
        );
    }

    #[test]
    fn order_ignores_the_input_order() {
        let base = vec![
            msg(7, 3, 0, Payload::Word(1)),
            msg(7, 2, 5, Payload::Word(2)),
            msg(6, 4, 1, Payload::Word(3)),
            msg(7, 2, 4, Payload::Word(4)),
        ];
        let mut a = base.clone();
        let mut b: Vec<Message> = base.into_iter().rev().collect();
        sort_arrivals(&mut a);
        sort_arrivals(&mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn wire_round_trip() {
        let msgs = [
            msg(u64::MAX, u32::MAX, u64::MAX, Payload::Signal),
            msg(1234, 7, 0, Payload::Word(0xdead_beef_cafe_f00d)),
            msg(0, 0, 1, Payload::Bytes(vec![1, 2, 3, 255])),
            msg(9, 1, 2, Payload::Bytes(Vec::new())),
            msg(
                5,
                3,
                8,
                Payload::Words3([1, u64::MAX, 0x0123_4567_89ab_cdef]),
            ),
        ];
        let mut buf = Vec::new();
        for m in &msgs {
            m.encode(&mut buf).unwrap();
        }
        let mut pos = 0;
        for m in &msgs {
            let (d, n) = Message::decode(&buf[pos..]).unwrap();
            assert_eq!(&d, m);
            pos += n;
        }
        assert_eq!(pos, buf.len());
    }

    #[test]
    fn wire_errors_never_panic() {
        let mut buf = Vec::new();
        msg(3, 4, 5, Payload::Bytes(vec![9; 10]))
            .encode(&mut buf)
            .unwrap();
        for cut in 0..buf.len() {
            assert_eq!(
                Message::decode(&buf[..cut]).unwrap_err(),
                WireError::Truncated
            );
        }
        buf[24] = 77;
        let e = Message::decode(&buf).unwrap_err();
        assert_eq!(
            e,
            WireError::BadTag {
                src_port: PortId(4),
                tag: 77
            }
        );
        assert!(e.to_string().contains("port 4"), "{e}");
        // A length that runs past the end of the input.
        let mut buf = Vec::new();
        msg(3, 4, 5, Payload::Bytes(vec![1]))
            .encode(&mut buf)
            .unwrap();
        buf[25..29].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(Message::decode(&buf).unwrap_err(), WireError::Truncated);
    }
}
