#!/usr/bin/env bash
# The interop tests (test/interop) run clients nobody on this project
# wrote: Node.js packages pinned in test/interop/node/package-lock.json
# (standardwebhooks, eventsource, @redocly/cli) and Prometheus's promtool.
# Install what is missing and we may install; otherwise say how. A test whose
# runtime is still missing skips with a message, or fails under CI=true.
# JOBGATE_SKIP_INTEROP=1 skips this step.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${JOBGATE_SKIP_INTEROP:-}" = 1 ]; then
  exit 0
fi

sudo=""
may_install=1
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo="sudo"
  else
    may_install=0
  fi
fi
updated=0
apt_update() {
  if [ "$updated" = 0 ]; then
    $sudo apt-get update -qq
    updated=1
  fi
}

# Node.js and npm: Debian's packages (Node.js 18 on bookworm is enough).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [ "$may_install" = 1 ] && command -v apt-get >/dev/null; then
    echo "installing Debian's nodejs and npm for the interop tests" >&2
    apt_update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "node/npm are missing: run 'sudo apt-get install nodejs npm'; the interop tests that need them skip" >&2
  fi
fi

# Python 3.9+: the conformance suite's endpoint handler in Python
# (internal/conformance/handlers/handler.py) needs only its standard library.
if ! command -v python3 >/dev/null; then
  if [ "$may_install" = 1 ] && command -v apt-get >/dev/null; then
    echo "installing Debian's python3 for the endpoint conformance suite" >&2
    apt_update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >/dev/null
  else
    echo "python3 is missing: run 'sudo apt-get install python3'; the endpoint conformance suite's Python half needs it" >&2
  fi
fi

# The pinned packages, installed exactly from the lockfile; again only when
# the lockfile changed since the last install. sdk/typescript: the TypeScript
# worker library the conformance suite (internal/conformance) builds and runs;
# examples/endpoint-node: the endpoint type's handler TestEndpointNodeExample runs.
if command -v npm >/dev/null; then
  for dir in test/interop/node sdk/typescript examples/endpoint-node; do
  stamp="$dir/node_modules/.jobgate-lock.sha256"
  want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "installing the interop tests' npm packages (npm ci in $dir)" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$want" >"$stamp"
  fi
  done
fi

# promtool: from Debian's prometheus package. Only the binary is taken (into
# bin/, where the test looks), so installing it never starts a Prometheus
# server on this machine.
if ! command -v promtool >/dev/null && [ ! -x bin/promtool ]; then
  if [ "$may_install" = 1 ] && command -v apt-get >/dev/null; then
    echo "installing promtool (Debian's prometheus package) into bin/ for the interop tests" >&2
    apt_update
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1 && dpkg-deb -x prometheus_*.deb root)
    mkdir -p bin
    install -m 0755 "$tmp/root/usr/bin/promtool" bin/promtool
  else
    echo "promtool is missing: run 'sudo apt-get install prometheus'; the metrics interop test skips" >&2
  fi
fi
