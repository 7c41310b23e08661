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

use super::{MemSpec, Net, Packet, Request, Response, Unit};
use crate::config::{GpuConfig, GpuLinkTopology, LinkTopology};
use crate::Picos;

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

/// The topology of `cfg`'s package.
pub fn topology(cfg: &GpuConfig) -> Topology {
    match cfg.package.topology {
        LinkTopology::FullyConnected => Topology::FullyConnected,
        LinkTopology::Ring => Topology::Ring,
        LinkTopology::Mesh2d => Topology::Mesh2D {
            cols: cfg.package.mesh_cols,
        },
        LinkTopology::Switch => Topology::Switch,
    }
}

/// One direction of each link, from `cfg`.
pub fn link_spec(cfg: &GpuConfig) -> LinkSpec {
    let l = &cfg.package.link;
    LinkSpec {
        bandwidth_bytes_per_cycle: l.bandwidth_bytes_per_cycle as u64,
        clock_hz: l.clock_hz,
        latency_ps: l.latency_ps,
        packet_overhead_bytes: l.packet_overhead_bytes as u64,
    }
}

/// One direction of a chiplet's port to the GPU switch, from `cfg` (`system.gpu_link`:
/// the GPU's bandwidth split evenly over its chiplets' ports).
pub fn gpu_link_spec(cfg: &GpuConfig) -> LinkSpec {
    let l = &cfg.system.gpu_link;
    LinkSpec {
        bandwidth_bytes_per_cycle: (l.bandwidth_bytes_per_cycle / cfg.chiplets.max(1)).max(1)
            as u64,
        clock_hz: l.clock_hz,
        latency_ps: l.latency_ps,
        packet_overhead_bytes: l.packet_overhead_bytes as u64,
    }
}

/// The link interface of one chiplet: the sending side of each of its links (and, behind a
/// switch, the switch's port down to it), and with several GPUs its port to the GPU switch
/// and the switch's port down to it.
pub struct LinkInterface {
    spec: Arc<MemSpec>,
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
}

impl LinkInterface {
    pub fn new(cfg: &GpuConfig, spec: Arc<MemSpec>, chiplet: u32) -> LinkInterface {
        let topology = topology(cfg);
        let n = spec.ids.gpu_chiplets;
        let local = chiplet % n;
        let ls = link_spec(cfg);
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
        let gpus = spec.ids.gpus() > 1;
        let gs = gpu_link_spec(cfg);
        LinkInterface {
            unit: spec.ids.link(chiplet),
            spec,
            chiplet,
            egress,
            from_switch: (n > 1 && topology == Topology::Switch).then(|| ChipletLink::new(ls)),
            topology,
            gpu_up: gpus.then(|| ChipletLink::new(gs)),
            gpu_down: gpus.then(|| ChipletLink::new(gs)),
            gpu_switch: match cfg.system.gpu_link.topology {
                GpuLinkTopology::Nvswitch => "nvswitch",
                GpuLinkTopology::PcieHost => "pcie_host",
            },
        }
    }

    /// Its chiplet.
    pub fn chiplet(&self) -> u32 {
        self.chiplet
    }

    /// The chiplet a packet is going to, and the unit there: the home channel of a
    /// request's line, the SM of a reply (control messages do not cross links).
    fn destination(&self, pkt: &Packet) -> Option<(u32, u32)> {
        let ids = &self.spec.ids;
        match *pkt {
            Packet::Request(
                Request::Read { line, .. }
                | Request::Write { line, .. }
                | Request::Atomic { line, .. },
            ) => {
                let channel = self.spec.l2_home(line).0;
                Some((ids.chiplet_of_channel(channel), ids.channel(channel)))
            }
            // Private L2 <-> home LLC (`package.l2: private`).
            Packet::Request(Request::LlcRead { line, .. } | Request::LlcWrite { line, .. }) => {
                let channel = self.spec.llc_home(line).0;
                Some((ids.chiplet_of_channel(channel), ids.channel(channel)))
            }
            Packet::Response(Response::Reply { sm, .. }) => match ids.unit(sm) {
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
        let ids = self.spec.ids;
        let bytes = pkt.wire_bytes(self.spec.l2_geom.sector_bytes);
        let gpu = ids.gpu_of_chiplet(self.chiplet);
        match ids.unit(src) {
            Some(Unit::Link(k)) if ids.gpu_of_chiplet(k) != gpu => {
                // From another GPU: through the GPU switch's port down to this chiplet first;
                // it comes back here (from this unit) when its last byte is in.
                let down = self.gpu_down.as_mut().ok_or_else(err)?;
                let at = down.send_whole(now, bytes);
                net.send(self.unit, self.unit, at, pkt);
                return Ok(());
            }
            Some(Unit::Link(k)) if k != self.chiplet => {
                if let Some(down) = self.from_switch.as_mut() {
                    // Through the switch's port down to this chiplet first; it comes back
                    // here (from this unit) when its last byte is in.
                    let at = down.send_whole(now, bytes);
                    net.send(self.unit, self.unit, at, pkt);
                    return Ok(());
                }
            }
            _ => {}
        }
        if dst == self.chiplet {
            net.send(self.unit, to, now + self.spec.noc_latency_ps, pkt);
            return Ok(());
        }
        if ids.gpu_of_chiplet(dst) != gpu {
            // A peer access (or its reply): up to the GPU switch, which forwards it to the
            // destination chiplet's interface (modelling the switch's port down to it).
            let up = self.gpu_up.as_mut().ok_or_else(err)?;
            let at = up.send_whole(now, bytes);
            net.send(self.unit, ids.link(dst), at, pkt);
            return Ok(());
        }
        let n = ids.gpu_chiplets;
        let base = gpu * n;
        let (_, next) = self
            .topology
            .next_hop(n, Some(self.chiplet - base), dst - base)
            .ok_or_else(err)?;
        let link = self
            .egress
            .iter_mut()
            .find(|(to, _)| *to == next)
            .map(|(_, l)| l)
            .ok_or_else(err)?;
        let at = link.send_whole(now, bytes);
        // Through a switch, the packet goes to the destination's interface (which models
        // the switch's port down to it).
        let hop = next.map_or(dst, |h| base + h);
        net.send(self.unit, ids.link(hop), at, pkt);
        Ok(())
    }

    /// Counters of each link this interface sends on, by destination, then the switch's
    /// port down to it, then (several GPUs) its port up to the GPU switch and that switch's
    /// port down to it.
    pub fn reports(&self) -> Vec<LinkReport> {
        let ids = &self.spec.ids;
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
