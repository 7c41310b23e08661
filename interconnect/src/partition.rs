//! What a partition (a chiplet model, or a group of modeled units) implements.

use crate::{Message, Payload, Picos, Port, PortId, SendError};

/// A boxed error from a model or a transport, carried inside the engine's error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// One partition: a set of modeled units simulated together, which talks to other
/// partitions only through timed [`Message`]s on ports whose latency is at least the
/// lookahead `L` (DESIGN.md sections 4 and 5).
///
/// The engine drives it window by window:
///
/// 1. [`next_event_time`](Partition::next_event_time) is asked for the earliest pending
///    event (internal events and messages already delivered alike); the global minimum is
///    the start `T` of the next window.
/// 2. [`run_until`](Partition::run_until)`(end, out)` simulates every event in
///    `[now, end)` (`end <= T + L`); messages for other partitions go to `out` and must
///    arrive at `>= end` (true by construction when every cross-partition port has latency
///    `>= L` and is driven through [`Port`]). Idle time before the first event is skipped;
///    the partition must account for it as if ticked where that matters (DESIGN.md
///    section 5). After the call the partition's current time is `end`, and it must have
///    no pending event earlier than `end`.
/// 3. [`deliver`](Partition::deliver) hands it every message sent to its ports during the
///    window, sorted by `(arrive_at, src_port, src_seq)`, each arriving at `>= end`. The
///    partition queues them; they are events from now on.
///
/// A partition is idle when `next_event_time` is `None`. The run ends when every partition
/// is idle and no message is in flight (messages never stay in flight across a window:
/// they are delivered at its end).
pub trait Partition {
    /// The time of the earliest pending event, or `None` when idle.
    fn next_event_time(&self) -> Option<Picos>;

    /// Simulates `[now, end)`, pushing cross-partition messages to `out`. An error aborts
    /// the run (all workers, all ranks) with the partition's index attached.
    fn run_until(&mut self, end: Picos, out: &mut Outbox) -> Result<(), BoxError>;

    /// Receives the messages sent to this partition's ports in the last window, already in
    /// the fixed order. An error aborts the run.
    fn deliver(&mut self, msgs: &[Message]) -> Result<(), BoxError>;

    /// Asked only when the whole system is quiescent (every partition idle, nothing in
    /// flight): `Some(description)` if this partition still has unfinished work (warps
    /// waiting on a barrier or a lock that nothing will release), which ends the run with
    /// the engine's `Stalled` error instead of a silent finish. Default: `None`.
    fn stalled(&self) -> Option<String> {
        None
    }
}

impl<P: Partition + ?Sized> Partition for Box<P> {
    fn next_event_time(&self) -> Option<Picos> {
        (**self).next_event_time()
    }
    fn run_until(&mut self, end: Picos, out: &mut Outbox) -> Result<(), BoxError> {
        (**self).run_until(end, out)
    }
    fn deliver(&mut self, msgs: &[Message]) -> Result<(), BoxError> {
        (**self).deliver(msgs)
    }
    fn stalled(&self) -> Option<String> {
        (**self).stalled()
    }
}

/// The messages a partition sends to other partitions during one window. The engine owns
/// one and drains it after each partition's `run_until`, so its buffer is reused from
/// window to window.
#[derive(Debug, Default)]
pub struct Outbox {
    pub(crate) msgs: Vec<Message>,
}

impl Outbox {
    /// An empty outbox (the engine makes its own; this is for a model's unit tests).
    pub fn new() -> Outbox {
        Outbox::default()
    }

    /// Queues a message already stamped (by a [`Port`]).
    #[inline]
    pub fn push(&mut self, msg: Message) {
        self.msgs.push(msg);
    }

    /// Sends through `port` at `now`, arriving at `arrive_at`: the port stamps the sequence
    /// number and checks the lookahead contract (an error names the port).
    #[inline]
    pub fn send(
        &mut self,
        port: &mut Port,
        now: Picos,
        arrive_at: Picos,
        payload: Payload,
    ) -> Result<(), SendError> {
        self.msgs.push(port.send(now, arrive_at, payload)?);
        Ok(())
    }

    /// The messages queued so far.
    pub fn messages(&self) -> &[Message] {
        &self.msgs
    }

    /// Number of messages queued.
    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }

    /// Takes every queued message out, in the order queued, keeping the buffer (the
    /// engine's routing step).
    pub fn drain(&mut self) -> std::vec::Drain<'_, Message> {
        self.msgs.drain(..)
    }

    /// Drops every queued message, keeping the buffer.
    pub fn clear(&mut self) {
        self.msgs.clear();
    }
}

/// A modeled link from one port to another, with its (minimum) latency: what a system
/// builder declares so the engine can compute the lookahead of a partitioning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// The sending port.
    pub src: PortId,
    /// The receiving port.
    pub dst: PortId,
    /// The link's minimum latency (departure to arrival).
    pub latency: Picos,
}
