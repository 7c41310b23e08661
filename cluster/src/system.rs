//! Running a whole modeled system: the partitions a model builder made, the partition
//! hosting each port, and the modeled links (for the lookahead), on a transport.

use tessera_interconnect::{Link, Partition, Picos, PortId};

use crate::{Engine, EngineError, Routing, WindowStats};

/// Runs `partitions` to completion on the sequential transport and hands them back (for
/// their stats) with the engine's window counters. `ports` says which partition hosts each
/// port; the lookahead is the least latency of the `links` the partitioning cuts (the
/// whole run is one window when none is cut).
pub fn run_sequential<P: Partition>(
    partitions: Vec<P>,
    ports: impl IntoIterator<Item = (PortId, usize)>,
    links: impl IntoIterator<Item = Link>,
) -> Result<(Vec<P>, WindowStats), EngineError> {
    let routing = Routing::new(partitions.len(), ports)?;
    let lookahead = routing.lookahead(links)?.unwrap_or(Picos::MAX);
    let mut engine = Engine::sequential(lookahead, routing, partitions)?;
    let stats = engine.run()?;
    Ok((engine.into_partitions(), stats))
}

/// The GPU of `cfg` running `trace`: built by `tessera-partitions`, run here, stats
/// collected by `tessera-partitions`. A model error comes back as the model's own error.
pub fn run_gpu(
    cfg: &tessera_partitions::config::GpuConfig,
    trace: &tessera_traces::TraceFile,
) -> Result<(tessera_partitions::stats::RunStats, WindowStats), tessera_partitions::gpu::GpuError> {
    use tessera_partitions::gpu::{build, collect_stats, GpuError};
    let sys = build(cfg, trace)?;
    match run_sequential(sys.partitions, sys.ports, sys.links) {
        Ok((parts, w)) => Ok((collect_stats(cfg, parts), w)),
        Err(EngineError::Model { source, .. }) => Err(match source.downcast::<GpuError>() {
            Ok(g) => *g,
            Err(other) => GpuError::Engine(other.to_string()),
        }),
        Err(e) => Err(GpuError::Engine(e.to_string())),
    }
}
