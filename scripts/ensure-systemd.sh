#!/usr/bin/env bash
# The systemd units in deploy/systemd are checked with systemd-analyze
# (verify, and security --offline) by deploy/check's TestSystemdAcceptsTheUnits.
# Install Debian's systemd package for it when it is missing and we may
# (root or sudo): only its tools are used, nothing is started. Without it
# the test skips with a message, or fails under CI=true.
set -euo pipefail
if command -v systemd-analyze >/dev/null; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo="sudo"
  else
    echo "systemd-analyze is missing: run 'sudo apt-get install systemd' to check deploy/systemd's units" >&2
    exit 0
  fi
fi
echo "installing Debian's systemd (systemd-analyze) to check deploy/systemd's units" >&2
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null
