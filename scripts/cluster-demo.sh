#!/usr/bin/env bash
# jobgate scaled out on a real three-node NATS cluster, everything on
# loopback: three nats-server processes (configs/cluster/n1..n3.conf), then
# 2 gateways, 2 renderers, 1 dispatcher and 1 notifier of bin/jobgate, each
# its own process, all provisioning the same R3 streams at once. It submits a
# job through gateway 1 and waits until it succeeded, asks again with the
# same key through gateway 2 (same job), and stops everything again.
#
#   make cluster-demo                 builds bin/jobgate, then runs this
#   KEEP=1 scripts/cluster-demo.sh    keep the work dir (logs, stores, PDF)
#
# nats-server is bin/nats-server, installed there with
# `go install github.com/nats-io/nats-server/v2@$NATS_VERSION` if absent
# (or set NATS_SERVER=/path/to/nats-server). Needs curl. Ports: NATS clients
# 14222-14224, routes 16222-16224, monitoring 18222-18224, gateways
# 18080-18081, all on 127.0.0.1.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
NATS_VERSION=${NATS_VERSION:-v2.15.2}
jobgate=$root/bin/jobgate
work=$(mktemp -d "${TMPDIR:-/tmp}/jobgate-cluster.XXXXXX")
mkdir -p "$work/logs"
names=()
pids=()

say() { printf '==> %s\n' "$*"; }

# Stop what this script started, by pid, newest first: the jobgate
# processes drain before the NATS nodes go.
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	local i
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null || true
		wait "${pids[i]}" 2>/dev/null || true
	done
	if [ "$status" -ne 0 ]; then
		echo "cluster demo failed (exit $status); last lines of every log:" >&2
		for f in "$work"/logs/*.log; do
			[ -e "$f" ] || continue
			echo "--- $(basename "$f")" >&2
			tail -n 15 "$f" >&2
		done
	fi
	if [ -n "${KEEP:-}" ]; then
		echo "kept $work (logs in $work/logs)"
	else
		rm -rf "$work"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: runs CMD in the background in the work dir, output in
# logs/NAME.log.
start() {
	local name=$1
	shift
	(cd "$work" && exec "$@") >"$work/logs/$name.log" 2>&1 &
	names+=("$name")
	pids+=("$!")
	printf '    %-11s pid %s\n' "$name" "$!"
}

# alive: fail when a started process has exited.
alive() {
	local i
	for i in "${!pids[@]}"; do
		if ! kill -0 "${pids[i]}" 2>/dev/null; then
			echo "${names[i]} exited early; see its log below" >&2
			return 1
		fi
	done
}

# wait_http URL WHAT: poll URL until it answers 2xx, at most 60s.
wait_http() {
	local deadline=$((SECONDS + 60))
	until curl -fsS -o /dev/null "$1" 2>/dev/null; do
		alive
		if ((SECONDS > deadline)); then
			echo "$2 not ready within 60s ($1)" >&2
			return 1
		fi
		sleep 0.2
	done
}

command -v curl >/dev/null || { echo "cluster-demo needs curl" >&2; exit 1; }
[ -x "$jobgate" ] || { echo "no $jobgate: run make build (or make cluster-demo)" >&2; exit 1; }
nats_server=${NATS_SERVER:-$root/bin/nats-server}
if [ ! -x "$nats_server" ]; then
	say "installing nats-server $NATS_VERSION into bin/"
	GOBIN=$root/bin go install "github.com/nats-io/nats-server/v2@$NATS_VERSION"
	nats_server=$root/bin/nats-server
fi

say "starting 3 NATS nodes with JetStream ($("$nats_server" --version)), work dir $work"
for n in 1 2 3; do
	# store_dir in the config is relative: data/cluster/n$n in the work dir.
	start "nats-n$n" "$nats_server" -c "$root/configs/cluster/n$n.conf"
done
for n in 1 2 3; do
	wait_http "http://127.0.0.1:1822$((n + 1))/healthz" "NATS node n$n"
done

# Every jobgate process gets the same settings: the cluster's URLs (each
# client picks a node at random and fails over to the others), three
# replicas, and the shared token secret.
export JOBGATE_NATS_URL=nats://127.0.0.1:14222,nats://127.0.0.1:14223,nats://127.0.0.1:14224
export JOBGATE_NATS_REPLICAS=3
export JOBGATE_AUTH_SECRET=cluster-demo-secret-not-for-production
export JOBGATE_LOG_FORMAT=json

say "starting 2 gateways, 2 renderers, 1 dispatcher, 1 notifier (R3 streams, provisioned by whoever comes first)"
start gateway-1 "$jobgate" gateway --http-addr 127.0.0.1:18080 --data-dir "$work/gateway-1"
start gateway-2 "$jobgate" gateway --http-addr 127.0.0.1:18081 --data-dir "$work/gateway-2"
start renderer-1 "$jobgate" renderer --data-dir "$work/renderer-1"
start renderer-2 "$jobgate" renderer --data-dir "$work/renderer-2"
start dispatcher "$jobgate" dispatcher --data-dir "$work/dispatcher"
start notifier "$jobgate" notifier --data-dir "$work/notifier"
wait_http http://127.0.0.1:18080/readyz "gateway 1"
wait_http http://127.0.0.1:18081/readyz "gateway 2"
sleep 1 # let the workers attach to their consumers
alive

token=$("$jobgate" token --tenant 4 --subject reviewer-47)
client=(--token "$token" --retry-for 30s)
key=cluster-demo-$$

say "submitting through gateway 1 (key $key) and waiting for the result"
"$jobgate" submit --url http://127.0.0.1:18080 "${client[@]}" --journal "$work/journal-1.db" --key "$key" \
	--param case_id=47 --param revision=29 --param pages=12 --out "$work/report.pdf" >"$work/submit.out"
id=$(head -n 1 "$work/submit.out")
echo "    job $id succeeded; result $(wc -c <"$work/report.pdf") bytes"

# A second client (its own key journal) retrying the same request
# elsewhere, as after a lost answer.
say "the same key through gateway 2 answers with the same job"
again=$("$jobgate" submit --url http://127.0.0.1:18081 "${client[@]}" --journal "$work/journal-2.db" --key "$key" \
	--param case_id=47 --param revision=29 --param pages=12)
[ "$again" = "$id" ] || { echo "gateway 2 answered $again, want $id" >&2; exit 1; }
"$jobgate" status --url http://127.0.0.1:18081 "${client[@]}" --journal "$work/journal-2.db" "$id" | sed 's/^/    /'

say "a process configured differently is refused and changes nothing"
if JOBGATE_NATS_REPLICAS=1 timeout 60 "$jobgate" dispatcher --data-dir "$work/mismatch" 2>"$work/logs/mismatch.log"; then
	echo "a dispatcher with 1 replica started against the R3 deployment" >&2
	exit 1
fi
sed 's/^/    /' "$work/logs/mismatch.log"

say "the JetStream cluster (node n1's monitoring endpoint, /jsz)"
curl -fsS http://127.0.0.1:18222/jsz | tr -d ' \n' | grep -o '"streams":[0-9]*\|"consumers":[0-9]*\|"meta_cluster":{"name":"[^"]*","leader":"[^"]*"\|"cluster_size":[0-9]*' |
	sed 's/^/    /' || true
alive
say "cluster demo succeeded; stopping everything"
