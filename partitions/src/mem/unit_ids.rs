//! Unit numbering: the ids of the units of the system, which are also their port ids.

use crate::config::GpuConfig;

/// The ids of the units of the system, which are also their port ids (stable: they name
/// the unit in the modeled system, never the partition that hosts it). The chiplets are
/// numbered across the system: chiplet `k` is chiplet `k % gpu_chiplets` of GPU `k /
/// gpu_chiplets` (with one GPU, the package's chiplets). Chiplet `k` owns a block of
/// [`UnitIds::per_chiplet`] ids starting at `k * per_chiplet`: its command processor first,
/// then its SMs, then its DRAM channels (each with its L2 slices), then, when the system
/// has several chiplets, its link interface. With one chiplet: the CP is 0, SM `s` is `1 +
/// s`, channel `c` is `1 + sm_count + c`. SMs and channels are numbered across the system:
/// SM `s` is on chiplet `s / sms`, channel `c` on chiplet `c / channels`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnitIds {
    /// SMs per chiplet.
    pub sms: u32,
    /// DRAM channels per chiplet.
    pub channels: u32,
    /// Chiplets in the system (`chiplets * system.gpus`).
    pub chiplets: u32,
    /// Chiplets per GPU (`chiplets`).
    pub gpu_chiplets: u32,
    /// Each chiplet has a crossbar unit, the last of its block (`noc.model: crossbar`).
    pub xbar: bool,
}

/// What a unit id names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// The command processor of a chiplet (chiplet 0's of each GPU also hosts that GPU's
    /// global CP, and chiplet 0's of GPU 0 the host).
    Cp(u32),
    /// An SM (system-wide index).
    Sm(u32),
    /// A DRAM channel with its L2 slices (system-wide index).
    Channel(u32),
    /// The link interface of a chiplet.
    Link(u32),
    /// The NoC crossbar of a chiplet (`noc.model: crossbar`).
    Xbar(u32),
}

impl UnitIds {
    pub fn new(cfg: &GpuConfig) -> UnitIds {
        let gpu_chiplets = cfg.chiplets.max(1);
        UnitIds {
            sms: cfg.core.sm_count.max(1),
            channels: cfg.dram.channels.max(1),
            chiplets: gpu_chiplets * cfg.system.gpus.max(1),
            gpu_chiplets,
            xbar: cfg.noc.model == crate::mem::noc::NocModel::Crossbar,
        }
    }
    /// The command processor of chiplet 0 (host, GPU 0's global CP, chiplet 0's local CP).
    pub const CP: u32 = 0;
    /// Ids per chiplet.
    pub fn per_chiplet(&self) -> u32 {
        1 + self.sms + self.channels + u32::from(self.chiplets > 1) + u32::from(self.xbar)
    }
    /// The crossbar of chiplet `k` (only with `noc.model: crossbar`).
    pub fn xbar(&self, k: u32) -> u32 {
        (k + 1) * self.per_chiplet() - 1
    }
    /// The command processor of chiplet `k`.
    pub fn cp(&self, k: u32) -> u32 {
        k * self.per_chiplet()
    }
    /// SM `s` (system-wide).
    #[inline]
    pub fn sm(&self, s: u32) -> u32 {
        // One chiplet (the common case, and these run for every packet): no divisions.
        if self.chiplets == 1 {
            return 1 + s;
        }
        (s / self.sms) * self.per_chiplet() + 1 + s % self.sms
    }
    /// Channel `c` (system-wide).
    #[inline]
    pub fn channel(&self, c: u32) -> u32 {
        if self.chiplets == 1 {
            return 1 + self.sms + c;
        }
        (c / self.channels) * self.per_chiplet() + 1 + self.sms + c % self.channels
    }
    /// The chiplet (system-wide) of channel `c` (system-wide).
    #[inline]
    pub fn chiplet_of_channel(&self, c: u32) -> u32 {
        if self.chiplets == 1 {
            return 0;
        }
        c / self.channels
    }
    /// The link interface of chiplet `k` (only with several chiplets in the system).
    pub fn link(&self, k: u32) -> u32 {
        k * self.per_chiplet() + 1 + self.sms + self.channels
    }
    /// Where a packet on chiplet `chiplet` for unit `dst` goes over its NoC: `dst` itself on
    /// that chiplet, else the chiplet's link interface.
    #[inline(always)]
    pub fn toward(&self, chiplet: u32, dst: u32) -> u32 {
        if self.chiplet_of(dst) == chiplet {
            dst
        } else {
            self.link(chiplet)
        }
    }
    /// SMs in the system.
    pub fn total_sms(&self) -> u32 {
        self.sms * self.chiplets
    }
    /// DRAM channels in the system.
    pub fn total_channels(&self) -> u32 {
        self.channels * self.chiplets
    }
    /// Number of units.
    pub fn count(&self) -> u32 {
        self.chiplets * self.per_chiplet()
    }
    /// GPUs in the system.
    pub fn gpus(&self) -> u32 {
        self.chiplets / self.gpu_chiplets
    }
    /// The GPU of chiplet `k` (system-wide index).
    pub fn gpu_of_chiplet(&self, k: u32) -> u32 {
        k / self.gpu_chiplets
    }
    /// The first chiplet (system-wide) of GPU `g`: the one whose CP unit hosts the GPU's
    /// global CP.
    pub fn gpu_first_chiplet(&self, g: u32) -> u32 {
        g * self.gpu_chiplets
    }
    /// What unit `id` is (`None` when out of range).
    pub fn unit(&self, id: u32) -> Option<Unit> {
        if id >= self.count() {
            return None;
        }
        let per = self.per_chiplet();
        let (k, r) = (id / per, id % per);
        Some(if r == 0 {
            Unit::Cp(k)
        } else if r <= self.sms {
            Unit::Sm(k * self.sms + r - 1)
        } else if r <= self.sms + self.channels {
            Unit::Channel(k * self.channels + r - 1 - self.sms)
        } else if self.xbar && r == per - 1 {
            Unit::Xbar(k)
        } else {
            Unit::Link(k)
        })
    }
    /// The chiplet of unit `id`.
    #[inline]
    pub fn chiplet_of(&self, id: u32) -> u32 {
        if self.chiplets == 1 {
            return 0;
        }
        id / self.per_chiplet()
    }
}

#[cfg(test)]
mod tests {
    use super::{Unit, UnitIds};

    /// Unit ids round-trip through `UnitIds::unit` and name the right chiplet, with the
    /// one-chiplet shortcuts (no divisions) and without them (4 chiplets, 2 GPUs).
    #[test]
    fn unit_ids_round_trip_with_one_chiplet_or_several() {
        for (chiplets, gpus, xbar) in [
            (1, 1, false),
            (4, 1, false),
            (2, 2, false),
            (1, 1, true),
            (2, 2, true),
        ] {
            let ids = UnitIds {
                sms: 7,
                channels: 3,
                chiplets: chiplets * gpus,
                gpu_chiplets: chiplets,
                xbar,
            };
            for k in 0..ids.chiplets {
                if xbar {
                    assert_eq!(ids.unit(ids.xbar(k)), Some(Unit::Xbar(k)));
                    assert_eq!(ids.chiplet_of(ids.xbar(k)), k);
                }
                if ids.chiplets > 1 {
                    assert_eq!(ids.unit(ids.link(k)), Some(Unit::Link(k)));
                }
            }
            for s in 0..ids.total_sms() {
                assert_eq!(ids.unit(ids.sm(s)), Some(Unit::Sm(s)));
                assert_eq!(ids.chiplet_of(ids.sm(s)), s / ids.sms);
            }
            for c in 0..ids.total_channels() {
                assert_eq!(ids.unit(ids.channel(c)), Some(Unit::Channel(c)));
                assert_eq!(ids.chiplet_of(ids.channel(c)), c / ids.channels);
                assert_eq!(ids.chiplet_of_channel(c), c / ids.channels);
            }
        }
    }
}
