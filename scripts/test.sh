#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit/property/end-to-end tests, doc tests,
# and a compile check of the benchmarks. Needs only a Rust toolchain (no MPI yet).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace --release
cargo bench --workspace --no-run
