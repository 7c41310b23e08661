//! The link interface of a chiplet: where memory packets leave for, and arrive from, the
//! other chiplets of the package (DESIGN.md section 5; the inter-chiplet link model is
//! [`tessera_interconnect::ChipletLink`]).
//!
//! An SM whose line is homed on another chiplet sends its request over its own chiplet's
//! NoC to this unit instead of to an L2 slice; a channel answering an SM of another chiplet
//! does the same with the reply. The interface routes each packet by its destination
//! chiplet (the line's home for requests, the SM's chiplet for replies) along the
//! topology's minimal route ([`tessera_interconnect::Topology::next_hop`]): onto the
//! egress link toward the next chiplet (serialization at the link bandwidth, in order, plus
//! `package.link.packet_overhead_bytes`; the packet is at the next interface
//! `package.link.latency_ps` after its last byte left), or, at the destination, across the
//! NoC (`noc.latency_cycles`) to the L2 slice or SM. The interface has no NoC port of its
//! own: the link is the narrow resource it models.
//!
//! With `package.l2: private`, the interface carries the private L2 slices' LLC requests
//! and write-backs to the line's home chiplet and the LLC's replies back to the requesting
//! channel unit in the same way.
//!
//! The interface models each link's serialization (its [`ChipletLink`]s have no latency of
//! their own): a packet departs when its last byte has left, and the net adds the
//! connection's latency (`package.link.latency_ps`, `system.gpu_link.latency_ps`, the NoC's
//! to the chiplet's units), declared once in `gpu/wiring.rs`; the switches' ports down to
//! its chiplet are its named ports [`crate::gpu::Port::SwitchDown`] and
//! [`crate::gpu::Port::GpuSwitchDown`].
//!
//! Credits (`mem/credits.rs`): each link the interface sends on toward another chiplet or
//! a switch, and its port up to the GPU switch, holds credits for the input buffer at the
//! far end (`package.link.buffer_bytes`, `system.gpu_link.buffer_bytes`, per virtual
//! channel: the packet's class and the package links it still has to cross). A packet
//! without credit waits in the interface, behind the packets of its channel; the far end
//! returns the credit as a timed message over the reverse connection when the packet leaves
//! its buffer (on to the NoC when its crossbar input has room, at once without the
//! crossbar's credits: `noc.input_buffer_flits` per port and network, credits the
//! interface holds and the crossbar returns as it grants; or when its last byte has left
//! on the next link or down the switch's port). The waits are the links' "no credit" stall
//! (`links[].credit_waits` in the stats).
//!
//! Packets cross it unchanged, their context ([`crate::packet::Packet::ctx`]) included, so
//! a link's traffic can be attributed to the kernel it serves.
//!
//! With `topology: switch`, the switch's port down to a chiplet is modelled at that
//! chiplet's interface: a packet from the switch first waits for that port (serialization
//! and latency again), then goes on. A remote load therefore costs, over a local one,
//! exactly two NoC traversals, two link latencies and the serialization of the request and
//! of the reply (times two hops through a switch), plus any queueing.
//!
//! With `system.gpus` > 1 the interface is also the chiplet's port to the GPU switch
//! (`system.gpu_link`, each chiplet's port with `1 / chiplets` of its GPU's bandwidth): a
//! packet for a chiplet of another GPU (a peer access, or its reply) leaves on the port up
//! to the switch directly, whatever the package topology, and arrives at the destination
//! chiplet's interface, which models the switch's port down to it (serialization and
//! latency again) before routing it on as a local packet. A peer load therefore costs,
//! over a local one, two NoC traversals plus, each way, two GPU-link latencies and two
//! serializations of the packet (plus any queueing).

use std::sync::Arc;

use tessera_interconnect::{ChipletLink, LinkSpec, LinkStats, Topology};

use super::address_map::AddressMap;
use super::coalesce::Geometry;
use super::credits::{CreditStats, Credits};
use super::{Ctx, Net, Packet, Request, Response, Unit};
use crate::config::{config_enum, section, GpuConfig, GpuLinkTopology, Kind, CLOCK_RANGE, MAX_PS};
use crate::gpu::control::Control;
use crate::gpu::Port;
use crate::observe::{LinkPacket, Observer, Probe};
use crate::packet::largest_packet_bytes;
use crate::per_kernel::KernelTally;
use crate::Picos;

config_enum! {
    /// How the chiplets of a package are wired (interconnect crate, `Topology`).
    pub enum LinkTopology {
        /// A link between every pair of chiplets.
        FullyConnected = "fully_connected",
        /// Chiplet `i` linked to `i - 1` and `i + 1` (mod chiplets); shortest way round.
        Ring = "ring",
        /// A grid `package.mesh_cols` wide; X first, then Y.
        Mesh2d = "mesh2d",
        /// Every chiplet linked to one switch (a crossbar): two link traversals between any
        /// two chiplets, the switch's port to each chiplet serializing what goes down to it.
        Switch = "switch",
    }
}

section! {
    /// One direction of an inter-chiplet link: the sending chiplet's link interface
    /// serializes packets (header and data sectors plus `packet_overhead_bytes`) at
    /// `bandwidth_bytes_per_cycle` of `clock_hz`, in order, and the receiving interface has
    /// a packet `latency_ps` after its last byte left (store and forward: the receiver
    /// checks a whole packet before routing it on). Packets then cross the receiving
    /// chiplet's NoC (`noc.latency_cycles`) to the L2 slice or SM. The least link latency
    /// is the lookahead of a cut between chiplets (DESIGN.md section 4).
    pub struct LinkConfig {
        /// Link clock. Presets: the core clock (the bandwidth is given per core cycle).
        clock_hz: u64 = Kind::U64, unit "Hz", Some("1000000000"), range CLOCK_RANGE;
        /// Bytes per link cycle, one direction. Presets: the package's per-chiplet link
        /// bandwidth divided by the clock (each preset shows its arithmetic).
        bandwidth_bytes_per_cycle: u32 = Kind::U32, unit "bytes per link cycle", Some("64"), range (1, 65_536);
        /// From the last byte leaving the sender to the packet at the receiving interface.
        /// At least 1 ps (it bounds the lookahead). Presets: cited per preset.
        latency_ps: u64 = Kind::U64, unit "ps", Some("20000"), range (1, MAX_PS);
        /// Bytes added to every packet on the link (framing, CRC). Presets: 8, one flit
        /// header (assumed).
        packet_overhead_bytes: u32 = Kind::U32, unit "bytes", Some("8"), range (0, 4096);
        /// The receiving end's input buffer, bytes per virtual channel (requests and
        /// responses, and each distance still to go, have their own, so none can block
        /// another and multi-hop routes cannot deadlock). The sender holds as many bytes of
        /// credit per channel, spends a packet's wire bytes when it sends it and waits
        /// without them; the receiver returns them as a timed message over the link when the
        /// packet leaves its buffer. 0: bandwidth x round trip (twice `latency_ps` plus the
        /// serialization of the largest packet), rounded up, plus one largest packet, so
        /// credits never throttle a link that nothing downstream holds up. Else at least
        /// the largest packet (an 8 B header, an L2 line and the overhead). Presets: 0 (no
        /// study in the references gives the buffers).
        buffer_bytes: u64 = Kind::U64, unit "bytes", Some("0"), range (0, 1_099_511_627_776);
        /// With `noc.model: crossbar` and several chiplets, the link interface's queue for
        /// packets from its chiplet's crossbar, in packets, per crossbar port of the
        /// interface and per network (requests, replies): the crossbar's output to the
        /// port holds as many credits, spends one per packet it grants, and the interface
        /// returns it, a timed message, when the packet's last byte has left on its link (a
        /// packet waiting for link credit keeps its place). 0: unbounded. Presets: 1,024
        /// (stated, not sourced: no study in the references gives the interface's buffers;
        /// at 64 and 512 a saturated remote stream on `a100-4chiplet.yaml` loses 6 and 2
        /// points of its links' bandwidth, its requests waiting for the far end's credits
        /// through the switch; from 1,024 it keeps what it has unbounded; development log,
        /// 2026-12-07).
        noc_queue_packets: u32 = Kind::U32, unit "packets", Some("1024"), range (0, 1_000_000);
    }
}

/// The counters of one direction of a link, for the stats (`from`/`to`: chiplets, `None`
/// for the switch; `gpu_link`: a port of the GPU fabric, `system.gpu_link`, where `None` is
/// the GPU switch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkReport {
    pub from: Option<u32>,
    pub to: Option<u32>,
    pub gpu_link: bool,
    /// The ends as the stats name them: `chiplet3` and `switch` (one GPU), `gpu2.switch`
    /// for a GPU's package switch (several GPUs), `gpu2` (or `gpu2.chiplet5` with several
    /// chiplets per GPU) and `nvswitch` or `pcie_host` for the GPU fabric.
    pub names: (String, String),
    pub stats: LinkStats,
    /// Picoseconds spent transmitting.
    pub busy_ps: Picos,
    /// Its credits (all zero for a switch's port down to a chiplet, which has none).
    pub credits: CreditStats,
    /// The receive buffer per virtual channel (0: no credits).
    pub buffer_bytes: u64,
}

/// A packet the interface cannot route.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("link interface of chiplet {chiplet}: cannot route {pkt:?}")]
pub struct RouteError {
    pub chiplet: u32,
    pub pkt: Packet,
}

/// The parameters of a chiplet's link interface (`package.topology`, `package.link`,
/// `system.gpu_link`), as the interconnect's links take them.
#[derive(Clone, Debug)]
pub struct LinkParams {
    pub(crate) topology: Topology,
    /// One direction of each inter-chiplet link.
    pub(crate) link: LinkSpec,
    /// One direction of a chiplet's port to the GPU switch: the GPU's bandwidth split
    /// evenly over its chiplets' ports.
    pub(crate) gpu_link: LinkSpec,
    /// The GPU switch's name in the stats.
    pub(crate) gpu_switch: &'static str,
    /// `l2.sector_bytes`, the data unit of a packet's size on the wire.
    pub(crate) sector_bytes: u64,
    /// `package.link.buffer_bytes` and `system.gpu_link.buffer_bytes`, a default of 0
    /// resolved ([`buffer_bytes`]). These, `link` and `gpu_link` are read by the wiring
    /// alone (`gpu/wiring.rs`), which declares the links; the link interfaces and the
    /// crossbars take them from there.
    pub(crate) link_buffer: u64,
    pub(crate) gpu_link_buffer: u64,
    /// `package.link.noc_queue_packets` (read by the wiring) and the L2 line, which
    /// interleaves packets over the interface's crossbar ports.
    pub(crate) noc_queue: u32,
    pub(crate) line_bytes: u64,
}

/// The receive buffer per virtual channel of a link of `spec` carrying lines of
/// `line_bytes`: `configured`, or for 0 the bandwidth x round trip (twice the latency plus
/// the largest packet's serialization), rounded up, plus one largest packet.
pub(crate) fn buffer_bytes(configured: u64, spec: &LinkSpec, line_bytes: u64) -> u64 {
    if configured > 0 {
        return configured;
    }
    const PS_PER_S: u128 = 1_000_000_000_000;
    let largest = (largest_packet_bytes(line_bytes) + spec.packet_overhead_bytes) as u128;
    let per_s = spec.bandwidth_bytes_per_cycle.max(1) as u128 * spec.clock_hz.max(1) as u128;
    let ser_ps = (largest * PS_PER_S).div_ceil(per_s);
    let round_trip_ps = 2 * spec.latency_ps as u128 + ser_ps;
    let bytes = (round_trip_ps * per_s).div_ceil(PS_PER_S) + largest;
    u64::try_from(bytes).unwrap_or(u64::MAX)
}

impl LinkParams {
    pub fn from_config(cfg: &GpuConfig) -> LinkParams {
        let l = &cfg.package.link;
        let g = &cfg.system.gpu_link;
        let mut p = LinkParams {
            topology: match cfg.package.topology {
                LinkTopology::FullyConnected => Topology::FullyConnected,
                LinkTopology::Ring => Topology::Ring,
                LinkTopology::Mesh2d => Topology::Mesh2D {
                    cols: cfg.package.mesh_cols,
                },
                LinkTopology::Switch => Topology::Switch,
            },
            link: LinkSpec {
                bandwidth_bytes_per_cycle: l.bandwidth_bytes_per_cycle as u64,
                clock_hz: l.clock_hz,
                latency_ps: l.latency_ps,
                packet_overhead_bytes: l.packet_overhead_bytes as u64,
            },
            gpu_link: LinkSpec {
                bandwidth_bytes_per_cycle: (g.bandwidth_bytes_per_cycle / cfg.chiplets.max(1))
                    .max(1) as u64,
                clock_hz: g.clock_hz,
                latency_ps: g.latency_ps,
                packet_overhead_bytes: g.packet_overhead_bytes as u64,
            },
            gpu_switch: match g.topology {
                GpuLinkTopology::Nvswitch => "nvswitch",
                GpuLinkTopology::PcieHost => "pcie_host",
            },
            sector_bytes: Geometry::new(cfg.l2.line_bytes, cfg.l2.sector_bytes).sector_bytes,
            link_buffer: 0,
            gpu_link_buffer: 0,
            noc_queue: l.noc_queue_packets,
            line_bytes: (cfg.l2.line_bytes as u64).max(1),
        };
        let line = cfg.l2.line_bytes as u64;
        p.link_buffer = buffer_bytes(l.buffer_bytes, &p.link, line);
        p.gpu_link_buffer = buffer_bytes(g.buffer_bytes, &p.gpu_link, line);
        p
    }
}

/// How a credit message names the sender's link: an egress link by the chiplet it leads
/// to (its index inside the GPU), or one of these.
const TO_SWITCH: u32 = u32::MAX - 1;
const GPU_UP: u32 = u32::MAX;

/// A sender's link that has credits: its package link `i` (of `egress`), or its port up to
/// the GPU switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Out {
    Egress(usize),
    GpuUp,
}

/// The credit a packet owes the link it arrived on, returned when it leaves this interface
/// (its last byte sent on, or handed to the NoC).
#[derive(Clone, Copy, Debug)]
struct Owed {
    unit: u32,
    link: u32,
    vc: u32,
    bytes: u32,
}

/// A packet bound for one of the interface's links with credits.
#[derive(Debug)]
struct Held {
    pkt: Packet,
    /// Its payload bytes.
    bytes: u64,
    /// The next unit: the interface at the other end (or the destination's, through a
    /// switch).
    hop: u32,
    owed: Option<Owed>,
}

/// The link interface of one chiplet: the sending side of each of its links (and, behind a
/// switch, the switch's port down to it), and with several GPUs its port to the GPU switch
/// and the switch's port down to it.
///
/// Credits (`mem/credits.rs`): the links it sends on toward another chiplet or a switch, and
/// its port up to the GPU switch, hold credits for the buffer at their other end, one per
/// virtual channel: the packet's class (request or response) and how many package links it
/// still has to cross after this one, which only falls along a route, so the buffers'
/// waits cannot form a cycle (distance classes, Dally and Towles, "Principles and
/// Practices of Interconnection Networks", section 14.2). A packet leaves a buffer when its
/// last byte has left on the next link, or at once when it goes on over the NoC (which has
/// no credits). The switches' ports down to a chiplet deliver into its interface, which
/// forwards everything at once: they carry none.
pub struct LinkInterface {
    params: Arc<LinkParams>,
    map: Arc<AddressMap>,
    chiplet: u32,
    unit: u32,
    topology: Topology,
    /// Egress links by the next hop they lead to, chiplets numbered inside the GPU
    /// (`None`: the switch), each with its credits.
    egress: Vec<(Option<u32>, ChipletLink)>,
    egress_credits: Vec<Credits<Held>>,
    /// The switch's port down to this chiplet (`topology: switch` only).
    from_switch: Option<ChipletLink>,
    /// The port up to the GPU switch, with its credits, and the switch's port down to this
    /// chiplet (`system.gpus` > 1 only).
    gpu_up: Option<ChipletLink>,
    gpu_up_credits: Option<Credits<Held>>,
    gpu_down: Option<ChipletLink>,
    /// The GPU switch's name in the stats.
    gpu_switch: &'static str,
    /// Its observer, if any.
    probe: Option<Probe>,
    /// Packets and bytes it sent on its links, by the kernel they serve.
    tally: KernelTally,
    /// Packets a credit lets go (scratch).
    go: Vec<Held>,
    /// Each packet's bytes on a package link and on the GPU fabric beyond its payload, and
    /// the far ends' buffers per virtual channel (`gpu/wiring.rs` declares them).
    link_overhead: u64,
    gpu_link_overhead: u64,
    link_buffer: u64,
    gpu_link_buffer: u64,
    /// With a bounded queue from the crossbar (`package.link.noc_queue_packets`): the
    /// crossbar's unit and the interface's ports on it, whose credits a packet from it
    /// owes.
    xbar_queue: Option<(u32, u32)>,
    /// With the crossbar on several chiplets: the credits of its inputs to the crossbar,
    /// in flits, one virtual channel per network and port (`network * ports + port`;
    /// `noc.input_buffer_flits`), the crossbar's unit, its ports and the NoC's flit.
    noc_in: Option<NocInputs>,
}

/// The credits of a link interface's crossbar inputs: a packet that arrived for this
/// chiplet leaves the link's receive buffer (and pays the link its credit) only when its
/// input has room; the crossbar returns the flits when it grants the packet.
struct NocInputs {
    credits: Credits<Held>,
    xbar: u32,
    ports: u32,
    flit_bytes: u64,
}

impl LinkInterface {
    /// The link interface of chiplet `chiplet`: its links and their far ends' buffers as
    /// `wiring` declares them, routed over `params.topology`.
    pub fn new(
        params: Arc<LinkParams>,
        map: Arc<AddressMap>,
        chiplet: u32,
        wiring: &crate::gpu::Wiring,
    ) -> LinkInterface {
        let topology = params.topology;
        let (link, link_buffer) = wiring.link_spec();
        let (gpu_link, gpu_link_buffer) = wiring.gpu_link_spec();
        let n = map.ids.gpu_chiplets;
        let local = chiplet % n;
        // Serialization only: a link's latency is its connection's (`gpu/wiring.rs`), added
        // by the net from the end of the transmission.
        let ls = LinkSpec {
            latency_ps: 0,
            ..link
        };
        let egress: Vec<_> = if n > 1 {
            topology
                .links(n)
                .into_iter()
                .filter(|&(from, _)| from == Some(local))
                .map(|(_, to)| (to, ChipletLink::new(ls)))
                .collect()
        } else {
            Vec::new()
        };
        let gpus = map.ids.gpus() > 1;
        // Its ports on the crossbar, whose queues and inputs may hold credits.
        let xbar = map.ids.xbar(chiplet);
        let xbar_ports = super::crossbar::link_ports(&map, topology, wiring, chiplet);
        let gs = LinkSpec {
            latency_ps: 0,
            ..gpu_link
        };
        LinkInterface {
            unit: map.ids.link(chiplet),
            gpu_switch: params.gpu_switch,
            egress_credits: egress.iter().map(|_| Credits::new(link_buffer)).collect(),
            egress,
            from_switch: (n > 1 && topology == Topology::Switch).then(|| ChipletLink::new(ls)),
            topology,
            gpu_up: gpus.then(|| ChipletLink::new(gs)),
            gpu_up_credits: gpus.then(|| Credits::new(gpu_link_buffer)),
            gpu_down: gpus.then(|| ChipletLink::new(gs)),
            probe: None,
            tally: KernelTally::default(),
            go: Vec::new(),
            link_overhead: link.packet_overhead_bytes,
            gpu_link_overhead: gpu_link.packet_overhead_bytes,
            link_buffer,
            gpu_link_buffer,
            xbar_queue: (wiring.link_queue_packets() > 0).then_some((xbar, xbar_ports)),
            noc_in: (wiring.link_input_flits() > 0).then(|| NocInputs {
                credits: Credits::new(wiring.link_input_flits()),
                xbar,
                ports: xbar_ports,
                flit_bytes: wiring.noc_bandwidth().bytes_per_cycle.max(1),
            }),
            params,
            map,
            chiplet,
        }
    }

    /// Counts a packet of `ctx` (`None`: control) of `bytes` sent on one of its links.
    fn count(&mut self, ctx: Option<Ctx>, bytes: u64) {
        let t = self.tally.of(ctx);
        t.link_packets += 1;
        t.link_bytes += bytes;
    }

    /// What it sent on its links, by kernel.
    pub fn per_kernel(&self) -> &KernelTally {
        &self.tally
    }

    /// Its unit id.
    pub fn unit(&self) -> u32 {
        self.unit
    }

    /// Reports the packets it sends on its links to `obs` from now on.
    pub fn observe(&mut self, obs: Arc<dyn Observer>) {
        self.probe = Some(Probe::new(self.unit, obs));
    }

    /// Tells the observer, if any, of a packet of `bytes` sent at `now` on its link `link`
    /// (report order) towards `next_unit`: `sent` is the link's answer (the end of the
    /// transmission, its start and its end), the connection adding `latency`.
    fn observed(
        &self,
        now: Picos,
        sent: (Picos, Picos, Picos),
        latency: Picos,
        bytes: u64,
        next_unit: u32,
        link: usize,
    ) {
        if let Some(p) = &self.probe {
            let e = LinkPacket {
                sent_at: now,
                arrive_at: sent.2 + latency,
                bytes,
                next_unit,
                link: link as u32,
                tx_start: sent.1,
                tx_end: sent.2,
            };
            p.obs.link_packet(p.unit, &e);
        }
    }

    /// Its chiplet.
    pub fn chiplet(&self) -> u32 {
        self.chiplet
    }

    /// The chiplet a packet is going to, and the unit there: the home channel of a
    /// request's line, the SM of a reply or write acknowledgement (control messages do not cross links).
    fn destination(&self, pkt: &Packet) -> Option<(u32, u32)> {
        let ids = &self.map.ids;
        match *pkt {
            Packet::Request(
                Request::Read { line, .. }
                | Request::Write { line, .. }
                | Request::Atomic { line, .. }
                | Request::Sync { addr: line, .. },
            ) => {
                let channel = self.map.l2_home(line).0;
                Some((ids.chiplet_of_channel(channel), ids.channel(channel)))
            }
            // Private L2 <-> home LLC (`package.l2: private`).
            Packet::Request(Request::LlcRead { line, .. } | Request::LlcWrite { line, .. }) => {
                let channel = self.map.llc_home(line).0;
                Some((ids.chiplet_of_channel(channel), ids.channel(channel)))
            }
            Packet::Response(
                Response::Reply { sm, .. }
                | Response::WriteAck { sm, .. }
                | Response::Value { sm, .. },
            ) => match ids.unit(sm) {
                Some(Unit::Sm(_)) => Some((ids.chiplet_of(sm), sm)),
                _ => None,
            },
            Packet::Response(Response::LlcReply { unit, .. }) => match ids.unit(unit) {
                Some(Unit::Channel(_)) => Some((ids.chiplet_of(unit), unit)),
                _ => None,
            },
            Packet::Control(_) => None,
        }
    }

    /// The virtual channel of `pkt` on a link whose far end is chiplet `at` (`None`: a
    /// switch) of this GPU, going to chiplet `dst` of it: its class, and the package links
    /// it still has to cross from there.
    fn vc(&self, pkt: &Packet, at: Option<u32>, dst: u32) -> u32 {
        let class = u32::from(matches!(pkt, Packet::Response(_)));
        let n = self.map.ids.gpu_chiplets;
        let base = self.map.ids.gpu_of_chiplet(dst) * n;
        let left = at.map_or(0, |a| self.topology.hops(n, a, dst - base));
        class + 2 * left
    }

    /// The credit a packet from unit `src` going to chiplet `dst` owes the link it came on,
    /// or the crossbar's output it came from (`None`: it came down a switch's port, or
    /// from a crossbar without credits, which have none).
    fn owed(&self, src: u32, pkt: &Packet, dst: u32) -> Option<Owed> {
        let ids = &self.map.ids;
        if let Some((xbar, ports)) = self.xbar_queue.filter(|&(x, _)| x == src) {
            // `link`: the network; `vc`: the interface's port on it.
            return Some(Owed {
                unit: xbar,
                link: u32::from(matches!(pkt, Packet::Response(_))),
                vc: super::crossbar::link_port_offset(pkt, self.params.line_bytes, ports),
                bytes: 1,
            });
        }
        let Some(Unit::Link(k)) = ids.unit(src) else {
            return None;
        };
        if k == self.chiplet {
            return None;
        }
        let bytes = pkt.wire_bytes(self.params.sector_bytes);
        let (link, overhead, vc) = if ids.gpu_of_chiplet(k) != ids.gpu_of_chiplet(self.chiplet) {
            (GPU_UP, self.gpu_link_overhead, self.vc(pkt, None, dst))
        } else if self.topology == Topology::Switch {
            (TO_SWITCH, self.link_overhead, self.vc(pkt, None, dst))
        } else {
            let here = self.chiplet % ids.gpu_chiplets;
            let vc = self.vc(pkt, Some(here), dst);
            (here, self.link_overhead, vc)
        };
        Some(Owed {
            unit: src,
            link,
            vc,
            bytes: u32::try_from(bytes + overhead).unwrap_or(u32::MAX),
        })
    }

    /// Returns `owed`, if any, when its packet leaves at `at`.
    fn pay(&self, owed: Option<Owed>, at: Picos, net: &mut dyn Net) {
        if let Some(o) = owed {
            let c = Control::Credit {
                link: o.link,
                vc: o.vc,
                bytes: o.bytes,
            };
            net.send(self.unit, o.unit, at, c.into());
        }
    }

    /// A packet from unit `src` arrives at `now`: routes it on (or, a credit, lets the
    /// packets waiting for it go).
    pub fn on_packet(
        &mut self,
        now: Picos,
        src: u32,
        pkt: Packet,
        net: &mut dyn Net,
    ) -> Result<(), RouteError> {
        let chiplet = self.chiplet;
        let err = || RouteError { chiplet, pkt };
        if let Packet::Control(Control::Credit { vc, bytes, .. }) = pkt {
            if let Some(n) = self.noc_in.as_mut().filter(|n| n.xbar == src) {
                // The crossbar granted packets from an input: what waited for room there
                // goes on, and leaves the link's receive buffer.
                let mut go = std::mem::take(&mut self.go);
                n.credits.credit(now, vc, bytes as u64, &mut go);
                for h in go.drain(..) {
                    net.send(self.unit, h.hop, now, h.pkt);
                    self.pay(h.owed, now, net);
                }
                self.go = go;
                return Ok(());
            }
        }
        if let Packet::Control(Control::Credit { link, vc, bytes }) = pkt {
            let out = match link {
                GPU_UP => Out::GpuUp,
                _ => {
                    let to = (link != TO_SWITCH).then_some(link);
                    let i = self.egress.iter().position(|(t, _)| *t == to);
                    Out::Egress(i.ok_or_else(err)?)
                }
            };
            let mut go = std::mem::take(&mut self.go);
            self.credits_mut(out)
                .ok_or_else(err)?
                .credit(now, vc, bytes as u64, &mut go);
            for h in go.drain(..) {
                self.transmit(now, out, h, net);
            }
            self.go = go;
            return Ok(());
        }
        let (dst, to) = self.destination(&pkt).ok_or_else(err)?;
        let ids = self.map.ids;
        let bytes = pkt.wire_bytes(self.params.sector_bytes);
        let gpu = ids.gpu_of_chiplet(self.chiplet);
        let owed = self.owed(src, &pkt, dst);
        match ids.unit(src) {
            Some(Unit::Link(k)) if ids.gpu_of_chiplet(k) != gpu => {
                // From another GPU: through the GPU switch's port down to this chiplet first;
                // it comes back here (from this unit) when its last byte is in.
                let down = self.gpu_down.as_mut().ok_or_else(err)?;
                let sent = down.send_whole_span(now, bytes);
                let link = self.egress.len() + usize::from(self.from_switch.is_some()) + 1;
                let port = Port::GpuSwitchDown;
                self.observed(
                    now,
                    sent,
                    net.wiring().port_latency(port),
                    bytes,
                    self.unit,
                    link,
                );
                self.count(pkt.ctx(), bytes);
                net.send_on(port, self.unit, self.unit, sent.2, pkt);
                self.pay(owed, sent.2, net);
                return Ok(());
            }
            Some(Unit::Link(k)) if k != self.chiplet => {
                if let Some(down) = self.from_switch.as_mut() {
                    // Through the switch's port down to this chiplet first; it comes back
                    // here (from this unit) when its last byte is in.
                    let sent = down.send_whole_span(now, bytes);
                    let link = self.egress.len();
                    let port = Port::SwitchDown;
                    let latency = net.wiring().port_latency(port);
                    self.observed(now, sent, latency, bytes, self.unit, link);
                    self.count(pkt.ctx(), bytes);
                    net.send_on(port, self.unit, self.unit, sent.2, pkt);
                    self.pay(owed, sent.2, net);
                    return Ok(());
                }
            }
            _ => {}
        }
        if dst == self.chiplet {
            // On over the NoC, when its crossbar input has room.
            if let Some(n) = &mut self.noc_in {
                let network = u32::from(!matches!(pkt, Packet::Request(_)));
                let vc = network * n.ports
                    + super::crossbar::link_port_offset(&pkt, self.params.line_bytes, n.ports);
                let flits = bytes.div_ceil(n.flit_bytes);
                let h = Held {
                    pkt,
                    bytes,
                    hop: to,
                    owed,
                };
                if let Some(h) = n.credits.offer(now, vc, flits, h) {
                    net.send(self.unit, h.hop, now, h.pkt);
                    self.pay(h.owed, now, net);
                }
                return Ok(());
            }
            net.send(self.unit, to, now, pkt);
            self.pay(owed, now, net);
            return Ok(());
        }
        let held = |hop| Held {
            pkt,
            bytes,
            hop,
            owed,
        };
        if ids.gpu_of_chiplet(dst) != gpu {
            // A peer access (or its reply): up to the GPU switch, which forwards it to the
            // destination chiplet's interface (modelling the switch's port down to it).
            let vc = self.vc(&pkt, None, dst);
            let wire = bytes + self.gpu_link_overhead;
            let credits = self.gpu_up_credits.as_mut().ok_or_else(err)?;
            if let Some(h) = credits.offer(now, vc, wire, held(ids.link(dst))) {
                self.transmit(now, Out::GpuUp, h, net);
            }
            return Ok(());
        }
        let n = ids.gpu_chiplets;
        let base = gpu * n;
        let (_, next) = self
            .topology
            .next_hop(n, Some(self.chiplet - base), dst - base)
            .ok_or_else(err)?;
        let index = self
            .egress
            .iter()
            .position(|(to, _)| *to == next)
            .ok_or_else(err)?;
        // Through a switch, the packet goes to the destination's interface (which models
        // the switch's port down to it).
        let hop = ids.link(next.map_or(dst, |h| base + h));
        let vc = self.vc(&pkt, next, dst);
        let wire = bytes + self.link_overhead;
        if let Some(h) = self.egress_credits[index].offer(now, vc, wire, held(hop)) {
            self.transmit(now, Out::Egress(index), h, net);
        }
        Ok(())
    }

    /// The credits of link `out`.
    fn credits_mut(&mut self, out: Out) -> Option<&mut Credits<Held>> {
        match out {
            Out::Egress(i) => self.egress_credits.get_mut(i),
            Out::GpuUp => self.gpu_up_credits.as_mut(),
        }
    }

    /// Sends `h`, its credit spent, on link `out` at `now`, and returns the credit it owes
    /// when its last byte has left.
    fn transmit(&mut self, now: Picos, out: Out, h: Held, net: &mut dyn Net) {
        let (link, index) = match out {
            Out::Egress(i) => (self.egress.get_mut(i).map(|(_, l)| l), i),
            Out::GpuUp => (
                self.gpu_up.as_mut(),
                self.egress.len() + usize::from(self.from_switch.is_some()),
            ),
        };
        let Some(link) = link else {
            return;
        };
        let sent = link.send_whole_span(now, h.bytes);
        let latency = net.wiring().latency(self.unit, h.hop);
        self.observed(now, sent, latency, h.bytes, h.hop, index);
        self.count(h.pkt.ctx(), h.bytes);
        net.send(self.unit, h.hop, sent.2, h.pkt);
        self.pay(h.owed, sent.2, net);
    }

    /// Counters of each link this interface sends on, by destination, then the switch's
    /// port down to it, then (several GPUs) its port up to the GPU switch and that switch's
    /// port down to it.
    pub fn reports(&self) -> Vec<LinkReport> {
        let ids = &self.map.ids;
        let gpu = ids.gpu_of_chiplet(self.chiplet);
        let base = gpu * ids.gpu_chiplets;
        let gpus = ids.gpus() > 1;
        let name = |c: Option<u32>| match c {
            Some(k) => format!("chiplet{k}"),
            None if gpus => format!("gpu{gpu}.switch"),
            None => "switch".to_string(),
        };
        let report = |from: Option<u32>,
                      to: Option<u32>,
                      l: &ChipletLink,
                      c: Option<&Credits<Held>>| LinkReport {
            from,
            to,
            gpu_link: false,
            names: (name(from), name(to)),
            stats: *l.stats(),
            busy_ps: l.busy_ps(),
            credits: c.map(|c| *c.stats()).unwrap_or_default(),
            buffer_bytes: c.map_or(0, |_| self.link_buffer),
        };
        let mut v: Vec<LinkReport> = self
            .egress
            .iter()
            .zip(&self.egress_credits)
            .map(|((to, l), c)| report(Some(self.chiplet), to.map(|h| base + h), l, Some(c)))
            .collect();
        if let Some(l) = &self.from_switch {
            v.push(report(None, Some(self.chiplet), l, None));
        }
        let port = if ids.gpu_chiplets > 1 {
            format!("gpu{gpu}.chiplet{}", self.chiplet)
        } else {
            format!("gpu{gpu}")
        };
        for (l, up) in [(&self.gpu_up, true), (&self.gpu_down, false)] {
            if let Some(l) = l {
                let (from, to) = if up {
                    (Some(self.chiplet), None)
                } else {
                    (None, Some(self.chiplet))
                };
                let (a, b) = (port.clone(), self.gpu_switch.to_string());
                v.push(LinkReport {
                    from,
                    to,
                    gpu_link: true,
                    names: if up { (a, b) } else { (b, a) },
                    stats: *l.stats(),
                    busy_ps: l.busy_ps(),
                    credits: match (up, &self.gpu_up_credits) {
                        (true, Some(c)) => *c.stats(),
                        _ => CreditStats::default(),
                    },
                    buffer_bytes: if up { self.gpu_link_buffer } else { 0 },
                });
            }
        }
        v
    }
}
