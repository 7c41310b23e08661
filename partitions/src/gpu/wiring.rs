//! The wiring of a system: every connection between units, declared once, with its
//! latency, its bandwidth and the depth of the buffer at its far end (DESIGN.md section 5,
//! "Links are declared once").
//!
//! Units send a packet with its *departure* time on a connection ([`crate::packet::Net`]);
//! the net adds the connection's latency from here ([`Wiring::latency`]), and the
//! lookahead's list of links ([`Wiring::links`]) is generated from the same declarations,
//! so the two cannot disagree. A connection's bandwidth and depth ([`Wiring::connection`])
//! are read from here too, by the unit that models them: the NoC crossbar serializes at the
//! NoC's bandwidth (`crossbar.rs`; with `noc.model: ports` the SMs' and slices' NoC ports),
//! the LD/ST unit holds the credits of its crossbar input, a channel unit those of its
//! slices' crossbar inputs (their reply queues), the crossbar those of the slices' request
//! queues, and a link interface serializes on its
//! [`tessera_interconnect::ChipletLink`]s (built with no latency of their own) and holds
//! the credits of the far end's buffers. What is neither stays in the sender's model: a
//! host copy's transfer time, a command processor's processing time.
//!
//! | connection | bandwidth | depth (credits at the sender) |
//! |---|---|---|
//! | an SM to its chiplet's crossbar | `noc.bandwidth_bytes_per_cycle` per NoC cycle | `noc.input_buffer_flits` |
//! | a channel to the crossbar | the same | `l2.reply_queue_packets` per slice (replies and acknowledgements; its requests to an LLC slice: none) |
//! | a link interface to the crossbar | the same | `noc.input_buffer_flits` per port and network |
//! | the crossbar to a channel | the same | `l2.request_queue_packets` per slice (requests) |
//! | the crossbar to the link interface | the same | `package.link.noc_queue_packets` per port and network |
//! | the crossbar to an SM | the same | none (an SM takes a reply as it arrives) |
//! | the NoC without a crossbar (`noc.model: ports`) | the same, at each SM's and slice's ports | none |
//! | a link interface to the next along the package topology | `package.link.bandwidth_bytes_per_cycle` | `package.link.buffer_bytes` per virtual channel |
//! | a link interface to another GPU's | `system.gpu_link.bandwidth_bytes_per_cycle` | `system.gpu_link.buffer_bytes` per virtual channel |
//! | the CPs' and the host's connections | none (control) | none |
//!
//! The connections ([`crate::mem::UnitIds`] names the units):
//!
//! | from | to | latency |
//! |---|---|---|
//! | SM | a channel or the link interface of its chiplet | the NoC (`noc.latency_cycles`) |
//! | channel | an SM, another channel (private L2 to LLC) or the link interface of its chiplet | the NoC |
//! | link interface | an SM or a channel of its chiplet | the NoC |
//! | local CP | an SM of its chiplet (CTA dispatch), a channel of it (flush, private L2) | `launch.cta_dispatch_ps` |
//! | SM, channel (flush done) | the local CP of its chiplet | `launch.cta_dispatch_ps` |
//! | global CP | another chiplet's local CP of its GPU | `launch.gcp_to_lcp_ps` |
//! | local CP | its GPU's global CP on another chiplet | `launch.completion_ps` |
//! | host (CP unit 0) | another GPU's global CP (a launch) | `launch.host_to_gcp_ps` |
//! | host, port [`Port::HostCopy`] | every channel of the copy's GPU | `launch.host_to_gcp_ps` |
//! | global CP of another GPU | the host | `system.host_link.completion_ps` |
//! | link interface | the next chiplet's interface along the topology, and back (its credits) | `package.link.latency_ps` |
//! | link interface | an interface of another GPU (through the GPU switch), and back (its credits) | `system.gpu_link.latency_ps` |
//! | link interface, port [`Port::SwitchDown`] | itself (the package switch's port down to it) | `package.link.latency_ps` |
//! | link interface, port [`Port::GpuSwitchDown`] | itself (the GPU switch's port down to it) | `system.gpu_link.latency_ps` |
//!
//! With `noc.model: crossbar` the NoC's connections (the first three rows, and a private
//! L2 slice to an LLC slice) go through the chiplet's crossbar unit instead: a sender to it
//! after `noc.latency_cycles / 2` NoC cycles (at least 1), the crossbar to the destination
//! after the rest (at least 1; assumed: the crossbar sits mid-way, `NocParams::crossbar_ps`);
//! the net sends a packet there ([`Wiring::hop`]) and the crossbar sends it on.
//!
//! A port is named only where a unit id alone does not say which connection a packet
//! takes: unit 0 is the host and chiplet 0's local CP at once, and a link interface
//! models both switches' ports down to its chiplet.

use tessera_interconnect::{Link, LinkSpec, PortId};

use crate::config::GpuConfig;
use crate::gpu::launch::CpParams;
use crate::mem::{LinkParams, NocParams, UnitIds};
use crate::Picos;

/// A sender's port, where its unit id alone does not say which connection a packet takes
/// (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    /// The host's copies to the channels (unit 0, which is also chiplet 0's local CP).
    HostCopy,
    /// The package switch's port down to a link interface's chiplet (`package.topology:
    /// switch`): the interface to itself.
    SwitchDown,
    /// The GPU switch's port down to a link interface's chiplet (`system.gpus` > 1): the
    /// interface to itself.
    GpuSwitchDown,
}

// Unit kinds, the index of the latency table.
const CP: usize = 0;
const SM: usize = 1;
const CHANNEL: usize = 2;
const LINK: usize = 3;
const XBAR: usize = 4;
/// Unit kinds.
const KINDS: usize = 5;

/// What a connection carries per cycle of a clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bandwidth {
    pub bytes_per_cycle: u64,
    pub clock_hz: u64,
}

/// The buffer at a connection's far end that its sender holds credits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// None: what crosses it answers requests bounded elsewhere, or is control.
    Unbounded,
    /// Flits of the connection's bandwidth (an SM's crossbar input).
    Flits(u64),
    /// Request packets (a slice's request queue).
    Packets(u32),
    /// Bytes per virtual channel (a link's receive buffer).
    Bytes(u64),
}

/// A declared connection ([`Wiring::connection`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connection {
    pub latency_ps: Picos,
    /// `None`: it does not serialize (control).
    pub bandwidth: Option<Bandwidth>,
    pub depth: Depth,
}

/// No such connection.
const NONE: Picos = Picos::MAX;
/// Between two CPs or two link interfaces: it depends on which (`Wiring::same_kind`).
const SAME_KIND: Picos = Picos::MAX - 1;

/// Every connection of a system with its latency (module documentation). Built once per
/// system; cheap to clone (the net of each partition holds one).
#[derive(Clone, Debug)]
pub struct Wiring {
    ids: UnitIds,
    /// `1 + sms` and `1 + sms + channels`: where a chiplet's block of ids changes kind.
    sm_end: u32,
    channel_end: u32,
    per_chiplet: u32,
    /// By unit id: its kind (an index of the table), looked up for every packet.
    kinds: Box<[u8]>,
    /// By `(kind of source) * KINDS + kind of destination`: the latency between units of
    /// those kinds on one chiplet, `NONE` for kinds never connected, `SAME_KIND` between two
    /// CPs or two link interfaces (it depends on which; the only connections across
    /// chiplets).
    table: [Picos; KINDS * KINDS],
    /// By the same index: a packet between units of those kinds on one chiplet goes
    /// through the chiplet's crossbar (`noc.model: crossbar`: the NoC's connections).
    via: [bool; KINDS * KINDS],
    /// A unit to the crossbar and the crossbar to a unit (`noc.model: crossbar`).
    to_xbar_ps: Picos,
    from_xbar_ps: Picos,
    noc_ps: Picos,
    cta_dispatch_ps: Picos,
    gcp_to_lcp_ps: Picos,
    completion_ps: Picos,
    host_to_gcp_ps: Picos,
    to_host_ps: Picos,
    link_ps: Picos,
    gpu_link_ps: Picos,
    /// By `from * gpu_chiplets + to` (chiplets inside a GPU): a package link joins them,
    /// directly or through the package switch.
    package: Vec<bool>,
    /// The NoC's bandwidth, the flits of an SM's crossbar input, the requests of a
    /// slice's request queue and the packets of its reply queue (0: no credits; the queues
    /// always 0 without the crossbar).
    noc: Bandwidth,
    sm_input_flits: u64,
    slice_queue: u32,
    reply_queue: u32,
    /// The packets per port and network of a link interface's queue from the crossbar
    /// (0: unbounded; always 0 without the crossbar or with one chiplet), and the flits of
    /// each of its crossbar inputs (likewise).
    link_queue: u32,
    link_input: u64,
    /// One direction of a package link and of a chiplet's port to the GPU switch, and the
    /// bytes of the buffers at their far ends.
    link: LinkSpec,
    link_buffer: u64,
    gpu_link: LinkSpec,
    gpu_link_buffer: u64,
}

impl Wiring {
    /// The wiring of the system of `cfg`.
    pub fn from_config(cfg: &GpuConfig) -> Wiring {
        Wiring::new(
            UnitIds::new(cfg),
            cfg.package.l2 == crate::config::L2Organization::Private,
            &NocParams::from_config(cfg),
            &CpParams::from_config(cfg),
            &LinkParams::from_config(cfg),
            (cfg.l2.request_queue_packets, cfg.l2.reply_queue_packets),
        )
    }

    /// The wiring of units `ids` from their parameters (`private`: `package.l2: private`;
    /// `(request_queue, reply_queue)`: `l2.request_queue_packets`,
    /// `l2.reply_queue_packets`).
    pub(crate) fn new(
        ids: UnitIds,
        private: bool,
        noc: &NocParams,
        cp: &CpParams,
        link: &LinkParams,
        (request_queue, reply_queue): (u32, u32),
    ) -> Wiring {
        let noc_ps = noc.latency_ps;
        let d = cp.cta_dispatch_ps;
        let mut table = [NONE; KINDS * KINDS];
        let mut via = [false; KINDS * KINDS];
        let crossbar = ids.xbar;
        let (to_xbar, from_xbar) = noc.crossbar_ps();
        {
            let mut set = |a: usize, b: usize, l: Picos| table[a * KINDS + b] = l;
            // The NoC's connections inside a chiplet: direct, or through the crossbar.
            let mut noc_pairs = vec![(SM, CHANNEL), (CHANNEL, SM)];
            if ids.chiplets > 1 {
                noc_pairs.extend([(SM, LINK), (LINK, SM), (CHANNEL, LINK), (LINK, CHANNEL)]);
            }
            if private {
                // A private L2 slice to an LLC slice (of its own unit too).
                noc_pairs.push((CHANNEL, CHANNEL));
            }
            for &(a, b) in &noc_pairs {
                if crossbar {
                    via[a * KINDS + b] = true;
                    set(a, XBAR, to_xbar);
                    set(XBAR, b, from_xbar);
                } else {
                    set(a, b, noc_ps);
                }
            }
            set(CP, SM, d);
            set(SM, CP, d);
            if private {
                // The local CP's flushes and their acknowledgements.
                set(CP, CHANNEL, d);
                set(CHANNEL, CP, d);
            }
        }
        let mut set = |a: usize, b: usize, l: Picos| table[a * KINDS + b] = l;
        // Across chiplets (`Wiring::declared`).
        set(CP, CP, SAME_KIND);
        set(LINK, LINK, SAME_KIND);
        let n = ids.gpu_chiplets as usize;
        let mut package = vec![false; n * n];
        if n > 1 {
            for (from, to) in link.topology.links(n as u32) {
                match (from, to) {
                    (Some(a), Some(b)) => package[a as usize * n + b as usize] = true,
                    // Up to the switch: on to every other chiplet's interface.
                    (Some(a), None) => {
                        for b in (0..n).filter(|&b| b != a as usize) {
                            package[a as usize * n + b] = true;
                        }
                    }
                    _ => {}
                }
            }
        }
        let sm_end = 1 + ids.sms;
        let channel_end = sm_end + ids.channels;
        let per = ids.per_chiplet();
        let kinds = (0..ids.count())
            .map(|u| match u % per {
                0 => CP as u8,
                r if r < sm_end => SM as u8,
                r if r < channel_end => CHANNEL as u8,
                r if crossbar && r == per - 1 => XBAR as u8,
                _ => LINK as u8,
            })
            .collect();
        Wiring {
            ids,
            kinds,
            sm_end: 1 + ids.sms,
            channel_end: 1 + ids.sms + ids.channels,
            per_chiplet: ids.per_chiplet(),
            table,
            via,
            to_xbar_ps: to_xbar,
            from_xbar_ps: from_xbar,
            noc_ps,
            cta_dispatch_ps: d,
            gcp_to_lcp_ps: cp.gcp_to_lcp_ps,
            completion_ps: cp.completion_ps,
            host_to_gcp_ps: cp.host_to_gcp_ps,
            to_host_ps: cp.to_host_ps,
            link_ps: link.link.latency_ps,
            gpu_link_ps: link.gpu_link.latency_ps,
            package,
            noc: Bandwidth {
                bytes_per_cycle: noc.bytes_per_cycle,
                clock_hz: noc.clock_hz,
            },
            sm_input_flits: noc.input_buffer_flits,
            slice_queue: if crossbar { request_queue } else { 0 },
            reply_queue: if crossbar { reply_queue } else { 0 },
            link_queue: if crossbar && ids.chiplets > 1 {
                link.noc_queue
            } else {
                0
            },
            link_input: if crossbar && ids.chiplets > 1 {
                noc.input_buffer_flits
            } else {
                0
            },
            link: link.link,
            link_buffer: link.link_buffer,
            gpu_link: link.gpu_link,
            gpu_link_buffer: link.gpu_link_buffer,
        }
    }

    /// The declared connection from unit `src` to unit `dst` (on no named port): its
    /// latency ([`Wiring::declared`]), bandwidth and depth (the module documentation's
    /// table).
    pub fn connection(&self, src: u32, dst: u32) -> Option<Connection> {
        let latency_ps = self.declared(src, dst)?;
        let noc = Some(self.noc);
        let (bandwidth, depth) = match (self.kind(src), self.kind(dst)) {
            (SM, XBAR) if self.sm_input_flits > 0 => (noc, Depth::Flits(self.sm_input_flits)),
            (XBAR, CHANNEL) if self.slice_queue > 0 => (noc, Depth::Packets(self.slice_queue)),
            (CHANNEL, XBAR) if self.reply_queue > 0 => (noc, Depth::Packets(self.reply_queue)),
            (LINK, XBAR) if self.link_input > 0 => (noc, Depth::Flits(self.link_input)),
            (XBAR, LINK) if self.link_queue > 0 => (noc, Depth::Packets(self.link_queue)),
            (LINK, LINK) => {
                let (cs, cd) = (self.ids.chiplet_of(src), self.ids.chiplet_of(dst));
                if self.ids.gpu_of_chiplet(cs) == self.ids.gpu_of_chiplet(cd) {
                    (Some(self.link_bandwidth()), Depth::Bytes(self.link_buffer))
                } else {
                    (
                        Some(self.gpu_link_bandwidth()),
                        Depth::Bytes(self.gpu_link_buffer),
                    )
                }
            }
            (SM | CHANNEL | LINK | XBAR, SM | CHANNEL | LINK | XBAR) => (noc, Depth::Unbounded),
            _ => (None, Depth::Unbounded),
        };
        Some(Connection {
            latency_ps,
            bandwidth,
            depth,
        })
    }

    /// The NoC's bandwidth: a crossbar port's flit per NoC cycle (or, without the
    /// crossbar, an SM's or slice's NoC port).
    pub fn noc_bandwidth(&self) -> Bandwidth {
        self.noc
    }

    /// An SM's or a slice's NoC port (egress or ingress): at the NoC's bandwidth without the
    /// crossbar; with it a port that never delays, the crossbar's input holding a packet
    /// for its flits (the sender's serialization) and its output likewise (the
    /// receiver's), so the units' own ports would count them twice.
    pub fn noc_port(&self) -> tessera_interconnect::BwPort {
        if self.ids.xbar {
            tessera_interconnect::BwPort::unlimited()
        } else {
            tessera_interconnect::BwPort::new(self.noc.bytes_per_cycle, self.noc.clock_hz)
        }
    }

    /// The flits of an SM's crossbar input it holds credits for (0: none).
    pub fn sm_input_flits(&self) -> u64 {
        self.sm_input_flits
    }

    /// The requests a slice's request queue holds, which the crossbar holds credits for
    /// (0: unbounded).
    pub fn slice_queue_packets(&self) -> u32 {
        self.slice_queue
    }

    /// The replies and acknowledgements a slice's reply queue (its crossbar input) holds,
    /// which the slice holds credits for (0: unbounded).
    pub fn slice_reply_packets(&self) -> u32 {
        self.reply_queue
    }

    /// The flits of each of a link interface's crossbar inputs (per port and network),
    /// which it holds credits for: `noc.input_buffer_flits`, with several chiplets and the
    /// crossbar (0: unbounded).
    pub fn link_input_flits(&self) -> u64 {
        self.link_input
    }

    /// The packets of a link interface's queue from the crossbar, per port and network,
    /// which the crossbar holds credits for (0: unbounded).
    pub fn link_queue_packets(&self) -> u32 {
        self.link_queue
    }

    /// One direction of a package link (its latency is the connection's, added by the
    /// net) and the buffer at its far end, per virtual channel.
    pub fn link_spec(&self) -> (LinkSpec, u64) {
        (self.link, self.link_buffer)
    }

    /// One direction of a chiplet's port to the GPU switch, and the buffer at its far end.
    pub fn gpu_link_spec(&self) -> (LinkSpec, u64) {
        (self.gpu_link, self.gpu_link_buffer)
    }

    pub(crate) fn link_bandwidth(&self) -> Bandwidth {
        Bandwidth {
            bytes_per_cycle: self.link.bandwidth_bytes_per_cycle,
            clock_hz: self.link.clock_hz,
        }
    }

    pub(crate) fn gpu_link_bandwidth(&self) -> Bandwidth {
        Bandwidth {
            bytes_per_cycle: self.gpu_link.bandwidth_bytes_per_cycle,
            clock_hz: self.gpu_link.clock_hz,
        }
    }

    /// The units it connects.
    pub fn ids(&self) -> &UnitIds {
        &self.ids
    }

    /// The kind of unit `u` (an index of the table).
    #[inline(always)]
    fn kind(&self, u: u32) -> usize {
        self.kinds[u as usize] as usize
    }

    /// The latency of the connection from unit `src` to unit `dst` (a packet sent on it at
    /// `t` arrives at `t + latency`). Runs for every packet: the kinds of the two units
    /// give it, except between two CPs or two link interfaces. A pair that is not
    /// connected is a model bug (checked in debug builds; see [`Wiring::declared`]).
    #[inline(always)]
    pub fn latency(&self, src: u32, dst: u32) -> Picos {
        let l = self.table[self.kind(src) * KINDS + self.kind(dst)];
        let l = if l >= SAME_KIND {
            self.same_kind(src, dst)
        } else {
            l
        };
        debug_assert_eq!(
            Some(l),
            self.declared(src, dst),
            "a packet from unit {src} to unit {dst}, which are not connected"
        );
        l
    }

    /// Where a packet from unit `src` for unit `dst` goes next, and the latency to there:
    /// `dst` itself, or with `noc.model: crossbar` the crossbar of their chiplet when the
    /// NoC connects them (the crossbar then sends it on to `dst`).
    #[inline(always)]
    pub fn hop(&self, src: u32, dst: u32) -> (u32, Picos) {
        if self.ids.xbar && self.via[self.kind(src) * KINDS + self.kind(dst)] {
            let k = self.ids.chiplet_of(src);
            if k == self.ids.chiplet_of(dst) {
                let x = self.ids.xbar(k);
                return (x, self.latency(src, x));
            }
        }
        (dst, self.latency(src, dst))
    }

    /// The latency of `port` (from a unit to itself, or the host's copies).
    #[inline]
    pub fn port_latency(&self, port: Port) -> Picos {
        match port {
            Port::HostCopy => self.host_to_gcp_ps,
            Port::SwitchDown => self.link_ps,
            Port::GpuSwitchDown => self.gpu_link_ps,
        }
    }

    /// Between two CPs or two link interfaces (and the panic of an unconnected pair).
    #[cold]
    #[inline(never)]
    fn same_kind(&self, src: u32, dst: u32) -> Picos {
        self.declared(src, dst).unwrap_or_else(|| {
            panic!("a packet from unit {src} to unit {dst}, which are not connected")
        })
    }

    /// The NoC's latency (SM, channel and link interface of a chiplet to each other): the
    /// least time a packet between an SM and a channel takes.
    pub fn noc_ps(&self) -> Picos {
        self.noc_ps
    }

    /// The least time a NoC packet takes from its sender to an SM, channel or link
    /// interface: the NoC's latency, or with a crossbar the latencies to it and from it.
    pub fn noc_path_ps(&self) -> Picos {
        if self.ids.xbar {
            self.to_xbar_ps + self.from_xbar_ps
        } else {
            self.noc_ps
        }
    }

    /// The crossbar to a unit (`noc.model: crossbar`).
    pub fn from_xbar_ps(&self) -> Picos {
        self.from_xbar_ps
    }

    /// The latency of a CTA's dispatch and of its completion report (local CP <-> SM).
    pub fn cta_dispatch_ps(&self) -> Picos {
        self.cta_dispatch_ps
    }

    /// A global CP to the local CPs of its GPU (its own takes a slice after the same time,
    /// without a packet).
    pub fn gcp_to_lcp_ps(&self) -> Picos {
        self.gcp_to_lcp_ps
    }

    /// A local CP's report to its GPU's global CP (its own chiplet's too, without a
    /// packet).
    pub fn completion_ps(&self) -> Picos {
        self.completion_ps
    }

    /// The host to a global CP (GPU 0's too, without a packet).
    pub fn host_to_gcp_ps(&self) -> Picos {
        self.host_to_gcp_ps
    }

    /// A global CP to the host (0 with one GPU, where they are one unit).
    pub fn to_host_ps(&self) -> Picos {
        self.to_host_ps
    }

    /// The declared connection from unit `src` to unit `dst` on no named port, if any, with
    /// its latency: the table of the module documentation, exactly.
    pub fn declared(&self, src: u32, dst: u32) -> Option<Picos> {
        let ids = &self.ids;
        if src >= ids.count() || dst >= ids.count() {
            return None;
        }
        let (ks, kd) = (self.kind(src), self.kind(dst));
        let (cs, cd) = (ids.chiplet_of(src), ids.chiplet_of(dst));
        let same_chiplet = cs == cd;
        let same_gpu = ids.gpu_of_chiplet(cs) == ids.gpu_of_chiplet(cd);
        match self.table[ks * KINDS + kd] {
            NONE => return None,
            SAME_KIND => {}
            l => return same_chiplet.then_some(l),
        }
        match (ks, kd) {
            (CP, CP) if src != dst => {
                let gcp = |k: u32| k == ids.gpu_first_chiplet(ids.gpu_of_chiplet(k));
                if same_gpu {
                    if gcp(cs) {
                        Some(self.gcp_to_lcp_ps)
                    } else if gcp(cd) {
                        Some(self.completion_ps)
                    } else {
                        None
                    }
                } else if src == UnitIds::CP && gcp(cd) {
                    Some(self.host_to_gcp_ps)
                } else if dst == UnitIds::CP && gcp(cs) {
                    Some(self.to_host_ps)
                } else {
                    None
                }
            }
            (LINK, LINK) if !same_chiplet => {
                if same_gpu {
                    let n = ids.gpu_chiplets;
                    let (a, b) = ((cs % n) as usize, (cd % n) as usize);
                    self.package[a * n as usize + b].then_some(self.link_ps)
                } else {
                    Some(self.gpu_link_ps)
                }
            }
            _ => None,
        }
    }

    /// Every connection between two different units with its latency, for the lookahead:
    /// the declarations of [`Wiring::declared`] and the host's copies (a unit's
    /// connections to itself never cross partitions).
    pub fn links(&self) -> Vec<Link> {
        let ids = &self.ids;
        let link = |src: u32, dst: u32, latency: Picos| Link {
            src: PortId(src),
            dst: PortId(dst),
            latency,
        };
        let mut v = Vec::new();
        let per = self.per_chiplet;
        // Inside each chiplet, by the table (the units of a kind are a range of its ids).
        let link_end = self.channel_end + u32::from(ids.chiplets > 1);
        let bounds = [0, 1, self.sm_end, self.channel_end, link_end, per];
        for k in 0..ids.chiplets {
            let of = |kind: usize| k * per + bounds[kind]..k * per + bounds[kind + 1];
            for (ks, kd) in (0..KINDS).flat_map(|a| (0..KINDS).map(move |b| (a, b))) {
                let l = self.table[ks * KINDS + kd];
                if l >= SAME_KIND {
                    continue;
                }
                for src in of(ks) {
                    v.extend(of(kd).filter(|&d| d != src).map(|d| link(src, d, l)));
                }
            }
        }
        // Across chiplets: CPs and link interfaces.
        if ids.chiplets > 1 {
            let ends = |u: fn(&UnitIds, u32) -> u32| (0..ids.chiplets).map(move |k| u(ids, k));
            for unit in [UnitIds::cp as fn(&UnitIds, u32) -> u32, UnitIds::link] {
                for src in ends(unit) {
                    for dst in ends(unit).filter(|&d| d != src) {
                        if let Some(l) = self.declared(src, dst) {
                            v.push(link(src, dst, l));
                        }
                    }
                }
            }
        }
        for c in 0..ids.total_channels() {
            v.push(link(
                UnitIds::CP,
                ids.channel(c),
                self.port_latency(Port::HostCopy),
            ));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `configs/<name>` (with the NoC crossbar, the default), on the NoC's ports model
    /// when the name ends in `+ports`.
    fn load(name: &str) -> GpuConfig {
        let (file, sets) = match name.strip_suffix("+ports") {
            Some(f) => (f, vec![("noc.model".to_string(), "ports".to_string())]),
            None => (name, Vec::new()),
        };
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../configs")
            .join(file);
        GpuConfig::load(p, &sets).expect("config loads")
    }

    /// The fast latency agrees with the declarations on every connected pair, and the
    /// lookahead's links are exactly the declared connections (and the host's copies).
    #[test]
    fn the_latency_table_agrees_with_the_declarations() {
        for name in [
            "titanv.yaml",
            "a100-4chiplet.yaml",
            "radeon7-2chiplet.yaml",
            "dgx-8gpu.yaml",
            "titanv.yaml+ports",
            "radeon7-2chiplet.yaml+ports",
            "dgx-8gpu.yaml+ports",
        ] {
            let cfg = load(name);
            let w = Wiring::from_config(&cfg);
            let n = w.ids.count();
            let mut declared = 0;
            for s in 0..n {
                for d in 0..n {
                    if let Some(l) = w.declared(s, d) {
                        assert_eq!(w.latency(s, d), l, "{name}: {s} -> {d}");
                        declared += usize::from(s != d);
                    }
                }
            }
            let links = w.links();
            let copies = w.ids.total_channels() as usize;
            assert_eq!(links.len(), declared + copies, "{name}");
            for l in &links[..declared] {
                let (s, d) = (l.src.0, l.dst.0);
                assert_eq!(w.declared(s, d), Some(l.latency), "{name}: {s} -> {d}");
            }
        }
    }

    /// Runs `workload` on `config` on this thread by conservative windows (as the engine
    /// does); returns the wiring and every `(source, destination)` a packet went between.
    fn pairs_of_run(
        config: &str,
        workload: &str,
        params: &[(&str, &str)],
    ) -> (Wiring, std::collections::BTreeSet<(u32, u32)>) {
        use tessera_interconnect::{Outbox, Partition};
        let cfg = load(config);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.tst");
        let p: Vec<(String, String)> = params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        tessera_frontend::workloads::generate(workload, &p, 80, &path)
            .unwrap_or_else(|e| panic!("{workload}: {e}"));
        let trace = tessera_traces::TraceFile::open(&path).unwrap();
        let sys = crate::gpu::build(&cfg, &trace).unwrap_or_else(|e| panic!("{e}"));
        let owner: std::collections::HashMap<u32, usize> =
            sys.ports.iter().map(|&(p, i)| (p.0, i)).collect();
        let lookahead = sys
            .links
            .iter()
            .filter(|l| owner[&l.src.0] != owner[&l.dst.0])
            .map(|l| l.latency)
            .min()
            .unwrap_or(u64::MAX / 4);
        let mut parts = sys.partitions;
        let mut out = Outbox::new();
        while let Some(t) = parts.iter().filter_map(|p| p.next_event_time()).min() {
            let end = t.saturating_add(lookahead);
            let mut msgs = Vec::new();
            for p in &mut parts {
                p.run_until(end, &mut out).unwrap_or_else(|e| panic!("{e}"));
                msgs.extend(out.drain());
            }
            for m in msgs {
                let dst = owner[&m.dst_port.0];
                parts[dst]
                    .deliver(std::slice::from_ref(&m))
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        let pairs = parts.iter().flat_map(|p| p.sent_pairs().iter().copied());
        (Wiring::from_config(&cfg), pairs.collect())
    }

    /// Every pair of units that exchange a packet in real runs (chiplets behind a switch,
    /// private L2s and their flushes, several GPUs with host copies and peer accesses) is
    /// declared, and the lookahead's links hold each such connection with the least
    /// latency a packet on it takes.
    #[test]
    fn every_packet_of_real_runs_travels_on_a_declared_connection() {
        for (config, workload, params) in [
            ("a100-4chiplet.yaml", "vectoradd", &[("n", "20000")][..]),
            ("radeon7-2chiplet.yaml", "reduce", &[("n", "16384")][..]),
            (
                "a100-4chiplet.yaml+ports",
                "vectoradd",
                &[("n", "20000")][..],
            ),
            (
                "radeon7-2chiplet.yaml+ports",
                "reduce",
                &[("n", "16384")][..],
            ),
            (
                "dgx-8gpu.yaml",
                "halo",
                &[("gpus", "8"), ("rows", "16")][..],
            ),
        ] {
            let (w, pairs) = pairs_of_run(config, workload, params);
            assert!(pairs.len() > 10, "{config}: {} pairs", pairs.len());
            let links: std::collections::HashMap<(u32, u32), Picos> =
                w.links().iter().fold(Default::default(), |mut m, l| {
                    let e = m.entry((l.src.0, l.dst.0)).or_insert(Picos::MAX);
                    *e = (*e).min(l.latency);
                    m
                });
            let ids = w.ids;
            let channel = |u: u32| matches!(ids.unit(u), Some(crate::mem::Unit::Channel(_)));
            let link = |u: u32| matches!(ids.unit(u), Some(crate::mem::Unit::Link(_)));
            for (src, dst) in pairs {
                if src == dst {
                    // A link interface's switch ports down to it, or a private L2 slice
                    // to the LLC slice of its own channel unit.
                    assert!(
                        link(src) || w.declared(src, dst).is_some(),
                        "{config}: unit {src} to itself"
                    );
                    continue;
                }
                let host_copy = src == UnitIds::CP && channel(dst);
                let least = match w.declared(src, dst) {
                    Some(l) if host_copy => l.min(w.port_latency(Port::HostCopy)),
                    Some(l) => l,
                    None if host_copy => w.port_latency(Port::HostCopy),
                    None => panic!("{config}: a packet from {src} to {dst}, not declared"),
                };
                assert_eq!(
                    links.get(&(src, dst)),
                    Some(&least),
                    "{config}: {src} -> {dst}"
                );
            }
        }
    }

    /// Each connection declares its bandwidth and the depth at its far end from the
    /// configuration's keys, and the units that model them read them here: an SM's
    /// crossbar input (`noc.input_buffer_flits`), a slice's request queue
    /// (`l2.request_queue_packets`) and reply queue (`l2.reply_queue_packets`), a package link's buffer (`package.link.buffer_bytes`);
    /// control connections carry no bandwidth; without the crossbar the NoC's connections
    /// run SM to channel, unbounded.
    #[test]
    fn connections_declare_bandwidth_and_depth() {
        let p =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/a100-4chiplet.yaml");
        let sets = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let cfg = GpuConfig::load(
            &p,
            &sets(&[
                ("l2.request_queue_packets", "8"),
                ("l2.reply_queue_packets", "6"),
                ("package.link.noc_queue_packets", "5"),
                ("package.link.buffer_bytes", "4096"),
            ]),
        )
        .expect("a100-4chiplet.yaml loads");
        let w = Wiring::from_config(&cfg);
        let ids = *w.ids();
        let (sm, ch, xbar, cp) = (ids.sm(0), ids.channel(0), ids.xbar(0), ids.cp(0));
        let noc = Some(Bandwidth {
            bytes_per_cycle: cfg.noc.bandwidth_bytes_per_cycle as u64,
            clock_hz: cfg.noc.clock_hz,
        });
        let c = w.connection(sm, xbar).expect("SM to crossbar");
        assert_eq!(
            (c.bandwidth, c.depth),
            (noc, Depth::Flits(cfg.noc.input_buffer_flits as u64))
        );
        let c = w.connection(xbar, ch).expect("crossbar to channel");
        assert_eq!((c.bandwidth, c.depth), (noc, Depth::Packets(8)));
        assert_eq!(
            w.connection(xbar, sm).map(|c| c.depth),
            Some(Depth::Unbounded)
        );
        assert_eq!(
            w.connection(ch, xbar).map(|c| c.depth),
            Some(Depth::Packets(6))
        );
        assert_eq!(
            w.connection(ids.link(0), xbar).map(|c| c.depth),
            Some(Depth::Flits(cfg.noc.input_buffer_flits as u64))
        );
        assert_eq!(
            w.connection(xbar, ids.link(0)).map(|c| c.depth),
            Some(Depth::Packets(5))
        );
        let c = w
            .connection(ids.link(0), ids.link(1))
            .expect("package link");
        let link = Some(Bandwidth {
            bytes_per_cycle: cfg.package.link.bandwidth_bytes_per_cycle as u64,
            clock_hz: cfg.package.link.clock_hz,
        });
        assert_eq!((c.bandwidth, c.depth), (link, Depth::Bytes(4096)));
        assert_eq!(w.link_spec().1, 4096);
        assert_eq!(w.connection(cp, sm).map(|c| c.bandwidth), Some(None));
        assert_eq!(w.connection(sm, ch), None, "through the crossbar only");
        // The ports model: SM to channel directly, no credits anywhere on the NoC.
        let mut s = sets(&[("l2.request_queue_packets", "8")]);
        s.push(("noc.model".to_string(), "ports".to_string()));
        let w = Wiring::from_config(&GpuConfig::load(&p, &s).expect("loads"));
        let c = w.connection(sm, ch).expect("SM to channel");
        assert_eq!((c.bandwidth, c.depth), (noc, Depth::Unbounded));
        assert_eq!(
            (
                w.sm_input_flits(),
                w.slice_queue_packets(),
                w.slice_reply_packets()
            ),
            (0, 0, 0)
        );
    }
}
