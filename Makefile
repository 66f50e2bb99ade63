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
