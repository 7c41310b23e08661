//! Accel-Sim trace import and export.
//!
//! Accel-Sim's NVBit tracer writes a directory with a command list (`kernelslist.g`, or
//! one `kernelslist_ctx_0x....g` per CUDA context with newer tracers: each context becomes
//! a device) and one text file per kernel (`kernel-N.traceg`, usually `.traceg.xz`).
//! [`import_dir`] streams them into one `.tst` file; [`export_dir`] writes them back, and
//! the round trip is lossless: every instruction line comes back field for field.
//!
//! Semantics kept exactly (each has a test):
//! - a warp's stream ends where its listing ends, not at its first `EXIT` (mask-0 and
//!   partial `EXIT`s occur mid-stream);
//! - mask-0 instructions are instructions; thread instructions are the sum of popcounts;
//! - `R255` is RZ; predicate and uniform registers are not recorded by the tracer;
//! - widths and register pairs/quads come from the opcode's modifiers;
//! - the immediate field is present by the tracer version (5: on every line, 3: never) or,
//!   for version 4, as the file's first line whose field count shows it; an address-mode-1
//!   line with one field after its base (stride without immediate, or immediate without
//!   stride) is an error until that is known;
//! - import checks what a run relies on: every CTA of the grid once, every warp of a CTA
//!   once, every thread exited, addresses exactly on memory instructions, header numbers
//!   within their range (nothing wraps).

mod export;
mod import;
mod line;

pub use export::{export_dir, export_dir_with_progress, to_text_inst, ExportReport};
pub use import::{import_dir, import_dir_with_progress, ImportError, ImportOptions, ImportReport};
pub use line::{parse_inst_line, LineError, TextAddrs, TextInst};

/// Register number the tracer uses for RZ, the zero register.
pub const RZ: u16 = 255;
