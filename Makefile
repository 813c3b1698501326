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
FUZZTIME ?= 30s
LAB_OUT ?= ./lab-report

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: serve
serve: ## run the server with the embedded store (DATA, ADDR)
	$(GO) run ./cmd/protobase serve --data $(DATA) --grpc-addr $(ADDR)

.PHONY: build
build: ## build bin/protobase
	$(GO) build -o $(BIN)/protobase ./cmd/protobase

.PHONY: test
test: ## vet and run every test (what CI runs)
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 15m ./...

.PHONY: test-race
test-race: ## run every test under the race detector
	$(GO) test -count=1 -race -timeout 30m ./...

.PHONY: bench
bench: ## run the Go benchmarks (ingest vs raw Pebble, codecs, validator)
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 3 ./internal/... ./server/

.PHONY: bench-lab
bench-lab: ## run every lab experiment (protobase bench all) into LAB_OUT
	$(GO) run ./cmd/protobase bench all --out $(LAB_OUT)

.PHONY: bench-lab-quick
bench-lab-quick: ## smoke-run every lab experiment in quick mode (under a minute) into LAB_OUT
	$(GO) run ./cmd/protobase bench all --quick --out $(LAB_OUT)

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZTIME
	$(GO) test -run '^$$' -fuzz '^FuzzRoundTrip$$' -fuzztime $(FUZZTIME) ./internal/keys/
	$(GO) test -run '^$$' -fuzz '^FuzzOrder$$' -fuzztime $(FUZZTIME) ./internal/keys/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./internal/keys/
	$(GO) test -run '^$$' -fuzz '^FuzzValidate$$' -fuzztime $(FUZZTIME) ./internal/record/
	$(GO) test -run '^$$' -fuzz '^FuzzPathGet$$' -fuzztime $(FUZZTIME) ./internal/record/
	$(GO) test -run '^$$' -fuzz '^FuzzCompile$$' -fuzztime $(FUZZTIME) ./internal/schema/
	$(GO) test -run '^$$' -fuzz '^FuzzApplySchema$$' -fuzztime $(FUZZTIME) ./internal/schema/
	$(GO) test -run '^$$' -fuzz '^FuzzIndexEntryPK$$' -fuzztime $(FUZZTIME) ./internal/keyspace/
	$(GO) test -run '^$$' -fuzz '^FuzzCompile$$' -fuzztime $(FUZZTIME) ./internal/query/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./client/where/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSearch$$' -fuzztime $(FUZZTIME) ./internal/transport/grpc/
	$(GO) test -run '^$$' -fuzz '^FuzzValueReader$$' -fuzztime $(FUZZTIME) ./internal/transport/gateway/
	$(GO) test -run '^$$' -fuzz '^FuzzWriteBody$$' -fuzztime $(FUZZTIME) ./internal/transport/gateway/
	$(GO) test -run '^$$' -fuzz '^FuzzGuard$$' -fuzztime $(FUZZTIME) ./internal/transport/gateway/
	$(GO) test -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME) ./internal/transport/schemajson/
	$(GO) test -run '^$$' -fuzz '^FuzzParseAuthorization$$' -fuzztime $(FUZZTIME) ./internal/auth/
	$(GO) test -run '^$$' -fuzz '^FuzzParseKey$$' -fuzztime $(FUZZTIME) ./internal/auth/
	$(GO) test -run '^$$' -fuzz '^FuzzEtcdEndpoint$$' -fuzztime $(FUZZTIME) ./server/

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

.PHONY: lint
lint: $(BIN)/golangci-lint $(BIN)/buf ## gofmt, vet, golangci-lint, buf lint and format
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...
	golangci-lint run ./...
	buf lint
	buf format -d --exit-code
