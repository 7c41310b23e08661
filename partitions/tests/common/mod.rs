//! Helpers shared by the memory-hierarchy tests (each test file compiles this module on its
//! own and uses part of it).
#![allow(dead_code)]

use tessera_partitions::config::GpuConfig;
use tessera_partitions::mem::{Access, MemRequest, Space};

/// `configs/<name>` with `--set`-style overrides.
pub fn preset(name: &str, sets: &[(&str, &str)]) -> GpuConfig {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs")
        .join(name);
    let sets: Vec<(String, String)> = sets
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    GpuConfig::load(&path, &sets).unwrap_or_else(|e| panic!("{e}"))
}

/// A global-memory warp instruction of `width` bytes per lane over `lanes`.
pub fn request(access: Access, width: u32, lanes: &[(u32, u64)]) -> MemRequest<'_> {
    MemRequest {
        access,
        space: Space::Global,
        width_bytes: width,
        lanes,
        contiguous: None,
    }
}

/// A global load of `width` bytes per lane over `lanes`.
pub fn load(lanes: &[(u32, u64)], width: u32) -> MemRequest<'_> {
    request(Access::Load, width, lanes)
}
