#!/usr/bin/env bash
# Runs the pinned kind (hack/tools.sh kind) with the docker shim first in PATH where, and only
# where, a probe shows this host cannot run privileged containers (see hack/docker-shim/docker).
# Usable as a kind binary (e2e-framework's kind.WithPath): hack/kind.sh <kind args>.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"

# shellcheck source=SCRIPTDIR/lib/log.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"

"${ROOT}/hack/ensure-docker.sh"
kind_bin="$("${ROOT}/hack/tools.sh" kind)"

# needs_shim: 0 when `docker run --privileged` fails here. The answer is cached per Docker daemon
# and boot, since it depends only on the daemon and the host's capability bounding set.
needs_shim() {
	local key file probe_image="tatara.local/privileged-probe:1" dir
	key="$(docker info -f '{{.ID}}' 2>/dev/null | tr -c 'A-Za-z0-9\n' _)-$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo noboot)"
	file="${CACHE}/kind-shim/probe-${key}"
	if [[ ! -f "${file}" ]]; then
		mkdir -p "${CACHE}/kind-shim"
		# The probe image is a scratch image holding only the locally built pause binary.
		if ! docker image inspect "${probe_image}" >/dev/null 2>&1; then
			"${ROOT}/hack/k8s-binaries.sh" pause
			dir="$(mktemp -d)"
			install -m 0755 "${CACHE}/k8s/$(source "${ROOT}/hack/versions.env" && source "${ROOT}/hack/lib/kubernetes.sh" && echo "${KUBERNETES_VERSION}")/bin/pause" "${dir}/pause"
			tar -C "${dir}" -c pause | docker import --change 'ENTRYPOINT ["/pause"]' - "${probe_image}" >/dev/null
			rm -rf "${dir}"
		fi
		if docker run --rm --pull=never --privileged "${probe_image}" --version >/dev/null 2>&1; then
			echo no >"${file}"
		else
			echo yes >"${file}"
		fi
	fi
	[[ "$(cat "${file}")" == yes ]]
}

if needs_shim; then
	[[ -n "${TATARA_KIND_QUIET:-}" ]] || log "docker run --privileged fails on this host: using the docker shim (hack/docker-shim)"
	export PATH="${ROOT}/hack/docker-shim:${PATH}"
fi
# `create cluster` without a --config gets the project's cluster config (hack/kind-cluster.yaml).
# kind resolves a relative extraMounts hostPath against its own working directory; the config's are
# the repository's, so kind gets a copy with them made absolute (named by its content, so that
# runs side by side write the same file).
if [[ "${1:-}" == create && "${2:-}" == cluster ]] && ! printf '%s\n' "$@" | grep -q -- '^--config'; then
	mkdir -p "${CACHE}/kind"
	resolved="$(sed "s#hostPath: hack/#hostPath: ${ROOT}/hack/#" "${ROOT}/hack/kind-cluster.yaml")"
	config="${CACHE}/kind/cluster-$(sha256sum <<<"${resolved}" | cut -c1-16).yaml"
	if [[ ! -f "${config}" ]]; then
		printf '%s\n' "${resolved}" >"${config}.$$"
		mv -f "${config}.$$" "${config}"
	fi
	set -- "$@" --config "${config}"
fi
exec "${kind_bin}" "$@"
