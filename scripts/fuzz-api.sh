#!/usr/bin/env bash
# schemathesis (PyPI) against a real `jobgate serve`'s own /openapi.yaml: every operation, with a
# requester's, a tenant admin's and an operator's token, checked for no 5xx and for answers that
# conform to the description (status, content type, headers, body schema). make test runs it with
# a small budget; make fuzz-api with FUZZ_API_EXAMPLES (default 100) and every phase.
#
#   FUZZ_API_EXAMPLES   examples per operation and phase (default 5)
#   FUZZ_API_SEED       the run's seed (default: schemathesis picks one and prints it)
#   FUZZ_API_ROLES      which tokens (default: requester admin operator)
set -euo pipefail
cd "$(dirname "$0")/.."
examples=${FUZZ_API_EXAMPLES:-5}
roles=${FUZZ_API_ROLES:-requester admin operator}

. scripts/lib/python.sh
py=$(find_python)
if [ -z "$py" ]; then
  echo "Python 3.11+ with venv is needed for the API fuzzer (Debian: apt-get install python3 python3-venv; scripts/ensure-python.sh installs them)" >&2
  exit 1
fi
env=bin/fuzzenv
ensure_venv "$py" "$env" tools/fuzz-api/requirements.txt

work=$(mktemp -d)
log="$work/serve.log"
cleanup() {
  if [ -n "${serve_pid:-}" ]; then
    kill "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
env -u JOBGATE_NATS_URL bin/jobgate serve --dev --data-dir "$work/data" --http-addr "127.0.0.1:$port" >"$log" 2>&1 &
serve_pid=$!
base="http://127.0.0.1:$port"
for _ in $(seq 1 300); do
  if curl -fsS "$base/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$serve_pid" 2>/dev/null; then cat "$log" >&2; exit 1; fi
  sleep 0.1
done
curl -fsS "$base/readyz" >/dev/null

seed=()
[ -n "${FUZZ_API_SEED:-}" ] && seed=(--seed "$FUZZ_API_SEED")
phases=examples,coverage,fuzzing
[ "$examples" -gt 20 ] && phases=examples,coverage,fuzzing,stateful
failed=0
for role in $roles; do
  case $role in
    requester) tok=$(bin/jobgate token --data-dir "$work/data" --tenant 4 --subject fuzz-requester) ;;
    admin) tok=$(bin/jobgate token --data-dir "$work/data" --tenant 4 --subject fuzz-admin --admin) ;;
    operator) tok=$(bin/jobgate token --data-dir "$work/data" --operator --subject fuzz-operator) ;;
    *) echo "unknown role $role" >&2; exit 2 ;;
  esac
  echo "schemathesis: $role, $examples examples an operation ($phases)"
  # From the temp dir: schemathesis keeps its example database in the working directory.
  # One worker: with two, hypothesis's source inspection on threads crashed CPython 3.11's ast
  # ("AST constructor recursion depth mismatch"), a runtime error of the fuzzer's, not a finding.
  if ! (cd "$work" && "$OLDPWD/$env/bin/schemathesis" run "$base/openapi.yaml" -H "Authorization: Bearer $tok" \
      -n "$examples" --phases "$phases" --request-timeout 2 -w 1 "${seed[@]}" \
      --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance \
      --no-color) >"$work/$role.out" 2>&1; then
    failed=1
    cat "$work/$role.out"
  else
    grep -E "Test cases|generated|Seed:" "$work/$role.out" | sed 's/^/  /'
  fi
done
if grep -q -E "panic|level=ERROR" "$log"; then
  echo "jobgate serve logged errors while fuzzed:" >&2
  grep -E "panic|level=ERROR" "$log" | head -20 >&2
  failed=1
fi
exit $failed
