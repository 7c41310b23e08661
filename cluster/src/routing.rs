//! Port → partition routing and the lookahead computed from the modeled links.

use tessera_interconnect::{Link, Picos, PortId};

use crate::EngineError;

/// Which partition hosts each port, given at construction (from the config and the chosen
/// partitioning). The engine routes a message by its `dst_port`; [`Routing::lookahead`]
/// also looks up sending ports. Lookups are a table index when port ids are dense enough,
/// a binary search otherwise; both are allocation-free.
#[derive(Clone, Debug)]
pub struct Routing {
    partitions: usize,
    /// Sorted by port, unique.
    sorted: Vec<(PortId, u32)>,
    /// `dense[port] = partition`, `NONE` where absent; empty when ids are too sparse.
    dense: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl Routing {
    /// A table over `partitions` partitions from `(port, partition)` pairs. A port listed
    /// twice or a partition index out of range is an error.
    pub fn new(
        partitions: usize,
        entries: impl IntoIterator<Item = (PortId, usize)>,
    ) -> Result<Routing, EngineError> {
        if partitions == 0 {
            return Err(EngineError::NoPartitions);
        }
        let mut sorted = Vec::new();
        for (port, part) in entries {
            if part >= partitions {
                return Err(EngineError::PartitionOutOfRange {
                    port,
                    partition: part,
                    partitions,
                });
            }
            // `partitions` fits in u32 in any sane system; a larger index cannot be stored.
            let p = u32::try_from(part).ok().filter(|&p| p != NONE).ok_or(
                EngineError::PartitionOutOfRange {
                    port,
                    partition: part,
                    partitions,
                },
            )?;
            sorted.push((port, p));
        }
        sorted.sort_unstable();
        for w in sorted.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(EngineError::DuplicatePort { port: w[0].0 });
            }
        }
        let mut dense = Vec::new();
        if let Some(&(max, _)) = sorted.last() {
            let span = max.0 as usize + 1;
            if span <= 4 * sorted.len() + 4096 {
                dense = vec![NONE; span];
                for &(port, p) in &sorted {
                    dense[port.0 as usize] = p;
                }
            }
        }
        Ok(Routing {
            partitions,
            sorted,
            dense,
        })
    }

    /// Number of partitions in the whole system.
    pub fn partition_count(&self) -> usize {
        self.partitions
    }

    /// The partition hosting `port`, if the table has it.
    #[inline]
    pub fn partition_of(&self, port: PortId) -> Option<usize> {
        if !self.dense.is_empty() {
            return match self.dense.get(port.0 as usize) {
                Some(&p) if p != NONE => Some(p as usize),
                _ => None,
            };
        }
        self.sorted
            .binary_search_by_key(&port, |&(q, _)| q)
            .ok()
            .map(|i| self.sorted[i].1 as usize)
    }

    /// The lookahead `L` of DESIGN.md section 4 for this partitioning: the minimum latency
    /// of the links whose two ends are hosted by different partitions, or `None` when no
    /// link crosses partitions (one partition: any `L` is exact, and [`Picos::MAX`] runs
    /// the whole simulation as one window). A crossing link of zero latency is an error
    /// naming it (nothing could run ahead of it); so is a link end missing from the table.
    pub fn lookahead(
        &self,
        links: impl IntoIterator<Item = Link>,
    ) -> Result<Option<Picos>, EngineError> {
        let mut l: Option<Picos> = None;
        for link in links {
            if self.crossing(&link)?.is_some() {
                l = Some(l.map_or(link.latency, |x| x.min(link.latency)));
            }
        }
        Ok(l)
    }

    /// The partitions `(from, to)` that `link` joins when it crosses partitions (`None`
    /// inside one); a crossing link of zero latency, or an end missing from the table, is
    /// an error naming it.
    fn crossing(&self, link: &Link) -> Result<Option<(usize, usize)>, EngineError> {
        let a = self
            .partition_of(link.src)
            .ok_or(EngineError::UnroutedPort { port: link.src })?;
        let b = self
            .partition_of(link.dst)
            .ok_or(EngineError::UnroutedPort { port: link.dst })?;
        if a == b {
            return Ok(None);
        }
        if link.latency == 0 {
            return Err(EngineError::ZeroLatencyLink {
                src: link.src,
                dst: link.dst,
            });
        }
        Ok(Some((a, b)))
    }
}

/// The lookahead per partition pair (DESIGN.md section 4, issue 23): `D(q, p)`, the
/// least time anything partition `q` does can take to reach partition `p`, the shortest
/// path over the links that cross partitions (an indirect path through a third partition
/// that is faster than any direct link counts; moving inside a partition is taken as
/// free, which only makes `D` smaller, so never unsafe). [`Picos::MAX`] where no path
/// exists. The engine's per-pair windows run on it ([`crate::Lookahead::Pairs`]); the
/// global windows on [`Routing::lookahead`], the least `D(q, p)` over `q != p`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairLookahead {
    n: usize,
    /// `d[q * n + p]`.
    d: Vec<Picos>,
    /// The least latency of a direct crossing link, `direct[q * n + p]`.
    direct: Vec<Picos>,
}

impl PairLookahead {
    /// `D(q, p)` (`Picos::MAX` for no path; out of range: `Picos::MAX`). `D(p, p)` is
    /// the shortest cycle from `p` back to itself through other partitions: how soon
    /// what `p` sends can come back to it.
    pub fn get(&self, q: usize, p: usize) -> Picos {
        if q >= self.n || p >= self.n {
            return Picos::MAX;
        }
        self.d[q * self.n + p]
    }

    /// The least latency of a link from `q` straight to `p` (`Picos::MAX`: none).
    pub fn direct(&self, q: usize, p: usize) -> Picos {
        if q >= self.n || p >= self.n {
            return Picos::MAX;
        }
        self.direct[q * self.n + p]
    }

    /// Number of partitions.
    pub fn partition_count(&self) -> usize {
        self.n
    }

    /// The least `D(q, p)` over `q != p`: the global lookahead.
    pub fn min(&self) -> Option<Picos> {
        (0..self.n)
            .flat_map(|q| (0..self.n).filter(move |&p| p != q).map(move |p| (q, p)))
            .map(|(q, p)| self.get(q, p))
            .filter(|&d| d != Picos::MAX)
            .min()
    }
}

impl Routing {
    /// [`PairLookahead`] for this partitioning from the modelled `links` (the same errors
    /// as [`Routing::lookahead`]): the least crossing latency per ordered pair, closed
    /// over paths (Floyd and Warshall, `O(partitions^3)`, once per run).
    pub fn pair_lookahead(
        &self,
        links: impl IntoIterator<Item = Link>,
    ) -> Result<PairLookahead, EngineError> {
        let n = self.partitions;
        let mut d = vec![Picos::MAX; n * n];
        for link in links {
            if let Some((a, b)) = self.crossing(&link)? {
                let e = &mut d[a * n + b];
                *e = (*e).min(link.latency);
            }
        }
        let direct = d.clone();
        close_paths(&mut d, n);
        Ok(PairLookahead { n, d, direct })
    }
}

/// Closes `d` (`n x n`, `d[q * n + p]` the least latency from `q` to `p`, `Picos::MAX`
/// for none) over paths (Floyd and Warshall, `O(n^3)`). With no link from a node to
/// itself the diagonal starts at infinity, and the closure leaves the shortest cycle
/// through each node there.
pub(crate) fn close_paths(d: &mut [Picos], n: usize) {
    for k in 0..n {
        for q in 0..n {
            let qk = d[q * n + k];
            if qk == Picos::MAX {
                continue;
            }
            for p in 0..n {
                let kp = d[k * n + p];
                if kp == Picos::MAX {
                    continue;
                }
                let e = &mut d[q * n + p];
                *e = (*e).min(qk.saturating_add(kp));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(s: u32, d: u32, latency: Picos) -> Link {
        Link {
            src: PortId(s),
            dst: PortId(d),
            latency,
        }
    }

    #[test]
    fn pair_lookahead_takes_the_shortest_path_over_crossing_links() {
        // Four partitions of one port each. A ring 0 -> 1 -> 2 -> 3 -> 0 of 100 ps links,
        // and a direct 0 -> 2 link of 500 ps that the ring (200 ps through partition 1)
        // beats; 2 -> 0 has no direct link: 3 -> 0 after 2 -> 3, 200 ps.
        let r = Routing::new(4, (0..4).map(|p| (PortId(p), p as usize))).unwrap();
        let links = [
            link(0, 1, 100),
            link(1, 2, 100),
            link(2, 3, 100),
            link(3, 0, 100),
            link(0, 2, 500),
        ];
        let d = r.pair_lookahead(links).unwrap();
        assert_eq!(d.get(0, 1), 100);
        assert_eq!(d.get(0, 2), 200, "the indirect path is the shorter");
        assert_eq!(d.get(2, 0), 200);
        assert_eq!(d.get(1, 0), 300);
        assert_eq!(d.get(0, 0), 400, "around the ring");
        // The global lookahead is the least pair, as `lookahead` computes it.
        assert_eq!(d.min(), r.lookahead(links).unwrap());
        // A switch: every partition reaches every other through partition 0 (the switch)
        // in two 50 ps hops, while a direct 1 -> 2 link takes 150 ps.
        let links = [
            link(1, 0, 50),
            link(0, 1, 50),
            link(2, 0, 50),
            link(0, 2, 50),
            link(3, 0, 50),
            link(0, 3, 50),
            link(1, 2, 150),
        ];
        let d = r.pair_lookahead(links).unwrap();
        assert_eq!((d.get(1, 2), d.get(2, 3), d.get(3, 1)), (100, 100, 100));
        // Unconnected partitions never bound each other; errors as `lookahead`'s.
        let d = r.pair_lookahead([link(0, 1, 10)]).unwrap();
        assert_eq!((d.get(1, 0), d.get(0, 3)), (Picos::MAX, Picos::MAX));
        assert_eq!(d.get(0, 0), Picos::MAX, "no way back");
        assert!(matches!(
            r.pair_lookahead([link(2, 1, 0)]).unwrap_err(),
            EngineError::ZeroLatencyLink { .. }
        ));
        assert!(matches!(
            r.pair_lookahead([link(2, 9, 10)]).unwrap_err(),
            EngineError::UnroutedPort { port: PortId(9) }
        ));
    }

    #[test]
    fn dense_and_sparse_lookups_agree() {
        let entries = [(PortId(3), 1), (PortId(0), 0), (PortId(17), 2)];
        let dense = Routing::new(3, entries).unwrap();
        assert!(!dense.dense.is_empty());
        let sparse = Routing::new(3, [(PortId(3_000_000_000), 1), (PortId(0), 0)]).unwrap();
        assert!(sparse.dense.is_empty());
        assert_eq!(dense.partition_of(PortId(3)), Some(1));
        assert_eq!(dense.partition_of(PortId(17)), Some(2));
        assert_eq!(dense.partition_of(PortId(4)), None);
        assert_eq!(dense.partition_of(PortId(1000)), None);
        assert_eq!(sparse.partition_of(PortId(3_000_000_000)), Some(1));
        assert_eq!(sparse.partition_of(PortId(0)), Some(0));
        assert_eq!(sparse.partition_of(PortId(1)), None);
    }

    #[test]
    fn bad_tables_are_errors() {
        let e = Routing::new(2, [(PortId(5), 0), (PortId(5), 1)]).unwrap_err();
        assert!(e.to_string().contains("port 5"), "{e}");
        let e = Routing::new(2, [(PortId(6), 2)]).unwrap_err();
        assert!(e.to_string().contains("port 6"), "{e}");
        assert!(matches!(
            Routing::new(0, []).unwrap_err(),
            EngineError::NoPartitions
        ));
    }

    #[test]
    fn lookahead_is_the_minimum_crossing_latency() {
        let r = Routing::new(2, [(PortId(0), 0), (PortId(1), 0), (PortId(2), 1)]).unwrap();
        let link = |s, d, latency| Link {
            src: PortId(s),
            dst: PortId(d),
            latency,
        };
        // 0 -> 1 stays inside partition 0: its 0 ps latency does not matter here.
        let links = [link(0, 1, 0), link(1, 2, 700), link(2, 0, 500)];
        assert_eq!(r.lookahead(links).unwrap(), Some(500));
        assert_eq!(r.lookahead([link(0, 1, 10)]).unwrap(), None);
        let e = r.lookahead([link(2, 1, 0)]).unwrap_err();
        assert!(matches!(
            e,
            EngineError::ZeroLatencyLink {
                src: PortId(2),
                dst: PortId(1)
            }
        ));
        assert!(e.to_string().contains("port 2"), "{e}");
        assert!(matches!(
            r.lookahead([link(2, 9, 10)]).unwrap_err(),
            EngineError::UnroutedPort { port: PortId(9) }
        ));
    }
}
