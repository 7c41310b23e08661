//! The sending side of a port: sequence stamping and the lookahead contract.

use std::fmt;

use crate::{Message, Payload, Picos, PortId};

/// The sequence numbers of one sender: dense from 0, one per message, never reused, the
/// tie-break of [`crate::OrderKey`]. A [`Port`] stamps its messages with one; a model whose
/// senders are units talking to many peers (the GPU model's net) keeps one per unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sequence(u64);

impl Sequence {
    /// A sequence whose next number is `next` (tests start near an overflow).
    pub fn starting_at(next: u64) -> Sequence {
        Sequence(next)
    }

    /// The number the next message will carry (= messages stamped so far).
    #[inline]
    pub fn peek(&self) -> u64 {
        self.0
    }

    /// The next number, taken.
    #[inline]
    pub fn take(&mut self) -> u64 {
        let s = self.0;
        self.0 += 1;
        s
    }
}

/// The sending end of a point-to-point port in the modeled system.
///
/// It stamps each message with its port id and the next per-port sequence number and
/// enforces the lookahead contract of DESIGN.md sections 3 and 4: a message sent at `now`
/// arrives no earlier than `now + min_latency`. For a port that crosses partitions,
/// `min_latency` is at least the engine's lookahead `L`, so this check at the sender is what
/// makes the conservative window exact; a violation is an error naming the port, not a
/// silent reordering. The sequence number advances only when a send succeeds, so the
/// numbers a port emits are dense.
///
/// The egress model (serialization at the link bandwidth, queueing) sits in front of this:
/// it decides the departure, and `arrive_at = depart + latency` is what is sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    id: PortId,
    peer: PortId,
    min_latency: Picos,
    next_seq: Sequence,
}

impl Port {
    /// A port `id` whose messages go to port `peer` and take at least `min_latency`.
    /// A zero latency is an error: every port's latency is at least one receiver cycle
    /// (DESIGN.md section 5), and a zero-latency port could never be split across partitions.
    pub fn new(id: PortId, peer: PortId, min_latency: Picos) -> Result<Port, PortError> {
        if min_latency == 0 {
            return Err(PortError::ZeroLatency { port: id, peer });
        }
        Ok(Port {
            id,
            peer,
            min_latency,
            next_seq: Sequence::default(),
        })
    }

    /// This port's id.
    pub fn id(&self) -> PortId {
        self.id
    }

    /// The receiving port.
    pub fn peer(&self) -> PortId {
        self.peer
    }

    /// The minimum latency this port promises.
    pub fn min_latency(&self) -> Picos {
        self.min_latency
    }

    /// The sequence number the next message will carry (= messages sent so far).
    pub fn next_seq(&self) -> u64 {
        self.next_seq.peek()
    }

    /// Sends `payload` at `now`, arriving at `arrive_at`. Errors (and sends nothing) if
    /// `arrive_at < now + min_latency`.
    pub fn send(
        &mut self,
        now: Picos,
        arrive_at: Picos,
        payload: Payload,
    ) -> Result<Message, SendError> {
        let earliest = now
            .checked_add(self.min_latency)
            .ok_or(SendError::TimeOverflow {
                port: self.id,
                now,
                latency: self.min_latency,
            })?;
        if arrive_at < earliest {
            return Err(SendError::TooEarly {
                port: self.id,
                peer: self.peer,
                now,
                arrive_at,
                earliest,
            });
        }
        let src_seq = self.next_seq.take();
        Ok(Message {
            arrive_at,
            src_port: self.id,
            src_seq,
            dst_port: self.peer,
            payload,
        })
    }

    /// Sends `payload` at `now`, arriving `latency` later (`latency >= min_latency`).
    pub fn send_after(
        &mut self,
        now: Picos,
        latency: Picos,
        payload: Payload,
    ) -> Result<Message, SendError> {
        let arrive_at = now.checked_add(latency).ok_or(SendError::TimeOverflow {
            port: self.id,
            now,
            latency,
        })?;
        self.send(now, arrive_at, payload)
    }
}

/// An error constructing a [`Port`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortError {
    /// The minimum latency is zero.
    ZeroLatency {
        /// The port.
        port: PortId,
        /// Its peer.
        peer: PortId,
    },
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortError::ZeroLatency { port, peer } => write!(
                f,
                "port {port} (to port {peer}) has a zero minimum latency; every port needs \
                 at least one picosecond (one receiver cycle)"
            ),
        }
    }
}

impl std::error::Error for PortError {}

/// A send that breaks the lookahead contract.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendError {
    /// `arrive_at` is earlier than `now + min_latency`.
    TooEarly {
        /// The sending port.
        port: PortId,
        /// The receiving port.
        peer: PortId,
        /// The send time.
        now: Picos,
        /// The requested arrival.
        arrive_at: Picos,
        /// `now + min_latency`, the earliest legal arrival.
        earliest: Picos,
    },
    /// `now + latency` does not fit in the picosecond clock.
    TimeOverflow {
        /// The sending port.
        port: PortId,
        /// The send time.
        now: Picos,
        /// The latency.
        latency: Picos,
    },
}

impl SendError {
    /// The port that broke the contract.
    pub fn port(&self) -> PortId {
        match self {
            SendError::TooEarly { port, .. } | SendError::TimeOverflow { port, .. } => *port,
        }
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::TooEarly {
                port,
                peer,
                now,
                arrive_at,
                earliest,
            } => write!(
                f,
                "port {port} (to port {peer}) broke its lookahead contract: a message sent at \
                 {now} ps would arrive at {arrive_at} ps, earlier than the port's minimum \
                 latency allows ({earliest} ps)"
            ),
            SendError::TimeOverflow { port, now, latency } => write!(
                f,
                "port {port}: a message sent at {now} ps with latency {latency} ps arrives \
                 past the end of the picosecond clock"
            ),
        }
    }
}

impl std::error::Error for SendError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_dense_sequence_numbers() {
        let mut p = Port::new(PortId(7), PortId(8), 100).unwrap();
        let a = p.send(0, 100, Payload::Signal).unwrap();
        let b = p.send_after(50, 250, Payload::Word(3)).unwrap();
        assert_eq!(
            (a.src_port, a.src_seq, a.dst_port),
            (PortId(7), 0, PortId(8))
        );
        assert_eq!(
            (b.arrive_at, b.src_seq, b.payload),
            (300, 1, Payload::Word(3))
        );
        // A failed send consumes no sequence number.
        assert!(p.send(1000, 1099, Payload::Signal).is_err());
        assert_eq!(p.send(1000, 1100, Payload::Signal).unwrap().src_seq, 2);
        assert_eq!(p.next_seq(), 3);
    }

    #[test]
    fn early_arrival_is_an_error_naming_the_port() {
        let mut p = Port::new(PortId(42), PortId(43), 1000).unwrap();
        let e = p.send(5000, 5999, Payload::Signal).unwrap_err();
        assert_eq!(e.port(), PortId(42));
        assert_eq!(
            e,
            SendError::TooEarly {
                port: PortId(42),
                peer: PortId(43),
                now: 5000,
                arrive_at: 5999,
                earliest: 6000
            }
        );
        let s = e.to_string();
        assert!(s.contains("port 42") && s.contains("6000 ps"), "{s}");
        // Exactly the minimum latency is legal.
        assert_eq!(p.send(5000, 6000, Payload::Signal).unwrap().arrive_at, 6000);
    }

    #[test]
    fn zero_latency_and_overflow_are_errors() {
        let e = Port::new(PortId(1), PortId(2), 0).unwrap_err();
        assert!(e.to_string().contains("port 1"), "{e}");
        let mut p = Port::new(PortId(3), PortId(4), 10).unwrap();
        assert!(matches!(
            p.send(u64::MAX - 5, u64::MAX, Payload::Signal),
            Err(SendError::TimeOverflow { .. })
        ));
        assert!(matches!(
            p.send_after(u64::MAX - 5, 10, Payload::Signal),
            Err(SendError::TimeOverflow { .. })
        ));
    }
}
