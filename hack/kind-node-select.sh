#!/usr/bin/env bash
# Prints the node image kind should use, so `make e2e` and `make kind-smoke` work as typed on both
# kinds of machine:
#   KIND_NODE_IMAGE set     -> that image (no probe).
#   unset                   -> kind's default node image, if Docker has it or can pull it within
#                              KIND_PULL_PROBE_TIMEOUT (default 20s): prints "" (kind's default);
#                              otherwise the node image built here from Go modules and Debian
#                              packages, tatara.local/kind-node:<KUBERNETES_VERSION>, with one line
#                              (always for a K8S_VERSION of another minor than kind's default)
#                              on stderr that says so and names the variable that skips the probe.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"
# shellcheck source=SCRIPTDIR/lib/kubernetes.sh
source "${ROOT}/hack/lib/kubernetes.sh"

if [[ -n "${KIND_NODE_IMAGE:-}" ]]; then
	echo "${KIND_NODE_IMAGE}"
	exit 0
fi
LOCAL="tatara.local/kind-node:${KUBERNETES_VERSION}"
TIMEOUT="${KIND_PULL_PROBE_TIMEOUT:-20}"

# kind's default node image is a constant of the pinned kind module.
dir="$(GOFLAGS=-mod=mod GOWORK=off go mod download -json "sigs.k8s.io/kind@${KIND_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
default="$(sed -n 's/^const Image = "\(.*\)"$/\1/p' "${dir}/pkg/apis/config/defaults/image.go" 2>/dev/null || true)"
if [[ -z "${default}" ]]; then
	echo "kind-node-select: cannot read kind ${KIND_VERSION}'s default node image; using ${LOCAL} (set KIND_NODE_IMAGE to choose)" >&2
	echo "${LOCAL}"
	exit 0
fi

# kind's default image runs its own Kubernetes minor: a K8S_VERSION of another minor (make e2e
# K8S_VERSION=v1.34.4) needs the local image of that version, on any machine.
default_tag="${default%@*}"; default_tag="${default_tag##*:}"
if [[ "${default_tag%.*}" != "${KUBERNETES_VERSION%.*}" ]]; then
	echo "kind-node-select: kind's default node image runs Kubernetes ${default_tag}, not ${KUBERNETES_VERSION%.*}: using ${LOCAL}, built locally" >&2
	echo "${LOCAL}"
	exit 0
fi

"${ROOT}/hack/ensure-docker.sh"
if docker image inspect "${default}" >/dev/null 2>&1 || timeout "${TIMEOUT}" docker pull -q "${default}" >/dev/null 2>&1; then
	echo ""
	exit 0
fi
echo "kind-node-select: kind's default node image ${default%@*} is not here and could not be pulled within ${TIMEOUT}s: using ${LOCAL}, built locally (set KIND_NODE_IMAGE to skip this probe)" >&2
echo "${LOCAL}"
