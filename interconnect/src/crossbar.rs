//! An input-queued crossbar: the on-chip network between a chiplet's SMs and its L2 slices
//! as a unit of its own (DESIGN.md section 5, "a NoC is an egress queue, a latency, and an
//! arbiter at the receiver"; issue 22 item 2). The GPU model's `noc.model: crossbar` runs
//! two of them per chiplet (`partitions/src/mem/crossbar.rs`).
//!
//! Each input port has a FIFO of at most `input_depth` packets; a sender holds one credit
//! per free slot and offers a packet only with a credit ([`Crossbar::offer`] refuses
//! otherwise, and counts the refusal). Every cycle each free output grants one of the inputs
//! whose *head* packet is for it, and each input is granted at most once (it has one head):
//! a packet behind a blocked head waits even if its own output is free (head-of-line
//! blocking). A granted packet of `flits` flits holds its output and its input for that
//! many cycles.
//!
//! Arbitration is round robin from a start that is a function of the output and the cycle
//! only (`(output + cycle) % inputs`), never of the partition, thread or order of calls, so
//! the crossbar gives the same grants wherever it is simulated.
//!
//! Under saturated uniform random traffic an input-queued crossbar with FIFO inputs passes
//! about `2 - sqrt(2)` (58.6%) of its peak as the port count grows: Karol, Hluchyj and
//! Morgan, "Input Versus Output Queueing on a Space-Division Packet Switch", IEEE Trans.
//! Commun. 35(12), 1987, Table I (0.75 for 2 ports, 0.6553 for 4, 0.6184 for 8); Lin's
//! thesis cites it for GPU crossbars (section 3.2.2). The tests below check those figures.

use std::collections::VecDeque;

/// The shape of a crossbar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrossbarSpec {
    pub inputs: u32,
    pub outputs: u32,
    /// Packets each input FIFO holds (the credits of its sender).
    pub input_depth: u32,
}

/// Counters of a crossbar (integers; ratios are computed by whoever prints them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrossbarStats {
    /// Packets and flits granted.
    pub packets: u64,
    pub flits: u64,
    /// Offers refused for want of a credit (a full input FIFO).
    pub no_credit: u64,
    /// Input-cycles with a head packet that was not granted (its output busy or given to
    /// another input).
    pub head_blocked: u64,
    /// The most packets any input FIFO held.
    pub max_occupancy: u32,
    /// Cycles the granted packets waited at their inputs, from the cycle they were offered
    /// to the cycle they were granted, summed.
    pub wait_cycles: u64,
    /// Times an output spent its last credit (the buffer behind it filled up), after which
    /// it granted nothing until a credit came back.
    pub output_full: u64,
}

/// The credits outputs hold for the buffers behind them ([`Crossbar::set_output_credits`]):
/// an output without credit is parked, its free time set to never (so the grants and the
/// ready cycle need no other test) and its real one kept here.
#[derive(Debug)]
pub(crate) struct OutputCredits {
    /// By output (`u32::MAX`: unbounded).
    credits: Vec<u32>,
    parked_free_at: Vec<u64>,
}

impl OutputCredits {
    pub(crate) fn new(outputs: usize) -> OutputCredits {
        OutputCredits {
            credits: vec![u32::MAX; outputs],
            parked_free_at: vec![0; outputs],
        }
    }

    pub(crate) fn set(&mut self, o: usize, credits: u32, free_at: &mut u64) {
        if self.credits[o] == 0 {
            *free_at = self.parked_free_at[o];
        }
        self.credits[o] = credits;
        if credits == 0 {
            self.parked_free_at[o] = *free_at;
            *free_at = u64::MAX;
        }
    }

    /// Output `o` granted a packet (`free_at`: its new free time): one credit spent, and
    /// without any left it is parked.
    #[inline]
    pub(crate) fn spend(&mut self, o: usize, free_at: &mut u64, stats: &mut CrossbarStats) {
        let c = &mut self.credits[o];
        if *c == u32::MAX {
            return;
        }
        *c -= 1;
        if *c == 0 {
            self.parked_free_at[o] = *free_at;
            *free_at = u64::MAX;
            stats.output_full += 1;
        }
    }

    /// `n` credits come back to output `o`; true when that unparks it.
    pub(crate) fn give(&mut self, o: usize, n: u32, free_at: &mut u64) -> bool {
        let c = &mut self.credits[o];
        if *c == u32::MAX || n == 0 {
            return false;
        }
        let was = *c;
        *c = c.saturating_add(n).min(u32::MAX - 1);
        if was == 0 {
            *free_at = self.parked_free_at[o];
            return true;
        }
        false
    }
}

/// A packet offered to a full input: the sender keeps it.
#[derive(Debug, PartialEq, Eq)]
pub struct NoCredit<P>(pub P);

#[derive(Debug)]
struct Queued<P> {
    output: u32,
    flits: u32,
    /// The cycle it was offered in.
    since: u64,
    pkt: P,
}

/// An input-queued crossbar carrying packets of type `P`.
#[derive(Debug)]
pub struct Crossbar<P> {
    spec: CrossbarSpec,
    inputs: Vec<VecDeque<Queued<P>>>,
    /// Per output, the first cycle at which it is free.
    free_at: Vec<u64>,
    /// Per input, the first cycle at which it is free (it sends one packet at a time).
    in_free_at: Vec<u64>,
    /// Per cycle: each output's winning input so far and its rank (scratch).
    winner: Vec<Option<(u64, u32)>>,
    out_credits: OutputCredits,
    /// The first cycle in which some head packet finds its input and output free
    /// (`u64::MAX`: every input is empty), kept as packets are offered and granted: the
    /// units ask for it far more often than anything changes.
    ready: u64,
    stats: CrossbarStats,
}

impl<P> Crossbar<P> {
    /// A crossbar of `spec` (at least one input, output and slot per input).
    pub fn new(spec: CrossbarSpec) -> Crossbar<P> {
        let spec = CrossbarSpec {
            inputs: spec.inputs.max(1),
            outputs: spec.outputs.max(1),
            input_depth: spec.input_depth.max(1),
        };
        Crossbar {
            inputs: (0..spec.inputs)
                .map(|_| VecDeque::with_capacity(spec.input_depth.min(64) as usize))
                .collect(),
            free_at: vec![0; spec.outputs as usize],
            in_free_at: vec![0; spec.inputs as usize],
            winner: vec![None; spec.outputs as usize],
            out_credits: OutputCredits::new(spec.outputs as usize),
            ready: u64::MAX,
            spec,
            stats: CrossbarStats::default(),
        }
    }

    pub fn spec(&self) -> &CrossbarSpec {
        &self.spec
    }

    pub fn stats(&self) -> &CrossbarStats {
        &self.stats
    }

    /// Output `output` holds `credits` credits for the buffer behind it (one per packet;
    /// `u32::MAX`: unbounded, as every output starts): it grants only while it has one,
    /// and gets them back by [`Crossbar::return_credits`].
    pub fn set_output_credits(&mut self, output: u32, credits: u32) {
        let o = (output % self.spec.outputs) as usize;
        self.out_credits.set(o, credits, &mut self.free_at[o]);
        self.ready = self.ready_from_scratch();
    }

    /// `n` credits come back to output `output` (its buffer passed packets on).
    pub fn return_credits(&mut self, output: u32, n: u32) {
        let o = (output % self.spec.outputs) as usize;
        if self.out_credits.give(o, n, &mut self.free_at[o]) {
            self.ready = self.ready_from_scratch();
        }
    }

    /// Free slots of input `input` (the credits its sender holds).
    pub fn credits(&self, input: u32) -> u32 {
        let q = self.inputs.get(input as usize).map_or(0, VecDeque::len);
        self.spec.input_depth.saturating_sub(q as u32)
    }

    /// Packets waiting at input `input`.
    pub fn occupancy(&self, input: u32) -> u32 {
        self.inputs
            .get(input as usize)
            .map_or(0, |q| q.len() as u32)
    }

    /// Offers `pkt` of `flits` flits (at least 1) at input `input` for output `output`
    /// (both taken modulo the port counts); refused without a credit.
    pub fn offer(
        &mut self,
        input: u32,
        output: u32,
        flits: u32,
        pkt: P,
    ) -> Result<(), NoCredit<P>> {
        self.offer_at(0, input, output, flits, pkt)
    }

    /// [`Crossbar::offer`] in cycle `cycle` (for the waits in the stats).
    pub fn offer_at(
        &mut self,
        cycle: u64,
        input: u32,
        output: u32,
        flits: u32,
        pkt: P,
    ) -> Result<(), NoCredit<P>> {
        let i = (input % self.spec.inputs) as usize;
        let q = &mut self.inputs[i];
        if q.len() >= self.spec.input_depth as usize {
            self.stats.no_credit += 1;
            return Err(NoCredit(pkt));
        }
        let o = output % self.spec.outputs;
        if q.is_empty() {
            // A new head: it may be ready before every other.
            let at = self.free_at[o as usize].max(self.in_free_at[i]);
            self.ready = self.ready.min(at);
        }
        q.push_back(Queued {
            output: o,
            flits: flits.max(1),
            since: cycle,
            pkt,
        });
        self.stats.max_occupancy = self.stats.max_occupancy.max(q.len() as u32);
        Ok(())
    }

    /// The first cycle at or after `cycle` in which some input's head packet finds its
    /// input and output free (`None`: every input is empty). Cycles before it change
    /// nothing but `head_blocked`, which counts only the cycles stepped.
    pub fn first_cycle_from(&self, cycle: u64) -> Option<u64> {
        (self.ready != u64::MAX).then(|| self.ready.max(cycle))
    }

    /// The first cycle in which some head packet finds its input and output free, from
    /// scratch.
    fn ready_from_scratch(&self) -> u64 {
        self.inputs
            .iter()
            .zip(&self.in_free_at)
            .filter_map(|(q, &f)| q.front().map(|h| (h, f)))
            .map(|(h, f)| self.free_at[h.output as usize].max(f))
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Runs cycle `cycle` (calls in increasing cycles): pushes the packets granted, as
    /// `(input, output, packet)` in output order, to `out`.
    pub fn step(&mut self, cycle: u64, out: &mut Vec<(u32, u32, P)>) {
        let n = self.spec.inputs as u64;
        // Each free output's winner among the free inputs whose head is for it: the first
        // at or after `(output + cycle) % n` going round (the same grants as scanning the
        // inputs from there, in time linear in the ports).
        self.winner.fill(None);
        for (i, q) in self.inputs.iter().enumerate() {
            if self.in_free_at[i] > cycle {
                continue;
            }
            let Some(h) = q.front() else {
                continue;
            };
            let o = h.output as usize;
            if self.free_at[o] > cycle {
                self.stats.head_blocked += 1;
                continue;
            }
            let start = (o as u64 + cycle) % n;
            let rank = (i as u64 + n - start) % n;
            match self.winner[o] {
                Some((r, _)) if r <= rank => self.stats.head_blocked += 1,
                Some(_) => {
                    self.stats.head_blocked += 1;
                    self.winner[o] = Some((rank, i as u32));
                }
                None => self.winner[o] = Some((rank, i as u32)),
            }
        }
        let mut granted = false;
        for o in 0..self.spec.outputs {
            let Some((_, i)) = self.winner[o as usize] else {
                continue;
            };
            let i = i as usize;
            let Some(h) = self.inputs[i].pop_front() else {
                continue;
            };
            self.free_at[o as usize] = cycle + h.flits as u64;
            self.in_free_at[i] = cycle + h.flits as u64;
            self.out_credits
                .spend(o as usize, &mut self.free_at[o as usize], &mut self.stats);
            self.stats.packets += 1;
            self.stats.flits += h.flits as u64;
            self.stats.wait_cycles += cycle.saturating_sub(h.since);
            out.push((i as u32, o, h.pkt));
            granted = true;
        }
        if granted {
            self.ready = self.ready_from_scratch();
        }
        debug_assert_eq!(self.ready, self.ready_from_scratch());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A deterministic pseudo-random stream (64-bit LCG, high bits).
    pub(crate) struct Lcg(pub(crate) u64);
    impl Lcg {
        pub(crate) fn below(&mut self, n: u32) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n as u64) as u32
        }
    }

    /// Packets per output per cycle of an `n` x `n` crossbar whose inputs always have a
    /// packet (single flit) for a uniformly random output.
    fn saturated_throughput(n: u32, cycles: u64) -> f64 {
        let spec = CrossbarSpec {
            inputs: n,
            outputs: n,
            input_depth: 4,
        };
        let mut x: Crossbar<u64> = Crossbar::new(spec);
        let mut rng = Lcg(n as u64 * 7919 + 1);
        let mut out = Vec::new();
        let warm = cycles / 10;
        let mut passed = 0u64;
        for c in 0..cycles {
            for i in 0..n {
                while x.credits(i) > 0 {
                    let o = rng.below(n);
                    assert!(x.offer(i, o, 1, c).is_ok());
                }
            }
            out.clear();
            x.step(c, &mut out);
            if c >= warm {
                passed += out.len() as u64;
            }
        }
        passed as f64 / ((cycles - warm) as f64 * n as f64)
    }

    #[test]
    fn saturated_uniform_traffic_passes_what_karol_et_al_computed() {
        // Karol, Hluchyj and Morgan 1987, Table I (exact saturation throughput of FIFO
        // input queueing): N = 2: 0.7500, 4: 0.6553, 8: 0.6184; N -> infinity: 0.5858.
        for (n, want) in [(2, 0.75), (4, 0.6553), (8, 0.6184)] {
            let got = saturated_throughput(n, 200_000);
            eprintln!("{n} ports: {got:.4} of peak (Karol et al. {want})");
            assert!(
                (got - want).abs() < 0.015,
                "{n} ports: {got:.4} of peak, Karol et al. {want}"
            );
        }
        let big = saturated_throughput(64, 20_000);
        eprintln!("64 ports: {big:.4} of peak");
        assert!(
            (0.575..0.61).contains(&big),
            "64 ports: {big:.4} of peak, the limit is 2 - sqrt(2) = 0.5858"
        );
    }

    #[test]
    fn a_full_input_refuses_and_holds_at_most_its_depth() {
        let spec = CrossbarSpec {
            inputs: 2,
            outputs: 2,
            input_depth: 3,
        };
        let mut x: Crossbar<u32> = Crossbar::new(spec);
        for k in 0..3 {
            assert!(x.offer(0, 1, 2, k).is_ok());
        }
        assert_eq!(x.credits(0), 0);
        assert_eq!(x.offer(0, 1, 1, 9), Err(NoCredit(9)));
        assert_eq!(x.stats().no_credit, 1);
        // Multi-flit packets hold their output: one packet every 2 cycles.
        let mut out = Vec::new();
        for c in 0..6 {
            x.step(c, &mut out);
            assert!(x.occupancy(0) <= 3);
        }
        assert_eq!(out, vec![(0, 1, 0), (0, 1, 1), (0, 1, 2)]);
        assert_eq!(x.stats().flits, 6);
        assert_eq!(x.stats().max_occupancy, 3);
    }

    #[test]
    fn head_of_line_blocking_holds_a_packet_whose_output_is_free() {
        let spec = CrossbarSpec {
            inputs: 2,
            outputs: 2,
            input_depth: 4,
        };
        let mut x: Crossbar<&str> = Crossbar::new(spec);
        // Both heads want output 0; input 1's second packet wants the idle output 1.
        assert!(x.offer(0, 0, 1, "a").is_ok());
        assert!(x.offer(1, 0, 1, "b").is_ok());
        assert!(x.offer(1, 1, 1, "c").is_ok());
        let mut out = Vec::new();
        x.step(0, &mut out);
        // Cycle 0: output 0 starts at input 0 ((0 + 0) % 2): "a" passes, "b" and "c" wait.
        assert_eq!(out, vec![(0, 0, "a")]);
        assert_eq!(x.stats().head_blocked, 1);
        out.clear();
        x.step(1, &mut out);
        assert_eq!(out, vec![(1, 0, "b")]);
        out.clear();
        x.step(2, &mut out);
        assert_eq!(out, vec![(1, 1, "c")]);
    }

    #[test]
    fn grants_depend_only_on_the_queues_and_the_cycle() {
        // Two crossbars fed the same packets in the same cycles give the same grants,
        // however the offers of one cycle are ordered across inputs.
        let spec = CrossbarSpec {
            inputs: 8,
            outputs: 4,
            input_depth: 2,
        };
        let (mut a, mut b): (Crossbar<u64>, Crossbar<u64>) =
            (Crossbar::new(spec), Crossbar::new(spec));
        let mut rng = Lcg(3);
        let (mut oa, mut ob) = (Vec::new(), Vec::new());
        for c in 0..5_000u64 {
            let offers: Vec<(u32, u32)> = (0..8).map(|i| (i, rng.below(4))).collect();
            for &(i, o) in &offers {
                let _ = a.offer(i, o, 1 + (c % 3) as u32, c * 8 + i as u64);
            }
            for &(i, o) in offers.iter().rev() {
                let _ = b.offer(i, o, 1 + (c % 3) as u32, c * 8 + i as u64);
            }
            a.step(c, &mut oa);
            b.step(c, &mut ob);
        }
        assert_eq!(oa, ob);
        assert_eq!(a.stats(), b.stats());
    }

    /// The same test for each crossbar type (`$ty`): an output with one credit grants one
    /// packet, then nothing (its buffer is full) until the credit comes back.
    macro_rules! output_credit_test {
        ($ty:ident) => {
            #[test]
            fn an_output_without_credit_grants_nothing() {
                let spec = CrossbarSpec {
                    inputs: 2,
                    outputs: 1,
                    input_depth: 4,
                };
                let mut x: $ty<u32> = $ty::new(spec);
                x.set_output_credits(0, 1);
                assert!(x.offer_at(0, 0, 0, 1, 10).is_ok());
                assert!(x.offer_at(0, 1, 0, 1, 11).is_ok());
                let mut out = Vec::new();
                x.step(0, &mut out);
                assert_eq!(out.len(), 1);
                assert_eq!(x.first_cycle_from(1), None);
                out.clear();
                x.step(5, &mut out);
                assert!(out.is_empty());
                assert_eq!(x.stats().output_full, 1);
                x.return_credits(0, 1);
                assert_eq!(x.first_cycle_from(6), Some(6));
                x.step(6, &mut out);
                assert_eq!(out.len(), 1);
                assert_eq!(x.stats().output_full, 2);
            }
        };
    }
    pub(crate) use output_credit_test;

    output_credit_test!(Crossbar);
}
