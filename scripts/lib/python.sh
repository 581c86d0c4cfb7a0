# Sourced by the scripts that make a virtual environment (ensure-python.sh, fuzz-api.sh):
# find_python prints the first Python 3.11+ with venv and ensurepip, or nothing.
find_python() {
  local cand
  for cand in "${PYTHON:-}" python3 python3.13 python3.12 python3.11; do
    [ -n "$cand" ] || continue
    if command -v "$cand" >/dev/null && "$cand" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$cand"
      return
    fi
  done
}

# ensure_venv PY ENV REQS: the virtual environment ENV made by PY with exactly the pinned
# packages of REQS; made again when missing or when REQS changed (a stamp of its SHA-256).
ensure_venv() {
  local py=$1 env=$2 reqs=$3
  local stamp="$env/.jobgate-requirements.sha256"
  local want
  want="$(sha256sum "$reqs" | cut -d' ' -f1)"
  if [ ! -x "$env/bin/python" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "creating $env with the pinned packages of $reqs" >&2
    rm -rf "$env"
    "$py" -m venv "$env"
    "$env/bin/python" -m pip install -q --disable-pip-version-check -r "$reqs"
    echo "$want" >"$stamp"
  fi
}
