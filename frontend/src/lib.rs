//! # tessera-frontend: getting traces into tessera
//!
//! - [`accelsim`]: import of Accel-Sim traces (`kernelslist.g` + `kernel-N.traceg[.xz]`,
//!   tracer versions 3 to 5) into `.tst`, and export back to text, losslessly.
//! - [`opcodes`]: SASS opcode tables per architecture family (binary versions 35 to 90),
//!   mapping base mnemonics to [`tessera_traces::OpClass`] and parsing modifiers.

pub mod accelsim;
pub mod opcodes;
pub mod record;
pub mod workloads;
