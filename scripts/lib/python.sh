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
