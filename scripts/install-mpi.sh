#!/usr/bin/env bash
# Installs Open MPI and what rsmpi needs to build (libclang for its bindings), from
# Debian's packages, unless mpicc and mpirun are already there. Run as root or with sudo.
set -euo pipefail
if command -v mpicc >/dev/null && command -v mpirun >/dev/null && ldconfig -p | grep -q libclang; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q libopenmpi-dev openmpi-bin libclang-dev clang
