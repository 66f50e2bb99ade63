# Tatara: the single entry point. `make help` lists every target.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

include hack/versions.env

# Go modules of the workspace (go.work); each is built, vetted, linted and tested on its own.
MODULES ?= cli operator wrapper e2e

# Everything expensive lands under one cache outside the clone, keyed by version.
TATARA_CACHE ?= $(HOME)/.cache/tatara
export TATARA_CACHE
TOOLS_DIR := $(TATARA_CACHE)/tools
BIN_DIR := $(CURDIR)/bin

GOLANGCI_LINT := $(TOOLS_DIR)/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9.-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: fmt
fmt: ## gofmt every module.
	@for m in $(MODULES); do gofmt -w $$m; done

.PHONY: vet
vet: ## go vet every module.
	@for m in $(MODULES); do echo "== vet $$m"; (cd $$m && go vet ./...); done

.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt check + golangci-lint on every module.
	@unformatted=$$(gofmt -l $(MODULES)); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@for m in $(MODULES); do echo "== lint $$m"; (cd $$m && $(GOLANGCI_LINT) run ./...); done

.PHONY: test
test: vet ## Unit and integration tests of every module.
	@for m in $(MODULES); do echo "== test $$m"; (cd $$m && go test -race -count=1 ./...); done

.PHONY: bench
bench: ## Benchmarks; each prints its figures (ratios against an in-process baseline).
	@for m in $(MODULES); do echo "== bench $$m"; (cd $$m && go test -run '^$$' -bench . -benchtime 1x -v ./... | grep -vE '^(=== RUN|goos|goarch|pkg|cpu|PASS|ok )'); done

.PHONY: docs
docs: ## Regenerate cli/docs/tools.md from the tool catalog.
	cd cli && UPDATE_DOCS=1 go test ./internal/cli -run TestToolReferenceUpToDate -count=1

.PHONY: update-snapshots
update-snapshots: ## Rewrite the per-tool schema snapshots after a reviewed catalog change.
	cd cli && UPDATE_TOOLSNAPS=1 go test ./internal/mcpserver -run TestToolSnapshots -count=1

##@ Build

CLI_VERSION ?= dev

.PHONY: build
build: ## Build every binary into ./bin (static, version-stamped).
	@mkdir -p $(BIN_DIR)
	cd cli && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X tatara.dev/cli/internal/version.Version=$(CLI_VERSION)" -o $(BIN_DIR)/tatara ./cmd/tatara

##@ Wrapper and stand-in agent

FUZZTIME ?= 20s
# Fuzz targets as <module>/<package dir>:<target>; `go test -fuzz` takes one package and one target.
FUZZ_TARGETS := wrapper/internal/transcript:FuzzProcessLine wrapper/internal/transcript:FuzzChunking

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (CI: FUZZTIME=10s).
	@for ft in $(FUZZ_TARGETS); do \
		pkg=$${ft%%:*}; target=$${ft##*:}; mod=$${pkg%%/*}; \
		echo "== fuzz $$target in $$pkg for $(FUZZTIME)"; \
		(cd $$mod && go test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) ./$${pkg#*/}); \
	done

.PHONY: build-wrapper
build-wrapper: ## Build the wrapper and the stand-in agent into ./bin.
	@mkdir -p $(BIN_DIR)
	cd wrapper && CGO_ENABLED=0 go build -o $(BIN_DIR)/wrapper ./cmd/wrapper
	cd e2e && CGO_ENABLED=0 go build -o $(BIN_DIR)/agent-standin ./cmd/agent-standin

build: build-wrapper

##@ Tools (pinned in hack/versions.env, cached under $(TATARA_CACHE))

$(GOLANGCI_LINT):
	@echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into $(@D)"
	GOBIN=$(@D) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: tools
tools: $(GOLANGCI_LINT) ## Install the pinned tools into the cache.

.PHONY: clean-cache
clean-cache: ## Remove the tool/binary cache ($(TATARA_CACHE)).
	rm -rf $(TATARA_CACHE)

##@ Operator (module operator: CRDs, controller, agent-pod builder, REST API)

CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)/controller-gen
# kube-apiserver and etcd for envtest, built by hack/k8s-binaries.sh (nothing is downloaded).
OPERATOR_ENVTEST_DIR := $(TATARA_CACHE)/k8s/$(KUBERNETES_VERSION)/bin
export KUBEBUILDER_ASSETS ?= $(OPERATOR_ENVTEST_DIR)

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate the operator's DeepCopy methods from its API types.
	cd operator && $(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the operator's CRD and RBAC YAML from kubebuilder markers.
	cd operator && $(CONTROLLER_GEN) crd rbac:roleName=tatara-operator paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: verify-generated
verify-generated: $(CONTROLLER_GEN) ## Fail when the operator's generated code or YAML is stale.
	@snap=$$(mktemp -d); trap 'rm -rf "$$snap"' EXIT; \
	files="operator/api/v1alpha1/zz_generated.deepcopy.go operator/config/crd/bases operator/config/rbac"; \
	for f in $$files; do mkdir -p "$$snap/$$(dirname $$f)"; cp -r "$$f" "$$snap/$$f"; done; \
	$(MAKE) --no-print-directory -s generate manifests >/dev/null; \
	stale=0; for f in $$files; do diff -ru "$$snap/$$f" "$$f" || stale=1; done; \
	if [ $$stale = 1 ]; then echo "generated files were stale (now regenerated): run 'make generate manifests' and commit the result"; exit 1; fi; \
	echo "generated operator files are up to date"

# make test checks generated files first, then needs the envtest binaries.
test: verify-generated operator-envtest-assets
bench: operator-envtest-assets

.PHONY: operator-envtest-assets
operator-envtest-assets: ## Build kube-apiserver + etcd $(KUBERNETES_VERSION) for the operator's envtest (once, cached).
	@if [ -x "$(OPERATOR_ENVTEST_DIR)/kube-apiserver" ] && [ -x "$(OPERATOR_ENVTEST_DIR)/etcd" ]; then :; \
		else hack/k8s-binaries.sh kube-apiserver etcd; fi

$(CONTROLLER_GEN):
	@echo "installing controller-gen $(CONTROLLER_GEN_VERSION) into $(@D)"
	GOBIN=$(@D) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

tools: $(CONTROLLER_GEN)

build: build-operator

.PHONY: build-operator
build-operator: ## Build the operator binary into ./bin.
	@mkdir -p $(BIN_DIR)
	cd operator && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(BIN_DIR)/tatara-operator ./cmd
