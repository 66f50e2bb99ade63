#!/usr/bin/env bash
# Builds the Kubernetes binaries a kind node image and controller-runtime's envtest need, from the
# Go module proxy only (no prebuilt download exists on air-gapped machines), version-stamped as the
# upstream release binaries are, into a cache outside the clone:
#
#   ${TATARA_CACHE:-$HOME/.cache/tatara}/k8s/${KUBERNETES_VERSION}/bin/
#     kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kube-proxy kubelet
#     kubeadm coredns crictl pause kube-network-policies
#
# Each binary has a stamp file (bin/.stamps/<name>) holding the inputs it was built from; a binary
# whose stamp matches is skipped, so a second run does nothing. Pass names to build only those
# (e.g. `hack/k8s-binaries.sh kube-apiserver etcd` for envtest); no argument builds them all, in
# the order envtest needs them first. Builds are serialised with a lock so that two callers (make
# envtest-assets while a full build runs) never compile at the same time.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"
# shellcheck source=SCRIPTDIR/lib/kubernetes.sh
source "${ROOT}/hack/lib/kubernetes.sh"

CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"
K8S_DIR="${CACHE}/k8s/${KUBERNETES_VERSION}"
BIN="${K8S_DIR}/bin"
STAMPS="${BIN}/.stamps"
# Throwaway build modules live in the cache, never in the clone.
WORK="${CACHE}/build"
LOCK="${CACHE}/k8s/.build.lock"

ALL=(kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm coredns crictl pause
	kube-network-policies)

# shellcheck source=SCRIPTDIR/lib/log.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"

command -v go >/dev/null || die "go is not on PATH (need the Go toolchain to build the Kubernetes binaries)"
command -v flock >/dev/null || die "flock is not on PATH (apt-get install util-linux)"

mkdir -p "${BIN}" "${STAMPS}" "${WORK}"

# Module-mode builds of third-party modules: ignore any go.work of the caller, allow go.sum updates
# in the throwaway modules, no VCS stamping (the modules come from the proxy, not a checkout).
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
# Fixed build date keeps rebuilt binaries byte-identical for the same inputs.
BUILD_DATE="1970-01-01T00:00:00Z"

k8s_minor="${KUBERNETES_VERSION#v}"; k8s_minor="${k8s_minor#*.}"; k8s_minor="${k8s_minor%%.*}"
k8s_major="${KUBERNETES_VERSION#v}"; k8s_major="${k8s_major%%.*}"
# Staging modules (k8s.io/api, client-go, ...) are released as v0.<minor>.<patch>.
STAGING_VERSION="v0.${KUBERNETES_VERSION#v*.}"

# What each binary is built from; a change here (or in versions.env) changes the stamp.
stamp_of() {
	case "$1" in
		etcd) echo "etcd ${ETCD_VERSION}" ;;
		coredns) echo "coredns ${COREDNS_VERSION} plugins ${COREDNS_PLUGINS[*]}" ;;
		crictl) echo "crictl ${CRICTL_VERSION}" ;;
		kube-network-policies) echo "kube-network-policies ${KUBE_NETWORK_POLICIES_VERSION}" ;;
		pause) echo "pause ${PAUSE_VERSION} $(sha256sum "${ROOT}/e2e/cmd/pause/main.go" | cut -c1-16)" ;;
		kube-*|kubectl|kubelet|kubeadm) echo "$1 ${KUBERNETES_VERSION}" ;;
		*) die "unknown binary \"$1\" (known: ${ALL[*]})" ;;
	esac
}

is_fresh() {
	[[ -x "${BIN}/$1" && -f "${STAMPS}/$1" && "$(cat "${STAMPS}/$1")" == "$(stamp_of "$1")" ]]
}

mark() { stamp_of "$1" >"${STAMPS}/$1"; }

# nice: the machine's 2 cores are shared; builds yield to interactive work.
gobuild() { nice -n 10 go build -trimpath "$@"; }

# kubernetes_module prepares a module that requires k8s.io/kubernetes and maps every staging
# module (which kubernetes' own go.mod replaces with ./staging/...) to its published version.
kubernetes_module() {
	local dir="${WORK}/kubernetes-${KUBERNETES_VERSION}"
	if [[ ! -f "${dir}/go.mod" ]]; then
		log "preparing build module ${dir}"
		mkdir -p "${dir}"
		local gomod
		gomod="$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
		[[ -f "${gomod}" ]] || die "could not download the go.mod of k8s.io/kubernetes@${KUBERNETES_VERSION}"
		{
			echo "module tatara.local/k8s-build"
			echo
			echo "go $(go env GOVERSION | sed 's/^go//')"
			echo
			echo "require k8s.io/kubernetes ${KUBERNETES_VERSION}"
			echo
			echo "replace ("
			sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/.*#\t\1 => \1 '"${STAGING_VERSION}"'#p' "${gomod}"
			echo ")"
		} >"${dir}/go.mod.tmp"
		grep -q 'k8s.io/client-go =>' "${dir}/go.mod.tmp" || die "found no staging replace lines in ${gomod}"
		mv "${dir}/go.mod.tmp" "${dir}/go.mod"
	fi
	echo "${dir}"
}

kubernetes_ldflags() {
	local flags="-s -w" pkg
	# Both packages carry the version: component-base for the binaries, client-go for its user agent.
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X ${pkg}.gitVersion=${KUBERNETES_VERSION}"
		flags+=" -X ${pkg}.gitMajor=${k8s_major} -X ${pkg}.gitMinor=${k8s_minor}"
		flags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${BUILD_DATE}"
	done
	echo "${flags}"
}

build_kubernetes() { # names...
	local dir pkgs=() n
	dir="$(kubernetes_module)"
	for n in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/${n}"); done
	(cd "${dir}" && gobuild -ldflags "$(kubernetes_ldflags)" -o "${BIN}/" "${pkgs[@]}")
}

build_etcd() {
	local dir="${WORK}/etcd-${ETCD_VERSION}"
	# `go install ...@version` refuses etcd's server module (its go.mod has replace directives), so
	# it is required from a throwaway module instead.
	if [[ ! -f "${dir}/go.mod" ]]; then
		mkdir -p "${dir}"
		printf 'module tatara.local/etcd-build\n\ngo %s\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
			"$(go env GOVERSION | sed 's/^go//')" "${ETCD_VERSION}" >"${dir}/go.mod"
	fi
	(cd "${dir}" && gobuild -ldflags "-s -w" -o "${BIN}/etcd" go.etcd.io/etcd/server/v3)
}

# CoreDNS with the plugins kubeadm's default Corefile uses (errors health ready kubernetes prometheus
# forward cache loop reload loadbalance) and the few a cluster's operator adds by hand (hosts, which
# the e2e suite's outside zone uses, log, rewrite). Its own main package imports every plugin CoreDNS
# has, most of them clients of cloud APIs (route53, azure, clouddns), etcd, dnstap or tracing: 1,356
# packages to compile for a binary that runs none of them; these are 797. A Corefile that names a
# plugin left out makes CoreDNS fail at start, naming the directive.
COREDNS_PLUGINS=(cache errors forward health hosts kubernetes loadbalance log loop metrics ready reload rewrite)

build_coredns() {
	local dir="${WORK}/coredns-${COREDNS_VERSION}" p
	mkdir -p "${dir}"
	printf 'module tatara.local/coredns-build\n\ngo %s\n\nrequire github.com/coredns/coredns %s\n' \
		"$(go env GOVERSION | sed 's/^go//')" "${COREDNS_VERSION}" >"${dir}/go.mod"
	{
		echo "// Code generated by hack/k8s-binaries.sh. DO NOT EDIT."
		echo "package main"
		echo
		echo "import ("
		for p in "${COREDNS_PLUGINS[@]}"; do echo "	_ \"github.com/coredns/coredns/plugin/${p}\""; done
		echo
		echo "	\"github.com/coredns/coredns/coremain\""
		echo ")"
		echo
		echo "func main() { coremain.Run() }"
	} >"${dir}/main.go"
	(cd "${dir}" && gobuild -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=${COREDNS_VERSION}" -o "${BIN}/coredns" .)
}

build_install() { # name module-path version ldflags
	local name="$1" mod="$2" ver="$3" ldflags="$4" gobin="${WORK}/gobin-$1-$3"
	mkdir -p "${gobin}"
	GOBIN="${gobin}" nice -n 10 go install -trimpath -ldflags "${ldflags}" "${mod}@${ver}"
	install -m 0755 "${gobin}/$(basename "${mod}")" "${BIN}/${name}"
	rm -rf "${gobin}"
}

build_pause() {
	# A package of the e2e module (vet, lint and test see it), built in the workspace.
	(cd "${ROOT}/e2e" && GOWORK="" GOFLAGS=-buildvcs=false gobuild -ldflags "-s -w -X main.version=${PAUSE_VERSION}" -o "${BIN}/pause" ./cmd/pause)
}

# build_step builds the stale ones among the given binaries in one go build (they share a module
# and its compile cache), under the lock, and stamps them.
build_step() {
	local stale=() n start
	# Fast path without the lock: a caller that only needs fresh binaries (make envtest-assets)
	# must not wait for an unrelated build that holds it.
	for n in "$@"; do is_fresh "${n}" || stale+=("${n}"); done
	if ((${#stale[@]} == 0)); then
		log "up to date: $*"
		return
	fi
	stale=()
	exec 9>"${LOCK}"
	flock 9
	for n in "$@"; do is_fresh "${n}" || stale+=("${n}"); done
	if ((${#stale[@]} == 0)); then
		log "up to date: $*"
		exec 9>&-
		return
	fi
	start=${SECONDS}
	log "building ${stale[*]}"
	case "${stale[0]}" in
		etcd) build_etcd ;;
		coredns) build_coredns ;;
		crictl) build_install crictl sigs.k8s.io/cri-tools/cmd/crictl "${CRICTL_VERSION}" \
			"-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${CRICTL_VERSION#v}" ;;
		pause) build_pause ;;
		# The module's one command is its package "cmd" (go install names the binary after it).
		kube-network-policies) build_install kube-network-policies sigs.k8s.io/kube-network-policies/cmd \
			"${KUBE_NETWORK_POLICIES_VERSION}" "-s -w" ;;
		*) build_kubernetes "${stale[@]}" ;;
	esac
	for n in "${stale[@]}"; do
		[[ -x "${BIN}/${n}" ]] || die "build of ${n} produced no binary at ${BIN}/${n}"
		mark "${n}"
	done
	log "built ${stale[*]} in $((SECONDS - start))s"
	exec 9>&-
}

want=("$@")
((${#want[@]})) || want=("${ALL[@]}")
for n in "${want[@]}"; do stamp_of "${n}" >/dev/null; done

total_start=${SECONDS}
# Order matters: envtest needs kube-apiserver and etcd first, then kubectl; the remaining
# Kubernetes components compile in one step since they share most packages.
rest=()
for n in "${want[@]}"; do
	case "${n}" in
		kube-apiserver|etcd|kubectl|coredns|crictl|pause|kube-network-policies) ;;
		*) rest+=("${n}") ;;
	esac
done
for n in kube-apiserver etcd kubectl; do
	if [[ " ${want[*]} " == *" ${n} "* ]]; then build_step "${n}"; fi
done
((${#rest[@]} == 0)) || build_step "${rest[@]}"
for n in coredns crictl pause kube-network-policies; do
	if [[ " ${want[*]} " == *" ${n} "* ]]; then build_step "${n}"; fi
done
log "done in $((SECONDS - total_start))s: ${BIN}"
