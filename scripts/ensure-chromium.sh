#!/usr/bin/env bash
# The browser tests of the reviewer's page (e2e/) drive Debian's chromium.
# Install it when it is missing and we may (root or sudo); otherwise say how.
# JOBGATE_SKIP_BROWSER=1 skips the browser tests and this step, except in CI
# (CI=true), where the page must be tested: there it is an error.
set -euo pipefail
ci="$(printf '%s' "${CI:-}" | tr '[:upper:]' '[:lower:]')"
if [ "${JOBGATE_SKIP_BROWSER:-}" = 1 ]; then
  if [ "$ci" = true ] || [ "$ci" = 1 ]; then
    echo "JOBGATE_SKIP_BROWSER=1 is not allowed under CI=true: the browser tests must run in CI" >&2
    exit 1
  fi
  exit 0
fi
if [ -x /usr/bin/chromium ]; then
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
