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
use super::{Ctx, Net, Packet, Request, Response, Unit};
use crate::config::{config_enum, section, GpuConfig, GpuLinkTopology, Kind, CLOCK_RANGE, MAX_PS};
use crate::gpu::Port;
use crate::observe::{LinkPacket, Observer, Probe};
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
}

impl LinkParams {
    pub fn from_config(cfg: &GpuConfig) -> LinkParams {
        let l = &cfg.package.link;
        let g = &cfg.system.gpu_link;
        LinkParams {
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
        }
    }
}

/// The link interface of one chiplet: the sending side of each of its links (and, behind a
/// switch, the switch's port down to it), and with several GPUs its port to the GPU switch
/// and the switch's port down to it.
pub struct LinkInterface {
    params: Arc<LinkParams>,
    map: Arc<AddressMap>,
    chiplet: u32,
    unit: u32,
    topology: Topology,
    /// Egress links by the next hop they lead to, chiplets numbered inside the GPU
    /// (`None`: the switch).
    egress: Vec<(Option<u32>, ChipletLink)>,
    /// The switch's port down to this chiplet (`topology: switch` only).
    from_switch: Option<ChipletLink>,
    /// The port up to the GPU switch and the switch's port down to this chiplet
    /// (`system.gpus` > 1 only).
    gpu_up: Option<ChipletLink>,
    gpu_down: Option<ChipletLink>,
    /// The GPU switch's name in the stats.
    gpu_switch: &'static str,
    /// Its observer, if any.
    probe: Option<Probe>,
    /// Packets and bytes it sent on its links, by the kernel they serve.
    tally: KernelTally,
}

impl LinkInterface {
    pub fn new(params: Arc<LinkParams>, map: Arc<AddressMap>, chiplet: u32) -> LinkInterface {
        let topology = params.topology;
        let n = map.ids.gpu_chiplets;
        let local = chiplet % n;
        // Serialization only: a link's latency is its connection's (`gpu/wiring.rs`), added
        // by the net from the end of the transmission.
        let ls = LinkSpec {
            latency_ps: 0,
            ..params.link
        };
        let egress = if n > 1 {
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
        let gs = LinkSpec {
            latency_ps: 0,
            ..params.gpu_link
        };
        LinkInterface {
            unit: map.ids.link(chiplet),
            gpu_switch: params.gpu_switch,
            params,
            map,
            chiplet,
            egress,
            from_switch: (n > 1 && topology == Topology::Switch).then(|| ChipletLink::new(ls)),
            topology,
            gpu_up: gpus.then(|| ChipletLink::new(gs)),
            gpu_down: gpus.then(|| ChipletLink::new(gs)),
            probe: None,
            tally: KernelTally::default(),
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
                | Request::Atomic { line, .. },
            ) => {
                let channel = self.map.l2_home(line).0;
                Some((ids.chiplet_of_channel(channel), ids.channel(channel)))
            }
            // Private L2 <-> home LLC (`package.l2: private`).
            Packet::Request(Request::LlcRead { line, .. } | Request::LlcWrite { line, .. }) => {
                let channel = self.map.llc_home(line).0;
                Some((ids.chiplet_of_channel(channel), ids.channel(channel)))
            }
            Packet::Response(Response::Reply { sm, .. } | Response::WriteAck { sm, .. }) => {
                match ids.unit(sm) {
                    Some(Unit::Sm(_)) => Some((ids.chiplet_of(sm), sm)),
                    _ => None,
                }
            }
            Packet::Response(Response::LlcReply { unit, .. }) => match ids.unit(unit) {
                Some(Unit::Channel(_)) => Some((ids.chiplet_of(unit), unit)),
                _ => None,
            },
            Packet::Control(_) => None,
        }
    }

    /// A packet from unit `src` arrives at `now`: routes it on.
    pub fn on_packet(
        &mut self,
        now: Picos,
        src: u32,
        pkt: Packet,
        net: &mut dyn Net,
    ) -> Result<(), RouteError> {
        let err = || RouteError {
            chiplet: self.chiplet,
            pkt,
        };
        let (dst, to) = self.destination(&pkt).ok_or_else(err)?;
        let ids = self.map.ids;
        let bytes = pkt.wire_bytes(self.params.sector_bytes);
        let gpu = ids.gpu_of_chiplet(self.chiplet);
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
                    return Ok(());
                }
            }
            _ => {}
        }
        if dst == self.chiplet {
            net.send(self.unit, to, now, pkt);
            return Ok(());
        }
        if ids.gpu_of_chiplet(dst) != gpu {
            // A peer access (or its reply): up to the GPU switch, which forwards it to the
            // destination chiplet's interface (modelling the switch's port down to it).
            let up = self.gpu_up.as_mut().ok_or_else(err)?;
            let sent = up.send_whole_span(now, bytes);
            let link = self.egress.len() + usize::from(self.from_switch.is_some());
            let next = ids.link(dst);
            let latency = net.wiring().latency(self.unit, next);
            self.observed(now, sent, latency, bytes, next, link);
            self.count(pkt.ctx(), bytes);
            net.send(self.unit, next, sent.2, pkt);
            return Ok(());
        }
        let n = ids.gpu_chiplets;
        let base = gpu * n;
        let (_, next) = self
            .topology
            .next_hop(n, Some(self.chiplet - base), dst - base)
            .ok_or_else(err)?;
        let (index, link) = self
            .egress
            .iter_mut()
            .enumerate()
            .find(|(_, (to, _))| *to == next)
            .map(|(i, (_, l))| (i, l))
            .ok_or_else(err)?;
        let sent = link.send_whole_span(now, bytes);
        // Through a switch, the packet goes to the destination's interface (which models
        // the switch's port down to it).
        let hop = ids.link(next.map_or(dst, |h| base + h));
        let latency = net.wiring().latency(self.unit, hop);
        self.observed(now, sent, latency, bytes, hop, index);
        self.count(pkt.ctx(), bytes);
        net.send(self.unit, hop, sent.2, pkt);
        Ok(())
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
        let report = |from: Option<u32>, to: Option<u32>, l: &ChipletLink| LinkReport {
            from,
            to,
            gpu_link: false,
            names: (name(from), name(to)),
            stats: *l.stats(),
            busy_ps: l.busy_ps(),
        };
        let mut v: Vec<LinkReport> = self
            .egress
            .iter()
            .map(|(to, l)| report(Some(self.chiplet), to.map(|h| base + h), l))
            .collect();
        if let Some(l) = &self.from_switch {
            v.push(report(None, Some(self.chiplet), l));
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
                });
            }
        }
        v
    }
}
