//! `tessera run` under `mpirun` or `srun`: one process per rank, detected from the
//! launcher's environment (DESIGN.md section 4).
//!
//! Every rank loads the configuration and the trace itself (a shared file system on a
//! cluster: traces are never shipped over MPI), simulates its own partitions, and rank 0
//! merges the stats, writes `--stats-out` and prints the summary. Errors:
//!
//! - while loading (a bad config, an unreadable trace on any rank), the ranks agree that
//!   the job failed (one `MPI_Allgather` of a flag); the lowest failing rank prints its
//!   error, and every rank ends with a failure status;
//! - during the simulation, only the failing rank knows: it prints its error and ends the
//!   job with `MPI_Abort`, which stops the ranks waiting for it in a collective.

use anyhow::Result;

use crate::run_cmd::RunArgs;

/// Environment variables that MPI launchers set in each process they start: Open MPI's
/// `mpirun`, MPICH/Hydra and PMI-2, PMIx, Intel MPI.
const RANK_VARS: [&str; 4] = [
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "MPI_LOCALRANKID",
];
/// Where they give the number of ranks.
const SIZE_VARS: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"];

/// When this process was started by an MPI launcher or as one task of a Slurm job step of
/// several (`srun -n 4`): the number of ranks it reports (1 when it names none). `None`: a
/// plain run. A batch script's own process (`sbatch`) is not a job step: Slurm sets
/// `SLURM_STEP_NUM_TASKS` only in the tasks `srun` starts.
pub fn launched_ranks() -> Option<usize> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let slurm_tasks = var("SLURM_STEP_NUM_TASKS").and_then(|v| v.parse::<usize>().ok());
    let mpi = RANK_VARS.iter().any(|k| var(k).is_some());
    if !mpi && !matches!(slurm_tasks, Some(n) if n > 1) {
        return None;
    }
    let size = SIZE_VARS
        .iter()
        .find_map(|k| var(k)?.parse::<usize>().ok())
        .or(slurm_tasks)
        .unwrap_or(1);
    Some(size)
}

/// This process's rank, when started by an MPI launcher that names it.
pub fn launched_rank() -> Option<usize> {
    launched_ranks()?;
    RANK_VARS
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse::<usize>().ok())
        .or_else(|| std::env::var("SLURM_PROCID").ok()?.parse().ok())
}

#[cfg(not(feature = "mpi"))]
pub fn run(a: RunArgs, ranks: usize) -> Result<()> {
    if ranks <= 1 {
        return crate::run_cmd::run_local(a);
    }
    anyhow::bail!(
        "started by an MPI launcher with {ranks} ranks, but this tessera was built without \
         MPI: build it with `cargo build --release --features mpi` (needs an MPI library: \
         apt-get install libopenmpi-dev openmpi-bin libclang-dev clang)"
    )
}

/// FNV-1a, 64 bits: a fingerprint of what a rank simulates, compared across ranks.
#[cfg(feature = "mpi")]
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Fingerprints of the tool version, the whole effective configuration and the trace
/// (its index checksum and size).
#[cfg(feature = "mpi")]
fn input_hashes(s: &crate::run_cmd::Setup) -> [u64; 3] {
    let config = serde_json::to_vec(&s.cfg).unwrap_or_default();
    let trace = format!("{}:{}", s.trace.index_crc32(), s.trace.file_bytes());
    [
        fnv(crate::provenance::TOOL_VERSION.as_bytes()),
        fnv(&config),
        fnv(trace.as_bytes()),
    ]
}

#[cfg(feature = "mpi")]
pub fn run(a: RunArgs, _ranks: usize) -> Result<()> {
    use mpi::collective::CommunicatorCollectives;
    use mpi::topology::Communicator;
    use mpi::traits::Root;
    use std::time::Instant;

    // Worker threads of a rank never call MPI: only the thread that initialized it does
    // (ranks x threads, `--threads`), which is what MPI_THREAD_FUNNELED allows.
    let Some((universe, level)) = mpi::initialize_with_threading(mpi::Threading::Funneled) else {
        anyhow::bail!("MPI was already initialized");
    };
    let world = universe.world();
    if a.threads > 1 && level < mpi::Threading::Funneled {
        anyhow::bail!(
            "--threads {} under MPI needs an MPI library with thread support \
             (MPI_THREAD_FUNNELED); this one offers {level:?}",
            a.threads
        );
    }
    let (rank, ranks) = (world.rank(), world.size());
    // A panicking rank ends the job with its message (the others would wait for it in a
    // collective, under srun without --kill-on-bad-exit for good).
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        // One write: stderr is unbuffered, and `eprintln!` of a format writes piece by
        // piece, which mpirun can interleave with another process's output.
        let line = format!("error: rank {rank} of {ranks} panicked: ending the job\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
        mpi::topology::SimpleCommunicator::world().abort(101);
    }));
    // Refused before the run, as every rank would find it: the ranks' worker threads
    // cannot pause together for the count (`run_gpu_mpi`).
    let setup = crate::run_cmd::setup(&a, rank != 0).and_then(|s| match a.max_warp_insts {
        Some(n) if a.threads > 1 => Err(anyhow::anyhow!(
            "--max-warp-insts {n}: not supported under MPI with --threads above 1 (the \
             ranks' worker threads cannot pause together); run one thread per rank"
        )),
        _ => Ok(s),
    });
    // Every rank learns whether any failed to load; the lowest failing rank reports.
    let failed = i32::from(setup.is_err());
    let mut all = vec![0i32; ranks as usize];
    world.all_gather_into(&failed, &mut all[..]);
    let setup = match setup {
        Ok(s) if all.iter().all(|&f| f == 0) => s,
        Ok(s) => {
            // Another rank failed and reports it; the job fails quietly here. (Dropped
            // before `exit`, which runs no destructors: a recorded workload's temporary
            // trace goes with it.)
            drop(s);
            drop(universe);
            std::process::exit(1);
        }
        Err(e) => {
            if all.iter().position(|&f| f != 0) == Some(rank as usize) {
                eprintln!("error: rank {rank} of {ranks}: {e:#}");
            }
            drop(universe);
            std::process::exit(1);
        }
    };
    // Every rank must simulate the same thing: a rank given another trace or config (or
    // running another build of tessera) would merge into one stats file silently.
    let mine = input_hashes(&setup);
    let mut flat = vec![0u64; 3 * ranks as usize];
    world.all_gather_into(&mine[..], &mut flat[..]);
    let hashes: Vec<&[u64]> = flat.chunks(3).collect();
    if let Some(r) = hashes.iter().position(|h| *h != hashes[0]) {
        if rank == 0 {
            let what: Vec<&str> = ["tessera build", "configuration", "trace"]
                .iter()
                .zip(hashes[r].iter().zip(hashes[0]))
                .filter(|(_, (x, y))| x != y)
                .map(|(w, _)| *w)
                .collect();
            eprintln!(
                "error: rank {r} of {ranks} was given another {} than rank 0: every rank \
                 must run the same command",
                what.join(" and ")
            );
        }
        drop(setup);
        drop(universe);
        std::process::exit(1);
    }
    // Every rank reads the same costs (a file; a profile's timings would differ between
    // ranks, and so would their placements).
    let costs = if a.placement == tessera_cluster::Placement::Weighted && a.weights.is_none() {
        if rank == 0 {
            eprintln!(
                "error: {}: --placement weighted under MPI needs --weights STATS.json (a \
                 stats file of an earlier run: every rank must deal the same way, and a \
                 profile's timings differ between ranks)",
                setup.label
            );
        }
        drop(setup);
        drop(universe);
        std::process::exit(1);
    } else {
        match crate::run_cmd::placement_costs(&a, &setup, ranks as usize) {
            Ok(c) => c,
            Err(e) => {
                if rank == 0 {
                    eprintln!("error: {e}");
                }
                drop(setup);
                drop(universe);
                std::process::exit(1);
            }
        }
    };
    // Every rank sees the same configuration, so every rank would find this: one says it.
    if let Err(e) = tessera_cluster::rank_owners_with(
        setup.cfg.partition_count() as usize,
        ranks as usize,
        a.placement,
        tessera_cluster::PlacementHints {
            costs: costs.totals.as_deref(),
            ..Default::default()
        },
    ) {
        if rank == 0 {
            eprintln!("error: {}: {e}", setup.label);
        }
        drop(setup);
        drop(universe);
        std::process::exit(1);
    }
    // Fault injection for the tests of the panic hook: a rank that panics mid-job.
    if std::env::var("TESSERA_TEST_PANIC_RANK").ok() == Some(rank.to_string()) {
        panic!("injected by TESSERA_TEST_PANIC_RANK");
    }
    let t0 = Instant::now();
    // Rank 0 alone shows progress (crate::progress::init turns it off on the others): with
    // one thread per rank the share of CTAs (the ranks' engines pause and sum their
    // counters, `run_gpu_mpi`), else the time elapsed.
    let mut bar = None;
    let mut beat = None;
    if a.threads <= 1 {
        bar = Some(crate::progress::RunBar::new(&setup.trace, t0));
    } else {
        beat = Some(crate::progress::Progress::heartbeat(
            "run",
            format!(
                "{} partitions on {ranks} rank(s) x {} thread(s)",
                setup.cfg.partition_count(),
                a.threads
            ),
        ));
    }
    let mut show = |p: tessera_system::GpuProgress| {
        if let Some(b) = bar.as_mut() {
            b.report(p);
        }
    };
    let report: Option<&mut dyn FnMut(tessera_system::GpuProgress)> =
        (rank == 0 && crate::progress::enabled()).then_some(&mut show);
    let run = tessera_system::run_gpu_mpi(
        &setup.cfg,
        &setup.trace,
        &world,
        (
            a.mpi_exchange,
            tessera_cluster::Schedule {
                placement: a.placement,
                windows: a.windows,
                costs: costs.totals.clone(),
                ..Default::default()
            },
            a.threads as usize,
        ),
        &setup.limits,
        report,
    );
    if let Some(b) = bar {
        b.finish(match &run {
            Ok(Some((st, _))) => Some(st.totals.ctas),
            _ => None,
        });
    }
    if let Some(b) = beat {
        b.finish();
    }
    let mut status: i32 = match run {
        Err(e) => {
            eprintln!("error: rank {rank} of {ranks}: {}: {e}", setup.label);
            drop(setup);
            tessera_cluster::mpi::abort_job(&world, 1)
        }
        Ok(None) => 0,
        Ok(Some((stats, windows))) => {
            let exchange = format!("{:?}", a.mpi_exchange).to_lowercase();
            let how = crate::run_cmd::How {
                costs_from: costs.from.as_deref(),
                threads: a.threads as usize,
                ranks: ranks as usize,
                mpi_exchange: Some(&exchange),
            };
            match crate::run_cmd::report_run(&a, &setup, &stats, &windows, t0, &how) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("error: rank 0 of {ranks}: {e:#}");
                    1
                }
            }
        }
    };
    // The ranks end together, after rank 0 has written the stats: rank 0's status reaches
    // every rank, and all finalize MPI (no rank aborting after the others finalized).
    world.process_at_rank(0).broadcast_into(&mut status);
    drop(setup);
    drop(universe);
    if status != 0 {
        std::process::exit(1);
    }
    Ok(())
}
