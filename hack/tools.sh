#!/usr/bin/env bash
# Installs pinned tools (hack/versions.env) from the Go module proxy into
# ${TATARA_CACHE:-$HOME/.cache/tatara}/tools/<name>-<version>/<name> and prints that path.
# A tool already there is not rebuilt. Usage: hack/tools.sh kind|helm|helmfile|kwok [...]
# The installs are serialised with the Kubernetes builds (same lock): the machine is small.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"

CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"
TOOLS="${CACHE}/tools"
WORK="${CACHE}/build"
LOCK="${CACHE}/k8s/.build.lock"

# shellcheck source=SCRIPTDIR/lib/log.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"

command -v go >/dev/null || die "go is not on PATH (tools are built from the Go module proxy)"
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
mkdir -p "${TOOLS}" "${WORK}" "$(dirname "${LOCK}")"

goversion() { go env GOVERSION | sed 's/^go//'; }

build_kind() { # out
	GOBIN="$(dirname "$1")" nice -n 10 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@${KIND_VERSION}"
}

build_helm() { # out
	# Without the -X, `helm version` reports only the major.minor of the module, and helm assumes
	# Kubernetes v1.20 for `helm template`/`lint` (charts with kubeVersion >=1.29 then fail): stamp
	# the Kubernetes version of helm's client-go as helm's own Makefile does.
	local gomod k8s_minor
	gomod="$(go mod download -json "helm.sh/helm/v3@${HELM_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
	k8s_minor="$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "${gomod}")"
	[[ -n "${k8s_minor}" ]] || die "could not read the client-go version of helm ${HELM_VERSION}"
	GOBIN="$(dirname "$1")" nice -n 10 go install -trimpath \
		-ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION} -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${k8s_minor} \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${k8s_minor}" \
		"helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
}

build_helmfile() { # out
	# `go install ...@version` refuses helmfile (its go.mod has replace directives): build it from a
	# throwaway module that copies those replace lines.
	local dir="${WORK}/helmfile-${HELMFILE_VERSION}" gomod
	if [[ ! -f "${dir}/go.mod" ]]; then
		mkdir -p "${dir}"
		gomod="$(go mod download -json "github.com/helmfile/helmfile@${HELMFILE_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
		[[ -f "${gomod}" ]] || die "could not download the go.mod of github.com/helmfile/helmfile@${HELMFILE_VERSION}"
		{
			printf 'module tatara.local/helmfile-build\n\ngo %s\n\nrequire github.com/helmfile/helmfile %s\n\n' "$(goversion)" "${HELMFILE_VERSION}"
			sed -n '/^replace (/,/^)/p; /^replace [^(]/p' "${gomod}"
		} >"${dir}/go.mod"
	fi
	(cd "${dir}" && nice -n 10 go build -trimpath -o "$1" \
		-ldflags "-s -w -X go.szostok.io/version.version=${HELMFILE_VERSION} -X go.szostok.io/version.dirtyBuild=false" \
		github.com/helmfile/helmfile)
}

build_kwok() { # out
	GOBIN="$(dirname "$1")" nice -n 10 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
}

install_tool() { # name version
	local name="$1" version="$2" out start
	out="${TOOLS}/${name}-${version}/${name}"
	if [[ ! -x "${out}" ]]; then
		exec 9>"${LOCK}"
		flock 9
		if [[ ! -x "${out}" ]]; then
			start=${SECONDS}
			log "building ${name} ${version} into ${out}"
			mkdir -p "$(dirname "${out}")"
			"build_${name}" "${out}"
			[[ -x "${out}" ]] || die "build of ${name} ${version} produced no ${out}"
			log "built ${name} ${version} in $((SECONDS - start))s"
		fi
		exec 9>&-
	fi
	echo "${out}"
}

(($#)) || die "usage: $0 kind|helm|helmfile|kwok [...]"
for t in "$@"; do
	case "${t}" in
		kind) install_tool kind "${KIND_VERSION}" ;;
		helm) install_tool helm "${HELM_VERSION}" ;;
		helmfile) install_tool helmfile "${HELMFILE_VERSION}" ;;
		kwok) install_tool kwok "${KWOK_VERSION}" ;;
		*) die "unknown tool \"${t}\" (known: kind helm helmfile kwok)" ;;
	esac
done
