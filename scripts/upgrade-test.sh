#!/usr/bin/env bash
# make upgrade-test: build the previous release (UPGRADE_FROM, a commit;
# there are no tags yet, so 66884e9, the last landed stop before the
# upgrade test) from git history and this tree, then run
# test/upgradetest against both (docs/operations.md, "Upgrades").
set -euo pipefail
cd "$(dirname "$0")/.."
from="${UPGRADE_FROM:-66884e9}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src"
git archive "$from" | tar -x -C "$tmp/src"
echo "building jobgate $from (the previous release) and this tree" >&2
(cd "$tmp/src" && go build -o "$tmp/jobgate-old" ./cmd/jobgate)
go build -o "$tmp/jobgate-new" ./cmd/jobgate
JOBGATE_UPGRADE_OLD="$tmp/jobgate-old" JOBGATE_UPGRADE_NEW="$tmp/jobgate-new" \
  go test -race -count=1 -timeout 20m -v ./test/upgradetest/
