#!/usr/bin/env bash
# `make kind-smoke`: proves a kind cluster works on this machine, end to end, and prints each step
# with its wall time:
#   create a cluster (KIND_NODE_IMAGE, else kind's default node image), load a locally built
#   FROM scratch image, run it as a pod until Ready, resolve a Service name through CoreDNS from
#   that pod, delete the cluster and its docker network.
# KIND_NODE_IMAGE=tatara.local/kind-node:<version> (the air-gapped path) builds that image first
# when it is missing or stale (hack/kind-node-image.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"
# shellcheck source=SCRIPTDIR/lib/kubernetes.sh
source "${ROOT}/hack/lib/kubernetes.sh"

NODE_IMAGE="${KIND_NODE_IMAGE:-}"
# Short: the node's name (<cluster>-control-plane) becomes a pod hostname (63 characters at most).
SUFFIX="$(printf '%05d' "$((RANDOM % 100000))")"
CLUSTER="tatara-smoke-${SUFFIX}"
# A network of our own (kind's default "kind" network may be shared with other clusters), so that
# it can be removed afterwards: kind leaves its network behind on delete.
NETWORK="tatara-smoke-${SUFFIX}"
SMOKE_IMAGE="tatara.local/kind-smoke:${SUFFIX}"
WORK="$(mktemp -d)"
NODE="${CLUSTER}-control-plane"
TIMES=()

log() { printf '[kind-smoke %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

step() { # name cmd...
	local name="$1" start=${SECONDS}
	shift
	log "step ${name} ..."
	"$@"
	TIMES+=("$(printf '%-14s %4ds' "${name}" $((SECONDS - start)))")
	log "step ${name}: ok in $((SECONDS - start))s"
}

kind() { TATARA_KIND_QUIET=1 "${ROOT}/hack/kind.sh" "$@"; }
# kubectl of the node itself (kind nodes ship it with an admin kubeconfig): no host kubectl needed.
kctl() { docker exec -i "${NODE}" kubectl --kubeconfig=/etc/kubernetes/admin.conf "$@"; }

created_cluster=""
cleanup() {
	local rc=$?
	if [[ -n "${created_cluster}" ]]; then
		if ((rc != 0)); then
			log "cluster state at failure:"
			kctl get nodes,pods -A -o wide >&2 2>/dev/null || true
			docker exec "${NODE}" journalctl -u kubelet --no-pager -n 40 >&2 2>/dev/null || true
		fi
		kind delete cluster --name "${CLUSTER}" --kubeconfig "${WORK}/kubeconfig" >/dev/null 2>&1 || true
	fi
	docker network rm "${NETWORK}" >/dev/null 2>&1 || true
	docker rmi "${SMOKE_IMAGE}" >/dev/null 2>&1 || true
	rm -rf "${WORK}"
	exit "${rc}"
}
trap cleanup EXIT

prepare_tools() {
	"${ROOT}/hack/ensure-docker.sh"
	kind version >&2
}

node_image() {
	if [[ -z "${NODE_IMAGE}" ]]; then
		log "KIND_NODE_IMAGE is not set: kind's default node image (needs a registry)"
	elif [[ "${NODE_IMAGE}" == tatara.local/kind-node* ]]; then
		KIND_NODE_IMAGE="${NODE_IMAGE}" "${ROOT}/hack/kind-node-image.sh"
	else
		docker image inspect "${NODE_IMAGE}" >/dev/null 2>&1 || log "${NODE_IMAGE} is not local: kind will pull it"
	fi
}

smoke_image() {
	mkdir -p "${WORK}/smoke"
	(cd "${ROOT}/hack/smoke" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${WORK}/smoke/smoke" .)
	printf 'FROM scratch\nCOPY smoke /smoke\nENTRYPOINT ["/smoke"]\nCMD ["serve"]\n' >"${WORK}/smoke/Dockerfile"
	docker build -q -t "${SMOKE_IMAGE}" "${WORK}/smoke" >/dev/null 2>"${WORK}/build.log" \
		|| { cat "${WORK}/build.log" >&2; die "docker build of ${SMOKE_IMAGE} failed"; }
}

create_cluster() {
	local args=(create cluster --name "${CLUSTER}" --kubeconfig "${WORK}/kubeconfig" --wait 180s)
	[[ -z "${NODE_IMAGE}" ]] || args+=(--image "${NODE_IMAGE}")
	created_cluster=1
	KIND_EXPERIMENTAL_DOCKER_NETWORK="${NETWORK}" kind "${args[@]}"
}

load_image() {
	kind load docker-image "${SMOKE_IMAGE}" --name "${CLUSTER}"
}

run_pod() {
	# The pod needs its namespace's default ServiceAccount, which the controller-manager creates
	# shortly after the control plane is up.
	kctl wait --for=create serviceaccount/default --timeout=60s >/dev/null \
		|| die "the default ServiceAccount was not created"
	kctl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: smoke
  namespace: default
spec:
  containers:
  - name: smoke
    image: ${SMOKE_IMAGE}
    imagePullPolicy: Never
    args: ["serve", ":8080"]
    ports:
    - containerPort: 8080
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
EOF
	kctl wait --for=condition=Ready pod/smoke --timeout=120s >/dev/null \
		|| { kctl describe pod smoke >&2; die "pod smoke did not become Ready"; }
}

check_dns() {
	kctl -n kube-system wait --for=condition=Available deployment/coredns --timeout=120s >/dev/null \
		|| { kctl -n kube-system describe pods -l k8s-app=kube-dns >&2; die "CoreDNS did not become Available"; }
	local want got
	want="$(kctl get service kubernetes -o jsonpath='{.spec.clusterIP}')"
	got="$(kctl exec smoke -- /smoke lookup kubernetes.default.svc.cluster.local)" \
		|| die "the pod could not resolve kubernetes.default.svc.cluster.local"
	[[ " ${got} " == *" ${want} "* ]] || die "kubernetes.default.svc.cluster.local resolved to \"${got}\", want ${want}"
	log "kubernetes.default.svc.cluster.local -> ${got} (Service IP ${want})"
}

delete_cluster() {
	kind delete cluster --name "${CLUSTER}" --kubeconfig "${WORK}/kubeconfig"
	created_cluster=""
	! docker ps -a --format '{{.Names}}' | grep -q "^${CLUSTER}-" || die "containers of ${CLUSTER} remain after delete"
}

clean_network() {
	docker network rm "${NETWORK}" >/dev/null
	! docker network inspect "${NETWORK}" >/dev/null 2>&1 || die "network ${NETWORK} remains"
}

total=${SECONDS}
step tools prepare_tools
step node-image node_image
step smoke-image smoke_image
step create create_cluster
step load-image load_image
step pod-ready run_pod
step dns check_dns
step delete delete_cluster
step network clean_network
log "PASS in $((SECONDS - total))s (node image: ${NODE_IMAGE:-kind default})"
printf '  %s\n' "${TIMES[@]}" >&2
