# Tatara: the single entry point. `make help` lists every target.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

include hack/versions.env

# Go modules of the workspace (go.work); each is built, vetted, linted and tested on its own.
MODULES ?= cli

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

##@ Tools (pinned in hack/versions.env, cached under $(TATARA_CACHE))

$(GOLANGCI_LINT):
	@echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into $(@D)"
	GOBIN=$(@D) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: tools
tools: $(GOLANGCI_LINT) ## Install the pinned tools into the cache.
	@hack/tools.sh kind helm helmfile >/dev/null

.PHONY: clean-cache
clean-cache: ## Remove the tool/binary/rootfs cache ($(TATARA_CACHE)) and the local kind node image.
	@docker rmi $(LOCAL_KIND_NODE_IMAGE) tatara.local/privileged-probe:1 >/dev/null 2>&1 || true
	rm -rf $(TATARA_CACHE)

##@ Kubernetes binaries and kind (issue 7; air-gapped path, see README "Kind clusters")

# Locally built Kubernetes binaries (hack/k8s-binaries.sh); kube-apiserver + etcd also serve envtest.
K8S_BIN_DIR := $(TATARA_CACHE)/k8s/$(KUBERNETES_VERSION)/bin
ENVTEST_ASSETS := $(K8S_BIN_DIR)

.PHONY: k8s-binaries
k8s-binaries: ## Build (once, cached) the Kubernetes binaries, etcd, CoreDNS, crictl, pause.
	hack/k8s-binaries.sh

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver + etcd if needed; print their dir (KUBEBUILDER_ASSETS=$$(make -s envtest-assets)).
	@hack/k8s-binaries.sh kube-apiserver etcd
	@echo $(ENVTEST_ASSETS)

# Node image for kind. Empty = kind's default node image (a laptop); the air-gapped path sets
# KIND_NODE_IMAGE=tatara.local/kind-node:$(KUBERNETES_VERSION), built by `make kind-node-image`.
KIND_NODE_IMAGE ?=
LOCAL_KIND_NODE_IMAGE := tatara.local/kind-node:$(KUBERNETES_VERSION)
# hack/kind.sh runs the pinned kind, with the docker shim only where a probe shows it is needed.
KIND := $(CURDIR)/hack/kind.sh

.PHONY: kind-node-image
kind-node-image: ## Build the kind node image offline (Go modules + Debian packages); no-op when up to date.
	KIND_NODE_IMAGE=$(or $(KIND_NODE_IMAGE),$(LOCAL_KIND_NODE_IMAGE)) hack/kind-node-image.sh

.PHONY: kind-smoke
kind-smoke: ## Create a kind cluster, run a locally built scratch image to Ready, check DNS, delete it.
	KIND_NODE_IMAGE=$(KIND_NODE_IMAGE) hack/kind-smoke.sh

.PHONY: kind helm helmfile
kind: ## Install the pinned kind into the cache; print its path.
	@hack/tools.sh kind
helm: ## Install the pinned helm (version-stamped) into the cache; print its path.
	@hack/tools.sh helm
helmfile: ## Install the pinned helmfile into the cache; print its path.
	@hack/tools.sh helmfile
