#!/usr/bin/env bash
# The browser tests of the reviewer's page (e2e/) drive Debian's chromium.
# Install it when it is missing and we may (root or sudo); otherwise say how.
# JOBGATE_SKIP_BROWSER=1 skips the browser tests and this step.
set -euo pipefail
if [ "${JOBGATE_SKIP_BROWSER:-}" = 1 ] || [ -x /usr/bin/chromium ]; then
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo="sudo"
  else
    echo "chromium is missing: run 'sudo apt-get install chromium', or set JOBGATE_SKIP_BROWSER=1" >&2
    exit 1
  fi
fi
echo "installing Debian's chromium for the browser tests" >&2
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
