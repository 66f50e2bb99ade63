# shellcheck shell=bash
# Sourced by the hack/ scripts that need Kubernetes versions, after hack/versions.env: applies
# K8S_VERSION (a make variable, exported; default KUBERNETES_VERSION) and sets ETCD_VERSION,
# COREDNS_VERSION, PAUSE_VERSION and CRICTL_VERSION from that minor's row in hack/versions.env.
# A version whose minor has no row fails here, with the rows that exist.

KUBERNETES_VERSION="${K8S_VERSION:-${KUBERNETES_VERSION}}"
if [[ ! "${KUBERNETES_VERSION}" =~ ^v1\.([0-9]+)\.[0-9]+$ ]]; then
	echo "hack/lib/kubernetes.sh: K8S_VERSION=${KUBERNETES_VERSION} is not a Kubernetes release version (vMAJOR.MINOR.PATCH, e.g. ${KUBERNETES_OLDEST_VERSION})" >&2
	exit 1
fi
_k8s_row="1_${BASH_REMATCH[1]}"
for _k8s_name in ETCD COREDNS PAUSE CRICTL; do
	_k8s_var="${_k8s_name}_VERSION_${_k8s_row}"
	if [[ -z "${!_k8s_var:-}" ]]; then
		echo "hack/lib/kubernetes.sh: hack/versions.env has no ${_k8s_var}: Kubernetes ${KUBERNETES_VERSION} is not a supported minor (rows: $(sed -n 's/^ETCD_VERSION_\([0-9_]*\)=.*/\1/p' "${ROOT}/hack/versions.env" | tr '_\n' '. ')" >&2
		exit 1
	fi
	printf -v "${_k8s_name}_VERSION" '%s' "${!_k8s_var}"
done
unset _k8s_row _k8s_name _k8s_var
export KUBERNETES_VERSION ETCD_VERSION COREDNS_VERSION PAUSE_VERSION CRICTL_VERSION
