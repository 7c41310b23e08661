//! What the system tests' hand-written traces share: presets, opcodes, launches,
//! allocations and instructions.

#![allow(dead_code)]

use std::path::Path;
use tessera_frontend::opcodes::{decode_opcode, ArchFamily};
use tessera_partitions::config::GpuConfig;
use tessera_traces::{AddrRecord, Command, KernelMeta, RawInst, TraceWriter};

/// Preset `name` of configs/ with `overrides` (`key`, `value`).
pub fn config(name: &str, overrides: &[(&str, &str)]) -> GpuConfig {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs")
        .join(name);
    let o: Vec<(String, String)> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    GpuConfig::load(p, &o).unwrap()
}

/// Adds opcode `name` of `family` to the trace: its index.
pub fn opcode(w: &mut TraceWriter, family: ArchFamily, name: &str) -> u16 {
    w.add_opcode(decode_opcode(family, name).unwrap()).unwrap()
}

/// Begins kernel `meta` and launches it on device 0.
pub fn launch(w: &mut TraceWriter, meta: KernelMeta) {
    let k = w.begin_kernel(meta).unwrap();
    w.add_command(Command::KernelLaunch {
        device: 0,
        kernel: k,
    })
    .unwrap();
}

/// Allocates `bytes` at `addr` on device 0.
pub fn alloc(w: &mut TraceWriter, addr: u64, bytes: u64) {
    w.add_command(Command::Alloc {
        device: 0,
        addr,
        bytes,
    })
    .unwrap();
}

/// An instruction without registers: with `addrs` (listed, 4 bytes each) a memory one.
pub fn raw<'a>(pc: u32, opcode: u16, mask: u32, addrs: &'a [u64]) -> RawInst<'a> {
    RawInst {
        pc,
        mask,
        opcode,
        dsts: &[],
        srcs: &[],
        mem_width: if addrs.is_empty() { 0 } else { 4 },
        imm: None,
        line: None,
        addrs: if addrs.is_empty() {
            AddrRecord::None
        } else {
            AddrRecord::List { mode: 0, addrs }
        },
    }
}
