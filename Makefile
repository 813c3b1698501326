# Protobase developer tasks. `make help` lists them.
#
# Tools are pinned here and installed into ./bin by `make tools`; the build
# and the tests need none of them (generated code is committed).

SHELL := /bin/bash
GO    ?= go
BIN   := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

BUF_VERSION             := v1.50.0
PROTOC_GEN_GO_VERSION   := v1.36.12
PROTOC_GEN_GRPC_VERSION := v1.6.2
GATEWAY_VERSION         := v2.32.0
GOLANGCI_VERSION        := v2.6.2

DATA ?= ./protobase-data
ADDR ?= 127.0.0.1:7070
HTTP_ADDR ?= 127.0.0.1:8080
FUZZTIME ?= 30s
LAB_OUT ?= ./lab-report
# The version `make build` stamps into the binary (protobase version).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
CLUSTER_DIR ?= ./cluster-data
CLUSTER_SERVE_FLAGS ?=

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: serve
serve: ## run the server with the embedded store, gRPC and REST on loopback (DATA, ADDR, HTTP_ADDR)
	$(GO) run ./cmd/protobase serve --data $(DATA) --grpc-addr $(ADDR) --http-addr $(HTTP_ADDR)

.PHONY: build
build: ## build bin/protobase
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/protobase ./cmd/protobase

# release builds static, version-stamped, reproducible binaries of protobase
# and protobase-bench for each of PLATFORMS into DIST, with DIST/SHA256SUMS
# (scripts/release says how). `sha256sum -c SHA256SUMS` in DIST verifies them.
DIST      ?= $(CURDIR)/dist
PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
.PHONY: release
release: ## build static binaries for PLATFORMS into DIST (protobase-VERSION-OS-ARCH) with SHA256SUMS
	GO=$(GO) scripts/release $(VERSION) $(DIST) $(PLATFORMS)

# image builds the container image of Containerfile (the static server on
# FROM scratch; docs/operations.md, "The container image") with the first of
# podman, buildah and docker found, or CONTAINER. podman and buildah build
# in the docker format, whose images keep HEALTHCHECK.
CONTAINER ?= $(firstword $(foreach c,podman buildah docker,$(if $(shell command -v $(c) 2>/dev/null),$(c))))
IMAGE     ?= protobase:$(VERSION)
.PHONY: image
image: ## build the container image IMAGE from Containerfile with podman, buildah or docker (CONTAINER)
	@test -n "$(CONTAINER)" || { echo "image: none of podman, buildah or docker is installed; set CONTAINER" >&2; exit 1; }
	$(CONTAINER) build $(if $(filter podman buildah,$(notdir $(CONTAINER))),--format docker) \
	  --build-arg VERSION=$(VERSION) -t $(IMAGE) -f Containerfile .

.PHONY: build-bench
build-bench: ## build bin/protobase-bench, the benchmark lab
	$(GO) build -o $(BIN)/protobase-bench ./cmd/protobase-bench

# cluster builds bin/protobase through `build`, so that it carries the
# version stamp (protobase version) whichever target built it last.
.PHONY: cluster
cluster: build ## run three etcd members and two servers over them in the foreground; type restart to restart what stopped (CLUSTER_DIR, CLUSTER_SERVE_FLAGS)
	$(GO) build -o $(BIN)/protobase-etcd ./cmd/protobase-etcd
	$(GO) build -o $(BIN)/protobase-cluster ./cmd/protobase-cluster
	$(BIN)/protobase-cluster --dir $(CLUSTER_DIR) --bin $(BIN) -- $(CLUSTER_SERVE_FLAGS)

.PHONY: test
# The docs test (docs/) runs the docs' Python snippets with the package's
# virtual environment, so it is made first; the console's browser tests
# (tests/console) need chromium.
test: python-venv chromium ## vet and run every test, the Python and Node packages' and the console's build check included (what CI runs)
	$(GO) vet ./...
	PROTOBASE_PYTHON=$(PY) CHROMIUM=$(CHROMIUM) $(GO) test -count=1 -timeout 15m ./...
	$(MAKE) python-test
	$(MAKE) ts-test
	$(MAKE) console-check

# The Python package (python/) is checked in a virtual environment of its
# own, made with python3 -m venv and reused while python/pyproject.toml is
# unchanged. It needs only python3 and the package registry: grpcio-tools
# from it generates the stubs (no protoc).
PYTHON ?= python3
PYVENV := $(CURDIR)/python/.venv
PY     := $(PYVENV)/bin/python
PY_PROTOS := protobase/v1/options.proto protobase/v1/protobase.proto protobase/v1/service.proto

$(PYVENV)/.installed: python/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(PYVENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e './python[test]'
	touch $@

.PHONY: python-venv
python-venv: $(PYVENV)/.installed ## make python/.venv with the package (editable) and its checks

# python_gen writes the generated Python modules of proto/ into $(1).
# Type stubs (.pyi) come from mypy-protobuf, whose stubs pass mypy --strict.
python_gen = $(PY) -m grpc_tools.protoc -Iproto --python_out=$(1) \
	--plugin=protoc-gen-mypy=$(PYVENV)/bin/protoc-gen-mypy --mypy_out=quiet:$(1) $(PY_PROTOS) && \
	$(PY) -m grpc_tools.protoc -Iproto --grpc_python_out=$(1) \
	--plugin=protoc-gen-mypy_grpc=$(PYVENV)/bin/protoc-gen-mypy_grpc --mypy_grpc_out=quiet:$(1) \
	protobase/v1/service.proto

.PHONY: python-generate
python-generate: $(PYVENV)/.installed ## regenerate python/src/protobase/v1 from proto/
	$(call python_gen,python/src)

.PHONY: python-check-generate
python-check-generate: $(PYVENV)/.installed ## fail if python/src/protobase/v1 is not what proto/ generates
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(call python_gen,$$tmp) && \
	diff -r -x __init__.py -x __pycache__ "$$tmp/protobase/v1" python/src/protobase/v1 >&2 || \
	(echo "python/src/protobase/v1 is stale: run make python-generate and commit" >&2; exit 1)

.PHONY: python-test
python-test: python-check-generate ## ruff, mypy and pytest for the Python package, against the real server
	cd python && .venv/bin/ruff check . && .venv/bin/ruff format --check .
	cd python && .venv/bin/mypy
	cd python && .venv/bin/pytest -q

# The Node package (ts/) installs what its committed lock file names (npm
# ci), again whenever package-lock.json changes. Its generated code
# (ts/src/gen) comes from protoc-gen-es in ts/node_modules, run by buf.
TS_MODULES := $(CURDIR)/ts/node_modules/.installed

$(TS_MODULES): ts/package-lock.json
	cd ts && npm ci --no-audit --no-fund
	touch $@

.PHONY: ts-modules
ts-modules: $(TS_MODULES) ## install the Node package's dependencies (npm ci) into ts/node_modules

.PHONY: ts-generate
ts-generate: $(TS_MODULES) $(BIN)/buf ## regenerate ts/src/gen from proto/ (and ts/examples/gen, the example's and tests' schemas)
	rm -rf ts/src/gen ts/examples/gen
	buf generate --template ts/buf.gen.yaml
	buf generate --template ts/buf.gen.examples.yaml

.PHONY: ts-check-generate
ts-check-generate: $(TS_MODULES) $(BIN)/buf ## fail if ts/src/gen or ts/examples/gen is not what proto/ generates
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	buf generate --template ts/buf.gen.yaml -o "$$tmp" && \
	buf generate --template ts/buf.gen.examples.yaml -o "$$tmp" && \
	diff -r "$$tmp/ts/src/gen" ts/src/gen >&2 && \
	diff -r "$$tmp/ts/examples/gen" ts/examples/gen >&2 || \
	(echo "ts/src/gen or ts/examples/gen is stale: run make ts-generate and commit" >&2; exit 1)

# ts-test compiles the package with tsc --strict and runs its tests (node
# --test) against the server built here, one test file at a time.
.PHONY: ts-test
ts-test: ts-check-generate ## tsc --strict and node --test for the Node package, against the real server
	$(GO) build -o ts/dist/protobase ./cmd/protobase
	cd ts && node_modules/.bin/tsc -p .
	cd ts && PROTOBASE_BIN=$(CURDIR)/ts/dist/protobase node --test --test-concurrency=1 --test-timeout=600000 dist/test/*.test.js

# The web console (internal/console) is TypeScript compiled by the Node
# package's tsc (--strict, no bundler) into ES modules committed in
# internal/console/assets beside index.html and console.css, which the
# server embeds: `go build` needs no Node.
CONSOLE := internal/console

.PHONY: console
console: $(TS_MODULES) ## rebuild the web console's modules (internal/console/assets/*.js) from internal/console/src
	rm -f $(CONSOLE)/assets/*.js
	ts/node_modules/.bin/tsc -p $(CONSOLE)

.PHONY: console-check
console-check: $(TS_MODULES) ## fail if internal/console/assets is not what internal/console/src compiles to
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	ts/node_modules/.bin/tsc -p $(CONSOLE) --outDir "$$tmp" && \
	cp $(CONSOLE)/assets/index.html $(CONSOLE)/assets/console.css "$$tmp" && \
	diff -r "$$tmp" $(CONSOLE)/assets >&2 || \
	(echo "$(CONSOLE)/assets is stale: run make console and commit" >&2; exit 1)

# robustness runs the robustness tests (tests/robustness) with seeds drawn
# from the clock, so that each run tries new interleavings; `make test` runs
# the same tests on their fixed seeds. A failure prints the command that
# replays its seed. SEEDS=N runs N seeds of each randomised test.
SEEDS ?=
.PHONY: robustness
robustness: ## run tests/robustness on seeds from the clock (new interleavings each run; SEEDS=N per test)
	$(GO) test -count=1 -timeout 30m ./tests/robustness/... -seed=clock $(if $(SEEDS),-seeds=$(SEEDS))

.PHONY: test-race
test-race: chromium ## run every test under the race detector
	CHROMIUM=$(CHROMIUM) $(GO) test -count=1 -race -timeout 30m ./...

# RACE_PKGS are the packages whose tests run goroutines against each other
# (the engine's writers, watchers and caches, the stores' feeds, the server
# end to end): CI runs their short tests under the race detector.
RACE_PKGS := ./internal/engine/ ./internal/store/... ./server/
.PHONY: test-race-short
test-race-short: ## the -short tests of RACE_PKGS under the race detector (what CI runs)
	$(GO) test -count=1 -race -short -timeout 15m $(RACE_PKGS)

.PHONY: bench
bench: ## run the Go benchmarks (ingest vs raw Pebble, codecs, validator)
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 3 ./internal/... ./server/

.PHONY: bench-lab
bench-lab: ## run every lab experiment (protobase-bench all) into LAB_OUT
	$(GO) run ./cmd/protobase-bench all --out $(LAB_OUT)

.PHONY: bench-lab-quick
bench-lab-quick: ## smoke-run every lab experiment in quick mode (under a minute) into LAB_OUT
	$(GO) run ./cmd/protobase-bench all --quick --out $(LAB_OUT)

# chromium installs Debian's chromium package with apt-get when CHROMIUM
# is not on the PATH: the console's browser tests (tests/console) and
# check-report drive it headless. `make test` makes it first, so CI has it.
CHROMIUM ?= chromium
.PHONY: chromium
chromium: ## install Debian's chromium (apt-get) when CHROMIUM is missing; the browser tests need it
	@command -v $(CHROMIUM) >/dev/null || { \
	  echo "chromium: $(CHROMIUM) not found; installing Debian's chromium package with apt-get"; \
	  apt=apt-get; test "$$(id -u)" = 0 || ! command -v sudo >/dev/null || apt="sudo apt-get"; \
	  DEBIAN_FRONTEND=noninteractive $$apt install -y chromium || \
	    { $$apt update && DEBIAN_FRONTEND=noninteractive $$apt install -y chromium; } || { \
	    echo "chromium: could not install chromium; install it (apt-get install chromium) or set CHROMIUM=/path/to/chromium" >&2; exit 1; }; }

# check-report renders LAB_OUT/report.html (written by bench-lab or
# bench-lab-quick; a quick run makes one when it is missing) in headless
# Chromium and checks the DOM it built: every experiment has its section
# and a non-empty chart.
.PHONY: check-report
check-report: chromium ## render LAB_OUT/report.html in headless Chromium; fail if a chart is missing or empty
	@test -f $(LAB_OUT)/report.html || $(GO) run ./cmd/protobase-bench all --quick --out $(LAB_OUT)
	@profile=$$(mktemp -d) && trap 'rm -rf "$$profile"' EXIT && \
	  $(CHROMIUM) --headless --no-sandbox --disable-gpu --disable-background-networking --no-first-run \
	    --user-data-dir="$$profile" --dump-dom "file://$(abspath $(LAB_OUT))/report.html" > $(LAB_OUT)/report.dom.html 2>/dev/null && \
	  test -s $(LAB_OUT)/report.dom.html || { echo "check-report: chromium rendered nothing from $(LAB_OUT)/report.html" >&2; exit 1; }
	PROTOBASE_REPORT_DOM=$(abspath $(LAB_OUT))/report.dom.html PROTOBASE_REPORT_DIR=$(abspath $(LAB_OUT)) \
	  $(GO) test -count=1 -v -run '^TestRenderedReport$$' ./bench/

.PHONY: fuzz
fuzz: ## run every fuzz target (as go test -list finds them) for FUZZTIME each, FUZZJOBS at a time
	GO=$(GO) scripts/fuzz $(FUZZTIME)

.PHONY: tools
tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/protoc-gen-grpc-gateway $(BIN)/protoc-gen-openapiv2 ## install the pinned generators into ./bin

$(BIN)/buf:
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GRPC_VERSION)
$(BIN)/protoc-gen-grpc-gateway:
	GOBIN=$(BIN) $(GO) install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GATEWAY_VERSION)
$(BIN)/protoc-gen-openapiv2:
	GOBIN=$(BIN) $(GO) install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@$(GATEWAY_VERSION)
$(BIN)/golangci-lint:
	GOBIN=$(BIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)

.PHONY: generate
generate: tools ## regenerate gen/ from proto/
	# Remove what buf writes, not gen/ itself: gen/openapi/embed.go is hand-written.
	rm -rf gen/protobase gen/openapi/*.json
	buf generate

.PHONY: check-generate
check-generate: generate ## fail if gen/ is not what proto/ generates
	@git diff --exit-code --stat -- gen || (echo "gen/ is stale: run make generate and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain -- gen)" || (git status --porcelain -- gen; echo "gen/ has untracked changes" >&2; exit 1)

# golangci-lint holds a lock while it runs: --allow-serial-runners waits
# for another run on the same machine instead of failing.
.PHONY: lint
lint: $(BIN)/golangci-lint $(BIN)/buf ## gofmt, vet, golangci-lint, buf lint and format
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
	golangci-lint run --allow-serial-runners ./...
	buf lint
	buf format -d --exit-code
