# jobgate — the two commands a new user types are `make run` and `make test`.
GO      ?= go
BIN     := bin/jobgate
ARGS    ?=

.PHONY: build run image test test-deploy test-image upgrade-test test-python fuzz-api bench lint fuzz clean cluster-demo chaos chaos-partitions

build:
	$(GO) build -o $(BIN) ./cmd/jobgate

## run: build and serve everything on an embedded NATS server (data in ./data),
##      which also takes worker processes and event subscribers on 127.0.0.1:4222
run: build
	$(BIN) serve --dev --nats-listen 127.0.0.1:4222 $(ARGS)

## test: the whole suite with the race detector, real embedded JetStream,
## real Chromium for the page (installed when missing; JOBGATE_SKIP_BROWSER=1 skips it,
## except under CI=true),
## third-party clients for the interop suite (Node.js packages pinned in
## test/interop/node and sdk/typescript, promtool; installed when missing; JOBGATE_SKIP_INTEROP=1 skips it),
## a minimal OpenTelemetry Collector for the tracing test (tools/otelcol, built once into
## bin/tools; JOBGATE_SKIP_OTELCOL=1 skips it, except under CI=true)
## and then the deployment kit's checks (test-deploy), the Python SDK's checks (test-python)
## and a short API fuzz (fuzz-api, 5 examples)
test:
	@scripts/ensure-chromium.sh
	@scripts/ensure-interop.sh
	@scripts/ensure-otelcol.sh
	@scripts/ensure-systemd.sh
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...
	@$(MAKE) --no-print-directory test-deploy
	@$(MAKE) --no-print-directory test-image
	@$(MAKE) --no-print-directory test-python
	@$(MAKE) --no-print-directory fuzz-api FUZZ_API_EXAMPLES=5

## test-deploy: the deployment kit (deploy/check, a Go module of its own so that Helm's and
##        Kubernetes' dependencies stay out of jobgate's go.mod): the Helm chart renders with
##        Helm's engine into objects that decode strictly into k8s.io/api types, the Compose
##        file loads with compose-go, systemd-analyze accepts deploy/systemd's units, and every
##        setting and flag they pass is one jobgate has
test-deploy:
	cd deploy/check && $(GO) test -count=1 -timeout 10m ./...

## image: the OCI image of jobgate, built without a Docker engine by tools/image (a Go module of
##        its own: go-containerregistry stays out of jobgate's go.mod): a static binary as uid
##        65532, entrypoint jobgate, command serve, data in the volume /var/lib/jobgate; one
##        tarball that docker/podman load and OCI tools read, tagged jobgate:<version> and
##        jobgate:dev; reproducible (SOURCE_DATE_EPOCH, by default the commit's time)
image:
	cd tools/image && $(GO) run . --out ../../bin/jobgate-image.tar

## test-image: tools/image's tests: two builds have one digest, and the image's root file
##        system unpacked runs its entrypoint as its user (chroot, own network namespace;
##        needs root, as CI has) up to /readyz and its health check
test-image:
	cd tools/image && $(GO) test -count=1 -timeout 10m ./...

## upgrade-test: the rolling-upgrade test (test/upgradetest, not in make test: it builds an
##        earlier commit from git history): UPGRADE_FROM (a commit, 66884e9 by default) and this
##        tree as two binaries: the old serve stopped under jobs and the new one started on its
##        data dir, and old and new components side by side on one NATS in a rolling order; no
##        job lost or doubled (docs/operations.md, "Upgrades")
upgrade-test:
	scripts/upgrade-test.sh

## test-python: the Python SDK (sdk/python): ruff, mypy --strict and pytest against a real
##        `jobgate serve`, in bin/pyenv with the versions pinned in sdk/python/requirements-dev.txt
##        (scripts/ensure-python.sh creates it when missing and installs the package with pip)
PYENV := $(CURDIR)/bin/pyenv/bin
test-python: build
	@scripts/ensure-python.sh
	cd sdk/python && $(PYENV)/ruff check . && $(PYENV)/ruff format --check . && $(PYENV)/mypy && $(PYENV)/python -m pytest -q

## fuzz-api: schemathesis (pinned in tools/fuzz-api, venv bin/fuzzenv) against a real serve's
##        own /openapi.yaml with a requester's, a tenant admin's and an operator's token: no 5xx,
##        every answer as described. FUZZ_API_EXAMPLES (default 100), FUZZ_API_SEED
FUZZ_API_EXAMPLES ?= 100
fuzz-api: build
	FUZZ_API_EXAMPLES=$(FUZZ_API_EXAMPLES) scripts/fuzz-api.sh

## bench: every package's Go benchmarks, then `jobgate bench`: the system measured
##        against the raw JetStream floor in one run (one table + bench.json; see
##        docs/performance.md). BENCH_FLAGS sets its flags, e.g.
##        make bench BENCH_FLAGS='--sections floor,admission --duration 10s'
##        The nethttp section's Asynq comparison runs bin/asynqbench (its own module,
##        tools/asynqbench, so Asynq stays out of go.mod) on Debian's redis-server.
BENCH_FLAGS ?= --duration 5s --watch-window 30s --footprint-jobs 50000
bench:
	$(GO) build -tags bench -o bin/jobgate-bench ./cmd/jobgate
	cd tools/asynqbench && $(GO) build -o ../../bin/asynqbench .
	$(GO) test -run '^$$' -bench . -benchmem ./...
	bin/jobgate-bench bench $(BENCH_FLAGS)

## cluster-demo: three real nats-server nodes (configs/cluster/, nats-server installed
##        into bin/ when missing) and 2 gateways, 2 renderers, 1 dispatcher, 1 notifier
##        as separate processes on loopback; submits a job, shows it succeed, cleans up
cluster-demo: build
	scripts/cluster-demo.sh

## chaos: the randomized fault test (docs/reliability.md): every component as its own
##        process on a real 3-node nats-server cluster, a seeded nemesis killing and pausing
##        them, a checker over the history; 10 minutes of faults by default. CHAOS_FLAGS sets
##        its flags, e.g. make chaos CHAOS_FLAGS='--duration 2m --seed 42'
CHAOS_FLAGS ?= --duration 10m
chaos:
	$(GO) run ./test/chaos/cmd/chaos $(CHAOS_FLAGS)

## chaos-partitions: the same with the network cut too (root): each NATS node in a network
##        namespace of its own, partitions, the isolated leader of the job records, a
##        non-transitive cut, power loss of a node, kills and pauses; ends with "N anomalies".
##        CHAOS_DURATION (3m), CHAOS_SEED (0: from the clock); installs iproute2 and nftables
CHAOS_DURATION ?= 3m
CHAOS_SEED     ?= 0
chaos-partitions:
	scripts/ensure-netns.sh
	$(GO) run ./test/chaos/cmd/chaos --partitions --duration $(CHAOS_DURATION) --seed $(CHAOS_SEED)

## lint: gofmt, goimports ordering, go vet and staticcheck (pinned versions, fetched by
##       `go run` through the module proxy on first use), with and without -tags bench
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOIMPORTS   ?= $(GO) run golang.org/x/tools/cmd/goimports@v0.52.0
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	@out="$$($(GOIMPORTS) -l $$(git ls-files '*.go'))"; test -z "$$out" || (echo "goimports ordering:"; echo "$$out"; exit 1)
	$(GO) vet ./...
	$(GO) vet -tags bench ./cmd/jobgate ./internal/bench
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags bench ./cmd/jobgate ./internal/bench

## fuzz: a short run of every fuzz target
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzCanonicalize$$' -fuzztime 20s ./internal/canon
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSubmission$$' -fuzztime 20s ./internal/job
	$(GO) test -run '^$$' -fuzz '^FuzzUnmarshalRecord$$' -fuzztime 20s ./internal/codec
	$(GO) test -run '^$$' -fuzz '^FuzzApplyFastPath$$' -fuzztime 20s ./internal/schema
	$(GO) test -run '^$$' -fuzz '^FuzzPubAck$$' -fuzztime 20s ./internal/natsjs
	$(GO) test -run '^$$' -fuzz '^FuzzCostModel$$' -fuzztime 20s ./internal/schema

clean:
	rm -rf bin
