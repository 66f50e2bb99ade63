# Tatara: the single entry point. `make help` lists every target.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

include hack/versions.env

# Go modules of the workspace (go.work); each is built, vetted, linted and tested on its own.
# charts only renders templates in one goroutine: -race there would only double the cold compile
# of Helm and Prometheus (~8 min on 2 cores).
NO_RACE_MODULES := charts
MODULES ?= cli operator wrapper e2e charts testkit

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
vet: ## go vet every module (make lint runs the same analyzers).
	@for m in $(MODULES); do echo "== vet $$m"; (cd $$m && go vet ./...); done

# Every shell script of the repository (by its shebang), for shellcheck.
SHELL_SCRIPTS = $(shell git ls-files | xargs grep -lE '^\#!(/usr/bin/env (ba)?sh|/bin/(ba)?sh)' 2>/dev/null)

.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt check, shellcheck on every script, golangci-lint on every module.
	@unformatted=$$(gofmt -l $(MODULES)); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@echo "== shellcheck $(words $(SHELL_SCRIPTS)) scripts"; hack/ensure-apt.sh shellcheck && shellcheck -x $(SHELL_SCRIPTS)
	@for m in $(MODULES); do echo "== lint $$m"; (cd $$m && $(GOLANGCI_LINT) run ./...); done

# Everything make test needs first, in one place: pins consistent, the tools and Kubernetes
# binaries the chart and envtest tests run, then the MCP conformance suite. The pinned agent CLI
# (TATARA_CLAUDE_CODE) is for e2e/agentcli, which runs it under the wrapper. go vet's analyzers run
# in make lint (golangci-lint's govet runs go vet's default set, under every build tag), so make
# test does not run them again: that would be one more compile of every dependency, without -race.
.PHONY: test
test: check-pins chart-tools envtest-assets conformance ## Unit and integration tests of every module.
	@TATARA_CLAUDE_CODE=$$(hack/claude-code.sh); export TATARA_CLAUDE_CODE; \
	for m in $(MODULES); do echo "== test $$m"; race=-race; case " $(NO_RACE_MODULES) " in *" $$m "*) race=;; esac; \
		(cd $$m && go test $$race -count=1 ./...); done

# The tests with the machine busy: stress-ng (Debian) keeps every core loaded beside two `make test`
# runs, the way a shared CI machine or a laptop is; a test that waits for a moment that usually
# comes first, instead of an observable state, fails here. BUSY_RUNS overrides the count.
BUSY_RUNS ?= 2
.PHONY: test-busy
test-busy: ## make test twice while stress-ng loads every core (finds tests that depend on timing).
	@hack/ensure-apt.sh stress-ng
	@stress-ng --cpu "$$(nproc)" --cpu-method matrixprod --quiet & load=$$!; \
	trap 'kill $$load 2>/dev/null; wait $$load 2>/dev/null' EXIT; \
	for i in $$(seq $(BUSY_RUNS)); do echo "== test-busy: run $$i of $(BUSY_RUNS), $$(nproc) cores loaded"; $(MAKE) --no-print-directory test; done

# The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned in
# hack/conformance) against the real `tatara mcp` over streamable HTTP; the scenarios that apply to
# a tools-only server must pass, the others are listed with their reason in
# cli/internal/cli/conformance_test.go.
.PHONY: conformance
conformance: ## The MCP conformance suite against tatara mcp (streamable HTTP).
	@echo "== conformance: the official MCP suite against tatara mcp"
	@runner=$$(hack/mcp-conformance.sh) && cd cli && TATARA_MCP_CONFORMANCE="$$runner" \
		go test -race -tags conformance -run '^TestMCPConformance$$' -count=1 ./internal/cli

.PHONY: bench
bench: ## Benchmarks; each prints its figures (ratios against an in-process baseline).
	@for m in $(MODULES); do echo "== bench $$m"; (cd $$m && go test -run '^$$' -bench . -benchtime 1x -v ./... | grep --line-buffered -vE '^(=== RUN|goos|goarch|pkg|cpu|PASS|ok )'); done

.PHONY: bench-model-gateway
bench-model-gateway: ## The model gateway against the upstream straight, in one run: p50/p99 added time to first byte and to the end, and the heap with 100 streams open.
	@cd cli && go test -run '^$$' -bench 'BenchmarkGateway' -benchtime 1x ./internal/modelgateway/ | grep --line-buffered -E '^Benchmark' | tr '\t' '\n' | sed 's/^ *//'

.PHONY: bench-tool-search
bench-tool-search: ## The real agent CLI against the model stand-in: tokens and turns per ENABLE_TOOL_SEARCH mode.
	@mkdir -p $(BIN_DIR)
	@$(call go_build,tatara,$(BIN_DIR)/tatara)
	@claude=$$(hack/claude-code.sh) && cd e2e && go run ./cmd/toolsearch-bench --claude "$$claude" --tatara $(BIN_DIR)/tatara

# Bursts of 1,000 and 10,000 Tasks over 10 Projects against one in-process operator on envtest,
# the real kube-scheduler and kwok's 100 fake nodes: every agent pod is scheduled, runs and ends
# (operator/test/integration/scale_test.go and kwok_test.go, build tag scale). TATARA_SCALE_SIZES=100,1000
# for a quicker look. Minutes long, so neither make test nor make bench runs it.
.PHONY: bench-scale
bench-scale: envtest-assets ## Operator scale benchmark: Task bursts of 1,000 and 10,000 on a real API server, scheduler and kwok nodes; prints a table.
	@sched=$$(hack/k8s-binaries.sh kube-scheduler >&2 && echo $(K8S_BIN_DIR)/kube-scheduler) && kwok=$$(hack/tools.sh kwok) && \
	cd operator && TATARA_KUBE_SCHEDULER=$$sched TATARA_KWOK=$$kwok go test -tags scale -run '^TestScale$$' -count=1 -timeout 90m -v ./test/integration | grep --line-buffered -vE '^(=== RUN|PASS|ok )'

# The REST API under agent load (operator/test/integration/restload_test.go, build tag restload):
# 500 agents, each with its own Task and the token the operator minted, alternate task_get and
# task_note over HTTP for 30 s against one in-process operator on envtest (default rate limit
# 20/s, burst 40 per Task); baseline: the same 500 goroutines loop client.Get on the operator's
# cache for 10 s. Prints answered/s, p50/p99 and REST/baseline. Target: no answer but 2xx or 429
# (the only failure); times are printed, never asserted. Quick run:
# TATARA_RESTLOAD_AGENTS=50 TATARA_RESTLOAD_DURATION=10s TATARA_RESTLOAD_BASELINE=5s make bench-rest
# An open loop of task_note instead: TATARA_RESTLOAD_NOTE_RATE=50 make bench-rest
.PHONY: bench-rest
bench-rest: envtest-assets ## Operator REST API under load: 500 agents x (task_get, task_note) for 30 s vs a cache Get; target: only 2xx and 429.
	@cd operator && go test -tags restload -run '^TestRESTLoad$$' -count=1 -timeout 30m -v ./test/integration | grep --line-buffered -vE '^(=== RUN|PASS|ok )'

# API priority and fairness (operator/test/integration/apf_test.go, build tag restload): the
# operator as its chart's ServiceAccount under bench-rest's closed loop, a neighbour ServiceAccount
# reading a ConfigMap 20 times a second; first with the API server's built-in flow schemas, then
# with the FlowSchema and PriorityLevelConfiguration that helm renders from the tatara-operator
# chart. Prints the neighbour's latency, the notes' and the API server's 429s to the operator.
.PHONY: bench-apf
bench-apf: envtest-assets ## The operator's API priority level under agent load: a neighbour tenant's latency without and with the chart's FlowSchema.
	@mkdir -p $(BIN_DIR) && helm=$$(hack/tools.sh helm) && \
	$$helm dependency build charts/tatara-operator >/dev/null && \
	$$helm template tatara-operator charts/tatara-operator --namespace tatara-system --show-only templates/flowcontrol.yaml >$(BIN_DIR)/flowcontrol.yaml && \
	cd operator && TATARA_FLOWCONTROL_MANIFEST=$(abspath $(BIN_DIR))/flowcontrol.yaml go test -tags restload -run '^TestRESTLoadNeighbour$$' -count=1 -timeout 30m -v ./test/integration | grep --line-buffered -vE '^(=== RUN|PASS|ok )'

# Every golden file is rewritten by its test with UPDATE_GOLDEN=1 (package tatara.dev/testkit/golden).
# The packages are found, not listed: every package whose tests import testkit/golden runs whole, so
# a new golden test is never left out. They build as make test builds them (-race where it uses
# it), so that make verify and make test share one compile of every dependency.
.PHONY: update-golden
update-golden: chart-tools
	@for m in $(MODULES); do \
		pkgs=$$(cd $$m && go list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... | awk '/ tatara\.dev\/testkit\/golden( |$$)/ {print $$1}'); \
		[ -n "$$pkgs" ] || continue; echo "== update-golden $$m:" $$pkgs; \
		race=-race; case " $(NO_RACE_MODULES) " in *" $$m "*) race=;; esac; \
		(cd $$m && UPDATE_GOLDEN=1 go test $$race -count=1 $$pkgs) || exit 1; done

##@ Generate and verify

# One verb regenerates, one checks. make generate runs every generator in the order they feed each
# other: the operator's code and YAML (generate-operator), their copy in its chart (sync-crds),
# each chart's Chart.lock (chart-deps), the e2e monitoring CRDs (monitoring-crds), then every
# golden file (update-golden: docs, tool and chart snapshots, pod goldens), which the others feed.
# Each step is a target of its own for a narrow rerun (released charts' comments name some of
# them); make help lists only generate and verify. make verify (CI runs it) runs make generate and
# fails on any file it changed.
.PHONY: generate
generate: ## Regenerate every generated and golden file: codegen, CRDs and their chart copy, Chart.locks, monitoring CRDs, goldens.
	@$(MAKE) --no-print-directory generate-operator
	@$(MAKE) --no-print-directory sync-crds
	@$(MAKE) --no-print-directory chart-deps
	@$(MAKE) --no-print-directory monitoring-crds
	@$(MAKE) --no-print-directory update-golden
	@git status --short

.PHONY: verify
verify: ## Fail when a generated or golden file is stale: names each one and the fix (make generate).
	@hack/verify-generated.sh

##@ Build

# Component versions live in ONE place: the appVersion of each component's chart. `make bump` moves
# it together with the helmfile pins; `make check-pins` proves they all agree.
chart_app_version = $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$$/\1/p' charts/$(1)/Chart.yaml)
CLI_VERSION := $(call chart_app_version,tatara-cli)
WRAPPER_VERSION := $(call chart_app_version,tatara-wrapper)
OPERATOR_VERSION := $(call chart_app_version,tatara-operator)
# The e2e stand-ins are versioned with the wrapper: the agent stand-in (the wrapper's process
# tests), the model stand-in (the kind environment's model) and the e2e git server.
STANDIN_VERSION := $(WRAPPER_VERSION)

# Binaries: <name>_MODULE, _PKG (inside the module), _VERSION.
BINARIES := tatara wrapper operator agent-standin model-standin outside-host git-server
tatara_MODULE := cli
tatara_PKG := ./cmd/tatara
tatara_VERSION := $(CLI_VERSION)
# The git commit, for `tatara version` and every *_build_info{revision}.
REVISION ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
wrapper_MODULE := wrapper
wrapper_PKG := ./cmd/wrapper
wrapper_VERSION := $(WRAPPER_VERSION)
operator_MODULE := operator
operator_PKG := ./cmd
operator_VERSION := $(OPERATOR_VERSION)
agent-standin_MODULE := testkit
agent-standin_PKG := ./cmd/agent-standin
agent-standin_VERSION := $(STANDIN_VERSION)
model-standin_MODULE := e2e
model-standin_PKG := ./cmd/model-standin
model-standin_VERSION := $(STANDIN_VERSION)
outside-host_MODULE := e2e
outside-host_PKG := ./cmd/outside-host
outside-host_VERSION := $(STANDIN_VERSION)
git-server_MODULE := e2e
git-server_PKG := ./cmd/git-server
git-server_VERSION := $(STANDIN_VERSION)
# Only the binaries whose module is in this checkout (a branch may not have them all yet).
PRESENT_BINARIES := $(foreach b,$(BINARIES),$(if $(wildcard $($(b)_MODULE)/go.mod),$(b)))

# go build of one binary: static, trimmed, version-stamped. $(1)=name $(2)=output path $(3)=env.
# Every binary reports its build through tatara.dev/cli/pkg/buildinfo: one pair of -X flags.
BUILDINFO_PKG := tatara.dev/cli/pkg/buildinfo
go_build = (cd $($(1)_MODULE) && $(3) CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X $(BUILDINFO_PKG).Version=$($(1)_VERSION) -X $(BUILDINFO_PKG).revision=$(REVISION)" -o $(2) $($(1)_PKG))

.PHONY: build
build: ## Build every binary into ./bin (static, version-stamped with its chart's appVersion).
	@mkdir -p $(BIN_DIR)
	@$(foreach b,$(PRESENT_BINARIES),echo "== build $(b) $($(b)_VERSION)"; $(call go_build,$(b),$(BIN_DIR)/$(b)) &&) true

##@ Wrapper and stand-in agent

# Fuzz targets as <module>/<package dir>:<target>:<executions>. Budgets are counts, not durations:
# a duration-based -fuzztime can fail with a spurious "context deadline exceeded" when it expires
# while a worker is busy (go.dev/issue/75804, unfixed in Go 1.26), and a count does the same work on
# a loaded machine as on an idle one. Each budget is about 10 s on 2 idle cores.
FUZZ_TARGETS := \
	wrapper/internal/transcript:FuzzProcessLine:60000x \
	wrapper/internal/transcript:FuzzChunking:3000x \
	operator/internal/egress/allowlist:FuzzCheck:30000x
# FUZZTIME overrides every budget, e.g. `make fuzz FUZZTIME=200000x` for a longer local search.
FUZZTIME ?=
FUZZMINIMIZETIME ?= 10s

.PHONY: fuzz
fuzz: ## Run every fuzz target for its execution budget (FUZZTIME overrides all).
	@for ft in $(FUZZ_TARGETS); do \
		pkg=$${ft%%:*}; rest=$${ft#*:}; target=$${rest%%:*}; budget=$${rest#*:}; mod=$${pkg%%/*}; \
		if [ -n "$(FUZZTIME)" ]; then budget=$(FUZZTIME); fi; \
		echo "== fuzz $$target in $$pkg for $$budget"; \
		(cd $$mod && go test -run '^$$' -fuzz "^$$target\$$" -fuzztime $$budget \
			-fuzzminimizetime $(FUZZMINIMIZETIME) ./$${pkg#*/}) || exit 1; \
	done

##@ End to end

# KIND_NODE_IMAGE unset: hack/kind-node-select.sh probes whether kind's default node image is here
# or can be pulled (a laptop) and otherwise builds and uses tatara.local/kind-node:<version> from Go
# modules and Debian packages (a machine that cannot pull images). Set, it is used as is.
E2E_TIMEOUT ?= 60m
# E2E_RUN: a go test -run regexp of the features to run (all when empty), on a fresh cluster.
# E2E_PARALLEL: above the number of features (suite/schedule_test.go: an alone feature holds its
# slot while it waits for the shared ones).
E2E_RUN ?=
E2E_PARALLEL ?= 32
# E2E_TAGS: build tags besides e2e, comma-separated (benchstart: make bench-start's feature).
E2E_TAGS ?=

# Everything make e2e builds before its suite, in one place; each part is a no-op when up to date.
# .ci/run starts it in the background at its own start, so that a cold machine builds the node
# image and the images on the cores that lint and test leave idle.
.PHONY: e2e-build
e2e-build: ## Build what the e2e suite runs: the node image (when the probe picks the local one), kind, helm, helmfile, the images.
	@node_image=$$(KIND_NODE_IMAGE="$(KIND_NODE_IMAGE)" hack/kind-node-select.sh); \
	echo "== e2e: node image $${node_image:-kind default}"; \
	case "$$node_image" in tatara.local/kind-node:*) $(MAKE) -s kind-node-image KIND_NODE_IMAGE=$$node_image;; esac; \
	echo "== e2e: tools"; hack/tools.sh kind helm helmfile >/dev/null; \
	echo "== e2e: images"; $(MAKE) -s upgrade-image

.PHONY: e2e
e2e: ## The main job: images, a kind cluster, helmfile sync (env kind), the e2e suite, tear down.
	@start=$$(date +%s); \
	node_image=$$(KIND_NODE_IMAGE="$(KIND_NODE_IMAGE)" hack/kind-node-select.sh); \
	$(MAKE) -s e2e-build KIND_NODE_IMAGE=$$node_image; \
	echo "== e2e: suite"; \
	set +e; cd e2e && KIND_NODE_IMAGE="$$node_image" E2E_IMAGES="$(IMAGE_REFS)" E2E_UPGRADE_IMAGE="$(UPGRADE_IMAGE)" \
		go test -tags e2e$(if $(E2E_TAGS),$(comma)$(E2E_TAGS)) -count=1 -v -timeout $(E2E_TIMEOUT) -parallel $(E2E_PARALLEL) $(if $(E2E_RUN),-run '$(E2E_RUN)') ./suite/ 2>&1 | grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'; \
	rc=$${PIPESTATUS[0]}; echo "== e2e: total $$(( $$(date +%s) - start ))s (exit $$rc)"; exit $$rc

comma := ,

# TATARA_BENCH_START_TASKS=5 make bench-start; with E2E_KEEP_CLUSTER=1 it reuses a kept cluster.
.PHONY: bench-start
bench-start: ## Agent start on kind: p50/p95 from Task to first MCP request over 20 cold and 20 warm (pool) Tasks, as a ratio to a plain pod's start.
	@$(MAKE) -s e2e E2E_TAGS=benchstart E2E_RUN='^TestBenchAgentStart$$'

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

##@ Kubernetes binaries and kind (the air-gapped path: docs/kind.md)

# The Kubernetes version of envtest, the chart tests' API server and the local kind node image:
# `make e2e K8S_VERSION=$(KUBERNETES_OLDEST_VERSION)` runs everything on the oldest supported one.
K8S_VERSION ?= $(KUBERNETES_VERSION)
export K8S_VERSION
# Locally built Kubernetes binaries (hack/k8s-binaries.sh); kube-apiserver + etcd also serve envtest.
K8S_BIN_DIR := $(TATARA_CACHE)/k8s/$(K8S_VERSION)/bin
# The operator's envtest and the chart tests' server-side dry runs use this apiserver and etcd.
export KUBEBUILDER_ASSETS ?= $(K8S_BIN_DIR)

.PHONY: k8s-binaries
k8s-binaries: ## Build (once, cached) the Kubernetes binaries, etcd, CoreDNS, crictl, pause.
	hack/k8s-binaries.sh

.PHONY: envtest-assets
envtest-assets: ## Build kube-apiserver + etcd if needed; print their dir (KUBEBUILDER_ASSETS=$$(make -s envtest-assets)).
	@hack/k8s-binaries.sh kube-apiserver etcd
	@echo $(K8S_BIN_DIR)

# Node image for kind. Unset: chosen by hack/kind-node-select.sh (see e2e above); set, used as is.
KIND_NODE_IMAGE ?=
LOCAL_KIND_NODE_IMAGE := tatara.local/kind-node:$(K8S_VERSION)
# hack/kind.sh runs the pinned kind, with the docker shim only where a probe shows it is needed.
KIND := $(CURDIR)/hack/kind.sh

.PHONY: kind-node-image
kind-node-image: ## Build the kind node image offline (Go modules + Debian packages); no-op when up to date.
	KIND_NODE_IMAGE=$(or $(KIND_NODE_IMAGE),$(LOCAL_KIND_NODE_IMAGE)) hack/kind-node-image.sh

.PHONY: kind-smoke
kind-smoke: ## Create a kind cluster, run a locally built scratch image to Ready, check DNS, delete it (e2e/smoke).
	@node_image=$$(KIND_NODE_IMAGE="$(KIND_NODE_IMAGE)" hack/kind-node-select.sh); \
	case "$$node_image" in tatara.local/kind-node:*) $(MAKE) -s kind-node-image KIND_NODE_IMAGE=$$node_image;; esac; \
	hack/tools.sh kind >/dev/null; \
	cd e2e && KIND_NODE_IMAGE="$$node_image" go test -tags e2e -count=1 -v -timeout 15m ./smoke/ 2>&1 | grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'

.PHONY: kind helm helmfile
kind: ## Install the pinned kind into the cache; print its path.
	@hack/tools.sh kind
helm: ## Install the pinned helm (version-stamped) into the cache; print its path.
	@hack/tools.sh helm
helmfile: ## Install the pinned helmfile into the cache; print its path.
	@hack/tools.sh helmfile

##@ Packaging: images, charts, helmfile pins

# Images `make images` builds: <registry>/<name>:<version>, the version being the component's.
IMAGE_REGISTRY ?= tatara.local
# Images built FROM scratch from hack/image/Dockerfile; the images that run git are built from one
# Debian root filesystem (hack/lib/git-rootfs.sh): the wrapper's, the agent's and the git server's.
IMAGE_NAMES := tatara-cli tatara-operator tatara-model-standin
tatara-cli_VERSION := $(CLI_VERSION)
tatara-operator_VERSION := $(OPERATOR_VERSION)
tatara-model-standin_VERSION := $(STANDIN_VERSION)
# The wrapper image (hack/wrapper-image.sh): the static wrapper and git, since workspace-init clones
# with it and installs the wrapper for an agent image in the same init container.
WRAPPER_IMAGE := $(IMAGE_REGISTRY)/tatara-wrapper:$(WRAPPER_VERSION)
AGENT_IMAGE := $(IMAGE_REGISTRY)/tatara-agent-claude:$(CLAUDE_CODE_VERSION)
# The e2e git server (hack/git-server-image.sh): the agent image's Debian root filesystem (git)
# plus the static git-server binary.
GIT_SERVER_IMAGE := $(IMAGE_REGISTRY)/tatara-git-server:$(STANDIN_VERSION)
# The e2e monitoring stack (e2e/charts/monitoring, installed by helmfile's kind environment):
# prometheus-operator, its config reloader and Prometheus, FROM scratch, built from the Go module
# proxy at the versions of hack/versions.env (hack/monitoring-images.sh).
MONITORING_IMAGES := $(IMAGE_REGISTRY)/prometheus-operator:$(PROMETHEUS_OPERATOR_VERSION) \
	$(IMAGE_REGISTRY)/prometheus-config-reloader:$(PROMETHEUS_OPERATOR_VERSION) \
	$(IMAGE_REGISTRY)/prometheus:$(PROMETHEUS_VERSION)
IMAGE_REFS := $(foreach i,$(IMAGE_NAMES),$(IMAGE_REGISTRY)/$(i):$($(i)_VERSION)) $(WRAPPER_IMAGE) $(AGENT_IMAGE) $(GIT_SERVER_IMAGE) $(MONITORING_IMAGES)
IMAGE_CONTEXT := $(BIN_DIR)/image-context
# The binaries the images hold (the agent stand-in is only for the wrapper's tests).
IMAGE_BINARIES := tatara wrapper operator model-standin outside-host git-server
# Images are linux binaries of the host's architecture (kind runs on this host).
IMAGE_GOARCH ?= $(shell go env GOARCH)

.PHONY: images
images: ## Build the images (FROM scratch, the wrapper and Claude Code agent images with git, the e2e git server and monitoring stack), tagged with the pinned versions.
	@hack/ensure-docker.sh
	@$(foreach b,$(IMAGE_BINARIES),[ -f $($(b)_MODULE)/go.mod ] || { echo "make images: module $($(b)_MODULE)/ (binary $(b)) is missing from this checkout"; exit 1; };)
	@mkdir -p $(IMAGE_CONTEXT)
	@$(foreach b,$(IMAGE_BINARIES),echo "== build $(b) $($(b)_VERSION) (linux/$(IMAGE_GOARCH))"; $(call go_build,$(b),$(IMAGE_CONTEXT)/$(b),GOOS=linux GOARCH=$(IMAGE_GOARCH)) &&) true
	@$(foreach i,$(IMAGE_NAMES),echo "== image $(IMAGE_REGISTRY)/$(i):$($(i)_VERSION)"; \
		docker build -q --target $(i) --build-arg VERSION=$($(i)_VERSION) -t $(IMAGE_REGISTRY)/$(i):$($(i)_VERSION) \
		-f hack/image/Dockerfile $(IMAGE_CONTEXT) 2>&1 >/dev/null | sed '/legacy builder is deprecated/,/buildx\//d' &&) true
	@echo "== image $(WRAPPER_IMAGE)"; WRAPPER_BINARY=$(IMAGE_CONTEXT)/wrapper hack/wrapper-image.sh $(WRAPPER_IMAGE)
	@echo "== image $(AGENT_IMAGE)"; GOARCH=$(IMAGE_GOARCH) hack/agent-image.sh $(AGENT_IMAGE)
	@echo "== image $(GIT_SERVER_IMAGE)"; GIT_SERVER_BINARY=$(IMAGE_CONTEXT)/git-server hack/git-server-image.sh $(GIT_SERVER_IMAGE)
	@echo "== images $(MONITORING_IMAGES)"; IMAGE_REGISTRY=$(IMAGE_REGISTRY) GOARCH=$(IMAGE_GOARCH) hack/monitoring-images.sh
	@docker image ls --format '{{.Repository}}:{{.Tag}}\t{{.Size}}' | grep -F -e '$(IMAGE_REGISTRY)/tatara-' -e '$(IMAGE_REGISTRY)/prometheus' | sort

# The e2e suite's upgrade release (e2e/suite/upgrade_test.go): the operator as the next patch
# version, built with the test-only CRD change of operator/test/upgradeprobe (build tag
# e2eupgrade), so the upgrade carries a version bump and a CRD change the way a release MR does.
OPERATOR_NEXT_VERSION := $(shell echo '$(OPERATOR_VERSION)' | awk -F. '{print $$1 "." $$2 "." $$3+1}')
UPGRADE_IMAGE := $(IMAGE_REGISTRY)/tatara-operator:$(OPERATOR_NEXT_VERSION)

.PHONY: upgrade-image
# Its context is a copy of the images' with the operator replaced: Docker's legacy builder builds
# every stage before the target, so the other stages' binaries must be there too.
upgrade-image: images ## Build the e2e upgrade's operator image (next patch version, test-only CRD change).
	@rm -rf $(IMAGE_CONTEXT)/upgrade && mkdir -p $(IMAGE_CONTEXT)/upgrade
	@find $(IMAGE_CONTEXT) -maxdepth 1 -type f -exec cp {} $(IMAGE_CONTEXT)/upgrade/ \;
	@echo "== build operator $(OPERATOR_NEXT_VERSION) (-tags e2eupgrade, linux/$(IMAGE_GOARCH))"
	@cd operator && GOOS=linux GOARCH=$(IMAGE_GOARCH) CGO_ENABLED=0 go build -tags e2eupgrade -trimpath \
		-ldflags "-s -w -X $(BUILDINFO_PKG).Version=$(OPERATOR_NEXT_VERSION) -X $(BUILDINFO_PKG).revision=$(REVISION)" \
		-o $(IMAGE_CONTEXT)/upgrade/operator ./cmd
	@echo "== image $(UPGRADE_IMAGE)"
	@docker build -q --target tatara-operator --build-arg VERSION=$(OPERATOR_NEXT_VERSION) -t $(UPGRADE_IMAGE) \
		-f hack/image/Dockerfile $(IMAGE_CONTEXT)/upgrade 2>&1 >/dev/null | sed '/legacy builder is deprecated/,/buildx\//d'

.PHONY: image-refs
image-refs: ## Print the image references make images builds.
	@echo $(IMAGE_REFS)

# The merge request's diff without the helm-diff plugin: the environment's releases rendered with
# the pinned helm and helmfile, compared by the API server (kubectl diff --server-side). Exit 1
# means a change. KUBECONFIG selects the cluster.
ENV ?= production
.PHONY: diff
diff: ## Diff an environment's releases against the cluster, no plugin: make diff ENV=kind|production (KUBECONFIG).
	@hack/helmfile-diff.sh $(ENV)

.PHONY: check-pins
check-pins: ## Prove helmfile pins == Chart.yaml version/appVersion (agent: hack/versions.env) == the tags make images builds.
	@cd charts && go run ./cmd/pins check --root .. --images "$(IMAGE_REFS)"

.PHONY: bump
bump: ## Bump a component everywhere: make bump COMPONENT=cli|wrapper|operator|agent VERSION=x.y.z
	@if [ -z "$(COMPONENT)" ] || [ -z "$(VERSION)" ]; then echo "usage: make bump COMPONENT=cli|wrapper|operator|agent VERSION=x.y.z"; exit 2; fi
	@cd charts && go run ./cmd/pins bump --root .. --component "$(COMPONENT)" --version "$(VERSION)"

# The operator's generated CRDs and RBAC rules, copied into the tatara-operator chart.
.PHONY: sync-crds
sync-crds:
	@cd charts && go run ./cmd/syncoperator --root ..

# The prometheus-operator CRDs: the e2e monitoring chart's crds/, which the chart tests load too.
.PHONY: monitoring-crds
monitoring-crds:
	@hack/monitoring-crds.sh

# The chart tests run the pinned helm and helmfile and a real kube-apiserver + etcd (envtest);
# they fail, never skip, when one is missing.
export TATARA_HELM := $(TOOLS_DIR)/helm-$(HELM_VERSION)/helm
export TATARA_HELMFILE := $(TOOLS_DIR)/helmfile-$(HELMFILE_VERSION)/helmfile

# The library chart charts/tatara-common: a chart that depends on it pins its version in Chart.yaml
# and Chart.lock. After its version moves (and the pins with it), every Chart.lock is rewritten; helm
# and helmfile build the charts/ directory from them (the chart tests too, in their TestMain). helm
# leaves a Chart.lock whose digest did not change as it was.
.PHONY: chart-deps
chart-deps:
	@helm=$$(hack/tools.sh helm) && for c in $$(grep -l 'file://../tatara-common' charts/*/Chart.yaml); do \
		d=$$(dirname $$c); echo "== helm dependency update $$d"; $$helm dependency update $$d >/dev/null || exit 1; done

.PHONY: chart-tools
chart-tools: envtest-assets ## Install (once, cached) helm, helmfile, kube-apiserver and etcd for the chart tests.
	@hack/tools.sh helm helmfile >/dev/null

##@ Operator (module operator: CRDs, controller, agent-pod builder, REST API)

CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)/controller-gen
# kube-apiserver and etcd for envtest, built by hack/k8s-binaries.sh (nothing is downloaded).

# The operator's DeepCopy methods, CRDs and RBAC (controller-gen, from the kubebuilder markers).
.PHONY: generate-operator
generate-operator: $(CONTROLLER_GEN)
	cd operator && $(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	cd operator && $(CONTROLLER_GEN) crd rbac:roleName=tatara-operator paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

bench: envtest-assets

$(CONTROLLER_GEN):
	@echo "installing controller-gen $(CONTROLLER_GEN_VERSION) into $(@D)"
	GOBIN=$(@D) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

tools: $(CONTROLLER_GEN)
