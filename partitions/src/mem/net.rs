//! How units send packets.

use super::Packet;
use crate::counters::unit_counters;
use crate::Picos;

unit_counters! {
    /// NoC bytes (headers included) a unit sent: an SM's LD/ST unit sends requests to L2
    /// slices, a channel replies to SMs.
    pub struct NocStats {
        request_bytes,
        reply_bytes,
    }
}

/// Where units send packets. The owner stamps the per-source sequence number and delivers
/// each packet to its destination unit at `arrive_at`, in `(arrive_at, src, seq)` order.
pub trait Net {
    /// Sends `pkt` from unit `src` to unit `dst`, arriving at `arrive_at` (at least the
    /// NoC latency after the sender's current time).
    fn send(&mut self, src: u32, dst: u32, arrive_at: Picos, pkt: Packet);
}
