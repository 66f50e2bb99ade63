#!/usr/bin/env bash
# The merge request's diff without the helm-diff plugin (which cannot be installed here): the
# releases of a helmfile environment rendered with the pinned helm and helmfile, CRDs included and
# test hooks left out, compared by the API server itself (`kubectl diff --server-side`), so its
# defaulting and pruning show, as an apply would make them. Exit 0: no change; 1: a diff (printed);
# anything else: an error. KUBECONFIG selects the cluster.
# Usage: hack/helmfile-diff.sh <environment>
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ENV_NAME="${1:?usage: hack/helmfile-diff.sh <environment> (kind or production)}"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"
# shellcheck source=SCRIPTDIR/lib/kubernetes.sh
source "${ROOT}/hack/lib/kubernetes.sh"

HELM="$("${ROOT}/hack/tools.sh" helm)"
HELMFILE="$("${ROOT}/hack/tools.sh" helmfile)"
# kubectl of the pinned Kubernetes version, built once into the cache by hack/k8s-binaries.sh.
"${ROOT}/hack/k8s-binaries.sh" kubectl >&2
KUBECTL="${TATARA_CACHE:-${HOME}/.cache/tatara}/k8s/${KUBERNETES_VERSION}/bin/kubectl"

rendered="$(mktemp)"
trap 'rm -f "${rendered}"' EXIT
"${HELMFILE}" --file "${ROOT}/helmfile/helmfile.yaml" --environment "${ENV_NAME}" --helm-binary "${HELM}" \
	template --skip-tests --include-crds >"${rendered}"
# --force-conflicts: a dry run may take fields helm owns; nothing is written.
exec "${KUBECTL}" diff --server-side --force-conflicts -f "${rendered}"
