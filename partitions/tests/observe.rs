//! Observers see every event the counters count: on small runs of the memory-side and
//! private L2 chiplet presets, the sums over an observer's events equal the stats, and
//! attaching one leaves the stats unchanged.

mod common;

use common::{preset, run_observed};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tessera_partitions::gpu::collect_stats;
use tessera_partitions::observe::{
    BarrierEvent, CtaEvent, IssueEvent, LinkPacket, MemAccess, MemLevel, Observer,
};
use tessera_partitions::stats::RunStats;
use tessera_traces::TraceFile;

/// Sums over the events seen.
#[derive(Default, Debug)]
struct Sums {
    issues: u64,
    barriers: u64,
    ctas_started: u64,
    ctas_done: u64,
    /// By level: `(sectors, hits, write sectors)`.
    mem: HashMap<MemLevel, (u64, u64, u64)>,
    link_packets: u64,
    link_bytes: u64,
    /// Units that reported issues (SMs).
    issuing_units: Vec<u32>,
}

#[derive(Default)]
struct Tally(Mutex<Sums>);

impl Tally {
    fn with(&self, f: impl FnOnce(&mut Sums)) {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

impl Observer for Tally {
    fn issue(&self, unit: u32, _: &IssueEvent) {
        self.with(|s| {
            s.issues += 1;
            if !s.issuing_units.contains(&unit) {
                s.issuing_units.push(unit);
            }
        });
    }
    fn barrier(&self, _: u32, _: &BarrierEvent) {
        self.with(|s| s.barriers += 1);
    }
    fn cta(&self, _: u32, e: &CtaEvent) {
        self.with(|s| match e.done {
            false => s.ctas_started += 1,
            true => s.ctas_done += 1,
        });
    }
    fn mem_access(&self, _: u32, e: &MemAccess) {
        self.with(|s| {
            let m = s.mem.entry(e.level).or_default();
            m.0 += e.sectors as u64;
            m.1 += e.hits as u64;
            if e.write {
                m.2 += e.sectors as u64;
            }
        });
    }
    fn link_packet(&self, _: u32, e: &LinkPacket) {
        self.with(|s| {
            s.link_packets += 1;
            s.link_bytes += e.bytes;
        });
    }
}

/// Runs `workload` on `config`, without and with an observer: the stats of both, and the
/// observer's sums.
fn run(config: &str, workload: &str, params: &[(&str, &str)]) -> (RunStats, RunStats, Sums) {
    let cfg = preset(config, &[]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.tst");
    let p: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tessera_frontend::workloads::generate(workload, &p, 80, &path)
        .unwrap_or_else(|e| panic!("{workload}: {e}"));
    let trace = TraceFile::open(&path).unwrap();
    let plain = collect_stats(&cfg, run_observed(&cfg, &trace, None));
    let tally = Arc::new(Tally::default());
    let observed = collect_stats(&cfg, run_observed(&cfg, &trace, Some(tally.clone())));
    let sums = std::mem::take(&mut *tally.0.lock().unwrap());
    (plain, observed, sums)
}

fn check(s: &RunStats, e: &Sums) {
    let t = &s.totals;
    assert_eq!(e.issues, t.warp_insts);
    assert_eq!(e.ctas_started, t.ctas);
    assert_eq!(e.ctas_done, t.ctas);
    let barriers: u64 = s.chiplets.iter().map(|c| c.barriers).sum();
    assert_eq!(e.barriers, barriers);
    let level = |l| e.mem.get(&l).copied().unwrap_or_default();
    let (acc, hits, _) = level(MemLevel::L1d);
    assert_eq!((acc, hits), (t.l1d_accesses, t.l1d_hits), "L1D");
    let (acc, hits, _) = level(MemLevel::L2);
    assert_eq!((acc, hits), (t.l2_accesses, t.l2_hits), "L2");
    let (acc, hits, _) = level(MemLevel::Llc);
    assert_eq!((acc, hits), (t.llc_accesses, t.llc_hits), "LLC");
    let (acc, _, writes) = level(MemLevel::Dram);
    assert_eq!(
        (acc - writes, writes),
        (t.dram_reads, t.dram_writes),
        "DRAM"
    );
    let packets: u64 = s.links.iter().map(|l| l.packets).sum();
    let bytes: u64 = s.links.iter().map(|l| l.bytes).sum();
    assert_eq!((e.link_packets, e.link_bytes), (packets, bytes), "links");
}

/// Memory-side L2 on 4 chiplets behind a switch: L1D, L2, DRAM and link events.
#[test]
fn events_add_up_to_the_counters_memory_side_l2() {
    let (plain, observed, e) = run("a100-4chiplet.yaml", "vectoradd", &[("n", "20000")]);
    assert_eq!(plain, observed, "an observer changes no result");
    check(&observed, &e);
    assert!(observed.totals.l2_hits > 0 && e.link_packets > 0);
    assert!(e.issuing_units.len() > 1);
}

/// Private L2 slices with LLC slices on 2 chiplets: LLC events too, and barriers.
#[test]
fn events_add_up_to_the_counters_private_l2() {
    let (plain, observed, e) = run("radeon7-2chiplet.yaml", "reduce", &[("n", "16384")]);
    assert_eq!(plain, observed, "an observer changes no result");
    check(&observed, &e);
    assert!(observed.totals.llc_accesses > 0 && e.barriers > 0);
}
