#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard browser tests (driven by npm playwright-core; never a downloaded
# browser build). Idempotent: does nothing when chromium is already on PATH.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium fonts-dejavu-core
command -v chromium >/dev/null
