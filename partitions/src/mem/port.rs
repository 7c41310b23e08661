//! Bandwidth-limited resources are [`BwPort`] calendars (DESIGN.md section 3), the one
//! implementation of exact bandwidth, in `tessera-interconnect` beside the links that
//! serialize with it.

pub(crate) use tessera_interconnect::BwPort;
