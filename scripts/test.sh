#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit/property/end-to-end tests, doc tests, a
# compile check of the benchmarks, and the MPI build with its mpirun tests (Open MPI is
# installed first by scripts/install-mpi.sh when missing). Chromium is installed first by
# scripts/install-chromium.sh when missing: tests/report.rs opens a report in it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
bash scripts/install-chromium.sh
cargo test --workspace --release
cargo bench --workspace --no-run
# MPI: the transport, and `mpirun -np 1, 2, 3, 5` against --threads 1 (tests/mpi.rs).
bash scripts/install-mpi.sh
cargo clippy --workspace --all-targets --features mpi -- -D warnings
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo test --release --features mpi --test mpi
# The regression corpus (docs/corpus.md) with the MPI build: every case, the multi-rank
# ones under mpirun; then under `mpirun -np 2`, the cases dealt to two ranks.
target/release/tessera corpus check corpus/manifest.yaml --junit target/corpus-junit.xml
mpirun --oversubscribe -np 2 target/release/tessera corpus check corpus/manifest.yaml \
    --junit target/corpus-junit-mpi.xml
