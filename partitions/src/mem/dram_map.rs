//! The DRAM address map: which channel holds an address, and where inside it.

use super::fastdiv::Divisor;
use crate::config::GpuConfig;

/// The DRAM address map (module documentation).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DramMap {
    pub(crate) channels: Divisor,
    pub(crate) interleave: Divisor,
}

impl DramMap {
    pub(crate) fn from_config(cfg: &GpuConfig) -> DramMap {
        DramMap {
            channels: Divisor::new(cfg.dram.channels as u64),
            interleave: Divisor::new(cfg.dram.interleave_bytes as u64),
        }
    }

    /// `(channel, channel-local address)` of `addr`.
    #[inline(always)]
    pub(crate) fn map(&self, addr: u64) -> (u32, u64) {
        let chunk = self.interleave.div(addr);
        (
            self.channels.rem(chunk) as u32,
            self.channels.div(chunk) * self.interleave.d + self.interleave.rem(addr),
        )
    }
}
