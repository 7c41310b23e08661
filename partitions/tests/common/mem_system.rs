//! [`MemSystem`]: every memory unit of one GPU wired together by an in-order packet queue,
//! without SMs: for tests and latency studies of the memory hierarchy alone. The GPU model
//! drives the same units from its partitions instead. A test driver, not library API: the
//! test files that use it include it with `#[path = "common/mem_system.rs"]`.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use tessera_partitions::config::GpuConfig;
use tessera_partitions::gpu::Wiring;
use tessera_partitions::mem::{
    AddressMap, ChannelParams, Ctx, Issued, LdStParams, LdStUnit, LinkInterface, LinkParams,
    LinkReport, MemChannel, MemRequest, MemStats, Response, Unit, UnitIds,
};
use tessera_partitions::packet::{Net, Packet};
use tessera_partitions::Picos;

/// A packet in flight: `(arrive_at, src, seq, dst, packet)`.
type InFlight = (Picos, u32, u64, u32, PacketKey);

/// The packets in flight, consumed in `(arrive_at, src, seq)` order.
struct Queue {
    heap: BinaryHeap<Reverse<InFlight>>,
    seq: Vec<u64>,
    /// The connections' latencies, added to each packet's departure.
    wiring: Wiring,
}

/// [`Packet`] as an orderable key (its inline words).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct PacketKey([u64; 3]);

impl Net for Queue {
    fn wiring(&self) -> &Wiring {
        &self.wiring
    }

    fn deliver(&mut self, src: u32, dst: u32, arrive_at: Picos, pkt: Packet) {
        let s = src as usize;
        if self.seq.len() <= s {
            self.seq.resize(s + 1, 0);
        }
        let seq = self.seq[s];
        self.seq[s] += 1;
        let tessera_interconnect::Payload::Words3(w) = pkt.to_payload() else {
            return;
        };
        self.heap
            .push(Reverse((arrive_at, src, seq, dst, PacketKey(w))));
    }
}

/// The memory units of one GPU (an [`LdStUnit`] per SM, a [`MemChannel`] per DRAM channel,
/// a [`LinkInterface`] per chiplet when there are several) and the packets between them.
/// SMs and channels are numbered across the package.
pub struct MemSystem {
    /// The unit numbering (the address map's).
    ids: UnitIds,
    sms: Vec<LdStUnit>,
    channels: Vec<MemChannel>,
    links: Vec<LinkInterface>,
    queue: Queue,
    next_token: u32,
    /// Completions not yet asked for: `(token, time)`.
    done: Vec<(u32, Picos)>,
    /// The time of the latest packet delivered or request issued.
    now: Picos,
}

impl MemSystem {
    pub fn new(cfg: &GpuConfig) -> MemSystem {
        MemSystem::with_commands(cfg, &[])
    }

    /// [`MemSystem::new`] for a trace's command list: with `system.gpus` > 1 its `Alloc`
    /// commands place pages on GPUs (`GpuHomes`), so SMs of one GPU can reach another's
    /// memory (every SM and channel of the system is here, numbered across it).
    pub fn with_commands(cfg: &GpuConfig, commands: &[tessera_traces::Command]) -> MemSystem {
        let map = Arc::new(AddressMap::with_commands(cfg, commands));
        let ldst = LdStParams::from_config(cfg);
        let channel = ChannelParams::from_config(cfg);
        let link = Arc::new(LinkParams::from_config(cfg));
        let ids = *map.ids();
        let wiring = Wiring::from_config(cfg);
        MemSystem {
            sms: (0..ids.total_sms())
                .map(|s| LdStUnit::new(&ldst, map.clone(), s, &wiring))
                .collect(),
            channels: (0..ids.total_channels())
                .map(|c| MemChannel::new(&channel, map.clone(), c, &wiring))
                .collect(),
            links: if ids.chiplets > 1 {
                (0..ids.chiplets)
                    .map(|k| LinkInterface::new(link.clone(), map.clone(), k, &wiring))
                    .collect()
            } else {
                Vec::new()
            },
            ids,
            queue: Queue {
                heap: BinaryHeap::new(),
                seq: Vec::new(),
                wiring,
            },
            next_token: 0,
            done: Vec::new(),
            now: 0,
        }
    }

    /// Issues `req` from SM `sm` at `now` (no earlier than anything already simulated);
    /// returns its token and, when known at once, its completion.
    pub fn issue(&mut self, now: Picos, sm: u32, req: &MemRequest<'_>) -> (u32, Option<Picos>) {
        self.deliver_until(now);
        let now = now.max(self.now);
        self.now = now;
        let token = self.next_token;
        self.next_token += 1;
        let s = (sm % self.ids.total_sms()) as usize;
        match self.sms[s].issue(now, req, token, &mut self.queue) {
            Issued::Done(t) => (token, Some(t)),
            Issued::Pending => (token, None),
        }
    }

    /// Performs `req` issued by SM `sm` at `now`: delivers packets in order until its result
    /// is written, and returns that time (loads, atomics), or for stores when their last
    /// acknowledgement is in (with `l2.write_acks`; else when their data has left the SM).
    pub fn access(&mut self, now: Picos, sm: u32, req: &MemRequest<'_>) -> Picos {
        let (token, t) = self.issue(now, sm, req);
        if let Some(t) = t {
            return t;
        }
        loop {
            if let Some(i) = self.done.iter().position(|&(k, _)| k == token) {
                return self.done.swap_remove(i).1;
            }
            if !self.deliver_one() {
                // Unreachable in a consistent model: every request is answered.
                return self.now;
            }
        }
    }

    /// Delivers every packet in flight; returns the completions `(token, time)` not yet
    /// returned by [`MemSystem::access`], in completion order of delivery.
    pub fn run(&mut self) -> Vec<(u32, Picos)> {
        while self.deliver_one() {}
        std::mem::take(&mut self.done)
    }

    fn deliver_until(&mut self, t: Picos) {
        while self.queue.heap.peek().is_some_and(|Reverse(x)| x.0 <= t) {
            self.deliver_one();
        }
    }

    /// Delivers the next packet; false when none is in flight.
    fn deliver_one(&mut self) -> bool {
        let Some(Reverse((at, src, _, dst, PacketKey(w)))) = self.queue.heap.pop() else {
            return false;
        };
        self.now = self.now.max(at);
        let Ok(pkt) = Packet::from_payload(&tessera_interconnect::Payload::Words3(w)) else {
            return true;
        };
        match self.ids.unit(dst) {
            Some(Unit::Sm(s)) => match pkt {
                Packet::Response(Response::Reply { sectors, tag, .. }) => {
                    let _ = self.sms[s as usize].on_reply(
                        at,
                        sectors,
                        tag,
                        &mut self.queue,
                        &mut self.done,
                    );
                }
                Packet::Response(Response::WriteAck { tag, .. }) => {
                    let _ = self.sms[s as usize].on_ack(at, tag, &mut self.done);
                }
                _ => {}
            },
            Some(Unit::Channel(c)) => {
                let _ = self.channels[c as usize].on_packet(at, src, pkt, &mut self.queue);
            }
            Some(Unit::Link(k)) => {
                let _ = self.links[k as usize].on_packet(at, src, pkt, &mut self.queue);
            }
            _ => {}
        }
        true
    }

    /// A host-to-device copy (the trace's `MemcpyHtoD`): with `memcpy.fills_l2`, the copied
    /// lines are left in L2.
    pub fn memcpy_to_device(&mut self, addr: u64, bytes: u64) {
        let now = self.now;
        for c in &mut self.channels {
            c.memcpy(now, addr, bytes);
        }
    }

    /// Kernel boundary: with `package.l2: private`, every chiplet's L2 is written back and
    /// invalidated first (the packets are in flight when this returns); then every SM's L1D
    /// is invalidated (dirty sectors written to L2). Every kernel runs in context 0.
    pub fn kernel_boundary(&mut self) {
        let now = self.now;
        for c in &mut self.channels {
            c.flush(now, Ctx::default(), &mut self.queue);
        }
        for s in &mut self.sms {
            s.new_kernel(now, Ctx::default(), &mut self.queue);
        }
    }

    /// The counters of every link direction (chiplet by chiplet).
    pub fn link_reports(&self) -> Vec<LinkReport> {
        self.links.iter().flat_map(|l| l.reports()).collect()
    }

    /// The counters summed over the units (SMs, then channels).
    pub fn stats(&self) -> MemStats {
        let mut m = MemStats::default();
        for s in &self.sms {
            m.add_ldst(&s.stats());
        }
        for c in &self.channels {
            m.add_channel(&c.stats());
        }
        m
    }
}
