#!/usr/bin/env bash
# Installs Chromium from Debian's packages, unless /usr/bin/chromium is already there: the
# report test (tests/report.rs) opens a generated HTML report in headless Chromium and
# checks its screenshot. Run as root or with sudo.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q chromium
