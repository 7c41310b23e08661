//! Which partitions a placement keeps together: a GPU's when there are at least as many
//! GPUs as workers, else a chiplet's when chiplets are cut and there are enough of them.

use std::path::Path;
use tessera_cluster::{Placement, Schedule};
use tessera_partitions::config::GpuConfig;
use tessera_system::with_groups;

fn cfg(name: &str, sets: &[(&str, &str)]) -> GpuConfig {
    let sets: Vec<(String, String)> = sets
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    GpuConfig::load(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../configs")
            .join(name),
        &sets,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn groups(c: &GpuConfig, workers: usize) -> Option<Vec<usize>> {
    with_groups(c, Schedule::from(Placement::Weighted), workers).groups
}

#[test]
fn placements_keep_gpus_then_chiplets_together() {
    // 8 GPUs of 4 chiplets: by GPU up to 8 workers, by chiplet up to 32, none beyond.
    let dgx = cfg("dgx-8gpu-4chiplet.yaml", &[]);
    let by_gpu: Vec<usize> = (0..32).map(|p| p / 4).collect();
    assert_eq!(groups(&dgx, 2), Some(by_gpu.clone()));
    assert_eq!(groups(&dgx, 8), Some(by_gpu));
    assert_eq!(
        groups(&dgx, 16),
        None,
        "one partition per chiplet: nothing to group"
    );
    let cut = cfg(
        "dgx-8gpu-4chiplet.yaml",
        &[
            ("partitioning.mode", "sm_cluster"),
            ("partitioning.sm_clusters", "2"),
        ],
    );
    let by_chiplet: Vec<usize> = (0..64).map(|p| p / 2).collect();
    assert_eq!(groups(&cut, 16), Some(by_chiplet));
    assert_eq!(groups(&cut, 64), None);
    // One GPU of 4 chiplets cut in 4: a chiplet's clusters together on 2 or 4 workers.
    let a100 = cfg(
        "a100-4chiplet.yaml",
        &[
            ("partitioning.mode", "sm_cluster"),
            ("partitioning.sm_clusters", "4"),
        ],
    );
    assert_eq!(
        groups(&a100, 2),
        Some((0..16).map(|p| p / 4).collect::<Vec<_>>())
    );
    assert_eq!(groups(&a100, 8), None);
}
