//! The NoC crossbar of a chiplet (`noc.model: crossbar`; DESIGN.md section 5, issue 22
//! item 2): between the chiplet's SMs, DRAM channels (their L2 and LLC slices) and link
//! interface, two input-queued crossbars, one for requests and one for replies and write
//! acknowledgements (GPGPU-Sim's two subnetworks, so neither class can block the other),
//! each [`tessera_interconnect::Crossbar`]: every NoC cycle each free output grants one of
//! the inputs whose head packet is for it, round robin from a start that depends only on
//! the output and the cycle; a packet of `f` flits (`noc.bandwidth_bytes_per_cycle` bytes
//! each) holds its output `f` cycles; a packet behind a blocked head waits.
//!
//! Its ports: one per SM, per L2 slice (a channel unit has several), per LLC slice (a
//! private L2), and for the link interface as many as carry its links' bandwidth (the sum
//! over the chiplet's package links and its GPU-switch port, over one port's flit per NoC
//! cycle; a packet takes the one its line interleaves to): a port as wide as an SM's would
//! throttle a chiplet link several times wider. A packet from or to a channel unit uses
//! the port of the slice that sends or serves it (found from its line, as the unit finds
//! it).
//!
//! Every unit on the NoC sends through it: the net delivers a packet for another NoC unit
//! of the chiplet here (`gpu/wiring.rs`, [`crate::gpu::Wiring::hop`]),
//! `noc.latency_cycles / 2` cycles after it left (at least 1), and the crossbar sends it on
//! when granted, the rest of `noc.latency_cycles` (at least 1) to its destination
//! (assumed: the crossbar sits mid-way, [`crate::mem::NocParams::crossbar_ps`]). The serialization is its own:
//! a packet holds its input (the sender's injection) and its output (the receiver's
//! ejection) for its flits, and the units' NoC ports do not delay it again
//! (`NocParams::port`). It routes a packet as its sender did, by the packet's address and
//! destination fields (the sender's port alone does not say where it goes).
//!
//! Credits (`noc.input_buffer_flits` > 0): each SM holds credits for its input FIFO of
//! the request network, flits it spends when it sends a packet; the crossbar returns them,
//! a timed message back to the SM, when it grants the packet. A packet without credit
//! waits in the SM's L1 miss queue, and a full miss queue stops the SM issuing memory
//! instructions (`ldst.rs`, `sm/issue.rs`). Likewise each slice holds credits for its
//! input to the reply network (`l2.reply_queue_packets` > 0, one per packet), returned
//! when the crossbar grants the packet (`slice_out.rs`), and with several chiplets the
//! link interface for each of its inputs (per port and network, `noc.input_buffer_flits`
//! flits: a packet from a link waits in the link's receive buffer, its credit unpaid,
//! until its input has room; `link.rs`). A private L2 slice's requests to the LLC are
//! unbounded at its input (bounded by its MSHRs).
//!
//! The request network's outputs to the slices hold credits for the slices' request
//! queues (`l2.request_queue_packets` > 0), one per request: an output without one grants
//! nothing, and the slice returns it, a timed `Control::Credit` from its channel unit, when
//! it takes the request (`dram_channel.rs`). The other outputs (to SMs and the link
//! interface) hold none; with several chiplets and `package.link.noc_queue_packets` > 0 the
//! outputs to the link interface hold credits for its queue per port and network, which it
//! returns when a packet's last byte has left on its link (`link.rs`). The outputs to the
//! SMs hold none: an SM takes a reply as it arrives.

use std::sync::Arc;

use tessera_interconnect::{Crossbar, CrossbarSpec, CrossbarStats, IslipCrossbar};

use super::coalesce::Geometry;
use super::noc::NocArbiter;
use crate::gpu::wiring::Bandwidth;
use crate::gpu::Wiring;
use tessera_interconnect::Topology;

use super::address_map::AddressMap;
use super::{Packet, Request, Response, Unit};
use crate::gpu::control::Control;
use crate::packet::Net;
use crate::Picos;

/// What the crossbar unit of a chiplet counted: its request and its reply network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrossbarUnitStats {
    pub requests: CrossbarStats,
    pub replies: CrossbarStats,
}

/// A packet the crossbar cannot route.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("crossbar of chiplet {chiplet}: cannot route {pkt:?} from unit {src}")]
pub struct XbarError {
    pub chiplet: u32,
    pub src: u32,
    pub pkt: Packet,
}

/// The crossbar of one chiplet.
pub struct CrossbarUnit {
    map: Arc<AddressMap>,
    chiplet: u32,
    unit: u32,
    /// The chiplet's CP, whose id is one below its first SM's.
    base: u32,
    /// L2 slices per channel unit, and where the ports of slices, LLC slices and the link
    /// interface start.
    spc: u32,
    slice_ports: u32,
    llc_ports: u32,
    link_port: u32,
    /// The link interface's ports (from `link_port` on), and the line size that
    /// interleaves packets over them.
    link_ports: u32,
    line_bytes: u64,
    period_ps: Picos,
    flit_bytes: u64,
    sector_bytes: u64,
    requests: Network,
    replies: Network,
    /// The last cycle stepped.
    done: Option<u64>,
    granted: Vec<(u32, u32, Queued)>,
    /// SMs hold credits for their request inputs (`noc.input_buffer_flits` > 0), slices
    /// for their reply inputs (`l2.reply_queue_packets` > 0).
    credits: bool,
    reply_credits: bool,
    /// The link interface holds credits for its inputs (`noc.input_buffer_flits`, several
    /// chiplets).
    link_input_credits: bool,
}

/// One network: FIFO inputs or virtual output queues with iSLIP (`noc.arbiter`).
enum Network {
    Fifo(Crossbar<Queued>),
    Islip(IslipCrossbar<Queued>),
}

impl Network {
    fn new(spec: CrossbarSpec, arbiter: NocArbiter) -> Network {
        match arbiter {
            NocArbiter::Fifo => Network::Fifo(Crossbar::new(spec)),
            NocArbiter::Islip => Network::Islip(IslipCrossbar::new(spec)),
        }
    }

    fn stats(&self) -> &CrossbarStats {
        match self {
            Network::Fifo(x) => x.stats(),
            Network::Islip(x) => x.stats(),
        }
    }

    fn offer_at(&mut self, cycle: u64, i: u32, o: u32, flits: u32, q: Queued) {
        // The FIFOs hold what their senders' credits allow (an SM's), or are unbounded:
        // an offer is never refused.
        let _ = match self {
            Network::Fifo(x) => x.offer_at(cycle, i, o, flits, q),
            Network::Islip(x) => x.offer_at(cycle, i, o, flits, q),
        };
    }

    fn step(&mut self, cycle: u64, out: &mut Vec<(u32, u32, Queued)>) {
        match self {
            Network::Fifo(x) => x.step(cycle, out),
            Network::Islip(x) => x.step(cycle, out),
        }
    }

    fn set_output_credits(&mut self, o: u32, credits: u32) {
        match self {
            Network::Fifo(x) => x.set_output_credits(o, credits),
            Network::Islip(x) => x.set_output_credits(o, credits),
        }
    }

    fn return_credits(&mut self, o: u32, n: u32) {
        match self {
            Network::Fifo(x) => x.return_credits(o, n),
            Network::Islip(x) => x.return_credits(o, n),
        }
    }

    fn first_cycle_from(&self, cycle: u64) -> Option<u64> {
        match self {
            Network::Fifo(x) => x.first_cycle_from(cycle),
            Network::Islip(x) => x.first_cycle_from(cycle),
        }
    }
}

/// A packet at an input: from and to which unit, in how many flits.
#[derive(Clone, Copy, Debug)]
struct Queued {
    src: u32,
    dst: u32,
    flits: u32,
    pkt: Packet,
}

impl CrossbarUnit {
    /// The crossbar of chiplet `chiplet` with `arbiter`, L2 lines and sectors of `geom`,
    /// routing over the package `topology`; its ports' bandwidth, the credits of the SMs'
    /// inputs and of the slices' request queues, and the links its link interface drives,
    /// as `wiring` declares them.
    pub fn new(
        map: Arc<AddressMap>,
        chiplet: u32,
        arbiter: NocArbiter,
        geom: Geometry,
        topology: Topology,
        wiring: &Wiring,
    ) -> CrossbarUnit {
        let sector_bytes = geom.sector_bytes;
        let noc = wiring.noc_bandwidth();
        let request_queue = wiring.slice_queue_packets();
        let ids = map.ids;
        // A port per SM, per L2 slice, per LLC slice (private L2) and for the link
        // interface (several chiplets).
        let spc = map.slices_per_channel.d.max(1) as u32;
        let slice_ports = ids.sms;
        let llc_ports = slice_ports + ids.channels * spc;
        let link_port = llc_ports + if map.private { ids.channels } else { 0 };
        let link_ports = if ids.chiplets > 1 {
            link_ports(&map, topology, wiring, chiplet)
        } else {
            0
        };
        let ports = link_port + link_ports;
        let spec = CrossbarSpec {
            inputs: ports,
            outputs: ports,
            input_depth: u32::MAX,
        };
        let mut requests = Network::new(spec, arbiter);
        if request_queue > 0 {
            for port in slice_ports..link_port {
                requests.set_output_credits(port, request_queue);
            }
        }
        let mut replies = Network::new(spec, arbiter);
        let link_queue = wiring.link_queue_packets();
        if link_queue > 0 {
            for port in link_port..ports {
                requests.set_output_credits(port, link_queue);
                replies.set_output_credits(port, link_queue);
            }
        }
        CrossbarUnit {
            unit: ids.xbar(chiplet),
            base: ids.cp(chiplet),
            spc,
            slice_ports,
            llc_ports,
            link_port,
            link_ports,
            line_bytes: geom.line_bytes.max(1),
            chiplet,
            period_ps: tessera_interconnect::period_ps(noc.clock_hz).max(1),
            flit_bytes: noc.bytes_per_cycle.max(1),
            sector_bytes,
            requests,
            replies,
            done: None,
            granted: Vec::new(),
            credits: wiring.sm_input_flits() > 0,
            reply_credits: wiring.slice_reply_packets() > 0,
            link_input_credits: wiring.link_input_flits() > 0,
            map,
        }
    }

    pub fn unit(&self) -> u32 {
        self.unit
    }

    pub fn chiplet(&self) -> u32 {
        self.chiplet
    }

    pub fn stats(&self) -> CrossbarUnitStats {
        CrossbarUnitStats {
            requests: *self.requests.stats(),
            replies: *self.replies.stats(),
        }
    }

    /// Where `pkt` from unit `src` goes on this chiplet and by which output: the unit its
    /// sender meant (as the senders route, `ldst.rs`, `dram_channel.rs`, `link.rs`), or the
    /// link interface for a unit of another chiplet; a request to a channel unit leaves by
    /// the port of the slice that serves it (with a private L2, atomics and requests from
    /// a slice or the link by the LLC slice's), an answer to a channel unit by the port of
    /// the private slice it fills. The line's home is looked up once.
    fn route(&self, src: u32, pkt: &Packet) -> Option<(u32, u32)> {
        let ids = &self.map.ids;
        let here = self.chiplet;
        let link = || (ids.link(here), self.link_port_of(pkt));
        Some(match *pkt {
            Packet::Request(r) => {
                let line = r.line();
                let from_sm = matches!(ids.unit(src), Some(Unit::Sm(_)));
                match r {
                    Request::Read { .. } | Request::Write { .. } if self.map.private && from_sm => {
                        let (ch, slice, _) = self.map.private_slot(here, line);
                        let u = ids.channel(ch);
                        (u, self.slice_port(u, slice))
                    }
                    Request::LlcRead { .. } | Request::LlcWrite { .. } => {
                        let u = ids.channel(self.map.llc_home(line).0);
                        if ids.chiplet_of(u) != here {
                            link()
                        } else {
                            (u, self.llc_port(u))
                        }
                    }
                    _ => {
                        let (ch, slice, _) = self.map.l2_home(line);
                        let u = ids.channel(ch);
                        if ids.chiplet_of(u) != here {
                            link()
                        } else if self.map.private {
                            (u, self.llc_port(u))
                        } else {
                            (u, self.slice_port(u, slice))
                        }
                    }
                }
            }
            Packet::Response(r) => {
                let (Response::Reply { sm: u, .. }
                | Response::WriteAck { sm: u, .. }
                | Response::Value { sm: u, .. }
                | Response::LlcReply { unit: u, .. }) = r;
                if ids.chiplet_of(u) != here {
                    return Some(link());
                }
                match ids.unit(u) {
                    Some(Unit::Sm(_)) => (u, u.saturating_sub(self.base + 1)),
                    Some(Unit::Channel(_)) => match self.slice_of(u, r.line()) {
                        Some(s) => (u, self.slice_port(u, s)),
                        None => (u, self.llc_port(u)),
                    },
                    _ => return None,
                }
            }
            Packet::Control(_) => return None,
        })
    }

    /// The port of L2 slice `slice` of channel unit `unit` of this chiplet.
    fn slice_port(&self, unit: u32, slice: usize) -> u32 {
        let c = unit.saturating_sub(self.base + 1 + self.map.ids.sms);
        self.slice_ports + c * self.spc + (slice as u32).min(self.spc - 1)
    }

    /// The port of the LLC slice of channel unit `unit` of this chiplet.
    fn llc_port(&self, unit: u32) -> u32 {
        let c = unit.saturating_sub(self.base + 1 + self.map.ids.sms);
        self.llc_ports + c
    }

    /// The slice of channel unit `unit` whose port a packet about `line` uses
    /// ([`AddressMap::noc_slice`]).
    fn slice_of(&self, unit: u32, line: u64) -> Option<usize> {
        self.map.noc_slice(self.chiplet, unit, line)
    }

    /// The port `pkt` enters by from unit `src`: an SM's, the link interface's, or the
    /// slice's of a channel unit that sent it (an LLC reply: the LLC slice's; an answer
    /// with a private L2: the slice that caches the line, or the LLC slice for an atomic's).
    fn in_port(&self, src: u32, pkt: &Packet) -> u32 {
        match self.map.ids.unit(src) {
            Some(Unit::Sm(_)) => src.saturating_sub(self.base + 1),
            Some(Unit::Channel(_)) => match *pkt {
                Packet::Response(Response::LlcReply { .. }) => self.llc_port(src),
                Packet::Request(r) => match self.slice_of(src, r.line()) {
                    Some(s) => self.slice_port(src, s),
                    None => self.llc_port(src),
                },
                Packet::Response(r) => match self.slice_of(src, r.line()) {
                    Some(s) => self.slice_port(src, s),
                    None => self.llc_port(src),
                },
                Packet::Control(_) => self.llc_port(src),
            },
            _ => self.link_port_of(pkt),
        }
    }

    /// The link interface's port for `pkt`: by its line, interleaved.
    fn link_port_of(&self, pkt: &Packet) -> u32 {
        self.link_port + link_port_offset(pkt, self.line_bytes, self.link_ports)
    }

    /// A packet from unit `src` arrives at `now`: it joins the FIFO of its sender's input.
    pub fn on_packet(&mut self, now: Picos, src: u32, pkt: Packet) -> Result<(), XbarError> {
        let err = || XbarError {
            chiplet: self.chiplet,
            src,
            pkt,
        };
        if let Packet::Control(Control::Credit { link, vc, bytes }) = pkt {
            if src == self.map.ids.link(self.chiplet) && vc < self.link_ports {
                // The link interface's queue passed a packet on (`link`: the network,
                // `vc`: the port).
                let net = match link {
                    0 => &mut self.requests,
                    _ => &mut self.replies,
                };
                net.return_credits(self.link_port + vc, bytes);
                return Ok(());
            }
            // A slice's request queue passed requests on: its output's credits come back.
            if !matches!(self.map.ids.unit(src), Some(Unit::Channel(_)))
                || self.map.ids.chiplet_of(src) != self.chiplet
            {
                return Err(err());
            }
            let port = match link {
                0 => self.slice_port(src, vc as usize),
                _ => self.llc_port(src),
            };
            self.requests.return_credits(port, bytes);
            return Ok(());
        }
        if self.map.ids.chiplet_of(src) != self.chiplet {
            return Err(err());
        }
        let (dst, o) = self.route(src, &pkt).ok_or_else(err)?;
        let flits = pkt.wire_bytes(self.sector_bytes).div_ceil(self.flit_bytes);
        let flits = u32::try_from(flits).unwrap_or(u32::MAX);
        let i = self.in_port(src, &pkt);
        let cycle = now.div_ceil(self.period_ps);
        let net = match pkt {
            Packet::Request(_) => &mut self.requests,
            _ => &mut self.replies,
        };
        let q = Queued {
            src,
            dst,
            flits,
            pkt,
        };
        net.offer_at(cycle, i, o, flits, q);
        Ok(())
    }

    /// Runs the crossbar at `now`: at a NoC cycle's start not stepped yet, grants and sends
    /// what it can.
    pub fn run(&mut self, now: Picos, net: &mut dyn Net) {
        if !now.is_multiple_of(self.period_ps) {
            return;
        }
        let cycle = now / self.period_ps;
        if self.done.is_some_and(|d| cycle <= d) {
            return;
        }
        self.done = Some(cycle);
        let mut g = std::mem::take(&mut self.granted);
        let ids = self.map.ids;
        for (k, x) in [&mut self.requests, &mut self.replies]
            .into_iter()
            .enumerate()
        {
            g.clear();
            x.step(cycle, &mut g);
            for &(i, _, q) in &g {
                net.send(self.unit, q.dst, now, q.pkt);
                // The packet has left its input: an SM's credits come back, or a slice's
                // (`link` 0 an L2 slice's, `vc` which; 1 the LLC slice's).
                let c = if k == 0 && self.credits && matches!(ids.unit(q.src), Some(Unit::Sm(_))) {
                    Control::Credit {
                        link: 0,
                        vc: 0,
                        bytes: q.flits,
                    }
                } else if self.link_input_credits && i >= self.link_port {
                    // The link interface's input of this network (`vc`: network and port).
                    Control::Credit {
                        link: 0,
                        vc: k as u32 * self.link_ports + (i - self.link_port),
                        bytes: q.flits,
                    }
                } else if k == 1
                    && self.reply_credits
                    && (self.slice_ports..self.link_port).contains(&i)
                {
                    let (link, vc) = if i < self.llc_ports {
                        (0, (i - self.slice_ports) % self.spc)
                    } else {
                        (1, 0)
                    };
                    Control::Credit { link, vc, bytes: 1 }
                } else {
                    continue;
                };
                net.send(self.unit, q.src, now, c.into());
            }
        }
        self.granted = g;
    }

    /// When it next has something to do at or after `now`: the start of the first NoC cycle
    /// not stepped yet in which a head packet finds its output free.
    pub fn next_event(&self, now: Picos) -> Option<Picos> {
        let mut from = now.div_ceil(self.period_ps);
        if let Some(d) = self.done {
            from = from.max(d + 1);
        }
        let c = match (
            self.requests.first_cycle_from(from),
            self.replies.first_cycle_from(from),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }?;
        Some(c * self.period_ps)
    }
}

/// Which of the link interface's `ports` crossbar ports `pkt` takes: lines of
/// `line_bytes` interleave over them (a control packet takes the first).
pub(crate) fn link_port_offset(pkt: &Packet, line_bytes: u64, ports: u32) -> u32 {
    let line = match pkt {
        Packet::Request(r) => r.line(),
        Packet::Response(r) => r.line(),
        Packet::Control(_) => 0,
    };
    ((line / line_bytes.max(1)) % ports.max(1) as u64) as u32
}

/// The ports the link interface of chiplet `chiplet` needs on the crossbar: its links'
/// bandwidth (each package link it sends on, and its port to the GPU switch in a system
/// of several GPUs) over one port's, a flit per NoC cycle, rounded up.
pub(crate) fn link_ports(
    map: &AddressMap,
    topology: Topology,
    wiring: &Wiring,
    chiplet: u32,
) -> u32 {
    let ids = &map.ids;
    let n = ids.gpu_chiplets.max(1);
    let here = Some(chiplet % n);
    // The package links it sends on, as the link interface builds them (`link.rs`).
    let links = topology
        .links(n)
        .into_iter()
        .filter(|&(from, _)| from == here)
        .count() as u128;
    let per_s = |b: Bandwidth| b.bytes_per_cycle as u128 * b.clock_hz as u128;
    let mut bytes_per_s = links * per_s(wiring.link_bandwidth());
    if ids.chiplets > n {
        bytes_per_s += per_s(wiring.gpu_link_bandwidth());
    }
    let port = per_s(wiring.noc_bandwidth()).max(1);
    bytes_per_s.div_ceil(port).clamp(1, 1024) as u32
}
