#!/usr/bin/env bash
# The Python SDK's checks (make test-python) run in a virtual environment of
# their own, bin/pyenv, with the versions pinned in
# sdk/python/requirements-dev.txt; installed when missing or when the pins
# changed. The package itself is installed as a user would
# (pip install ./sdk/python) on every run, so the tests use what pip builds.
# Needs Python 3.11 or later with venv (Debian: python3 python3-venv).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/python.sh
py=$(find_python)
if [ -z "$py" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian's python3 and python3-venv for the Python SDK's tests" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
  py=python3
fi
if [ -z "$py" ]; then
  echo "Python 3.11+ with venv is needed for the Python SDK's tests (Debian: apt-get install python3 python3-venv)" >&2
  exit 1
fi

env=bin/pyenv
ensure_venv "$py" "$env" sdk/python/requirements-dev.txt
# No build isolation: the pinned hatchling above builds it, with no download.
"$env/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --force-reinstall ./sdk/python
