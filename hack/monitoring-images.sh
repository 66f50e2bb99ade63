#!/usr/bin/env bash
# Builds the images of the e2e monitoring stack (e2e/charts/monitoring) without pulling any image:
#   <registry>/prometheus-operator:<PROMETHEUS_OPERATOR_VERSION>
#   <registry>/prometheus-config-reloader:<PROMETHEUS_OPERATOR_VERSION>
#   <registry>/prometheus:<PROMETHEUS_VERSION>
# from static binaries built here from the Go module proxy (versions: hack/versions.env). Each image
# is, like hack/image/Dockerfile's, FROM scratch: one static binary, UID/GID 65532, no shell; it is
# imported from a tarball (as hack/git-server-image.sh does), since the legacy builder runs every
# stage before a --target and would need all three binaries in every build context. The binaries
# sit where the upstream images have them, because prometheus-operator's generated StatefulSet
# depends on it: the prometheus container gets only args (the image's ENTRYPOINT runs), and the
# config reloader (init and sidecar) gets command /bin/prometheus-config-reloader. Prometheus has
# no web UI (its assets are not in the Go module): the HTTP API is what the e2e suite queries.
# Prometheus is built with only the Kubernetes service discovery (PROMETHEUS_BUILD_TAGS, upstream's
# own build tags), the only one prometheus-operator configures: the cloud providers' SDKs were most
# of its cold compile.
#
# Neither module can be `go install`ed: both have replace directives in their go.mod. So each is
# built from a throwaway module under $TATARA_CACHE/build that names the commands as tools (go.mod
# `tool`) and requires the pinned versions; prometheus-operator's go.mod replaces its own API and
# client modules by local paths, which only apply to it as main module, so they are required at the
# same version explicitly.
#
# The binaries are cached under $TATARA_CACHE/monitoring, keyed by version and architecture; each
# image carries a label with the hash of its inputs, and an image with that tag and hash is not
# rebuilt (nor are its binaries). Usage: hack/monitoring-images.sh (IMAGE_REGISTRY, GOARCH: env)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"

CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"
REGISTRY="${IMAGE_REGISTRY:-tatara.local}"
ARCH="${GOARCH:-$(go env GOARCH)}"
INPUTS_LABEL="dev.tatara.monitoring-image.inputs"
# The lock of hack/k8s-binaries.sh and hack/tools.sh: one big Go build at a time on a small machine.
LOCK="${CACHE}/k8s/.build.lock"
OPERATOR_MODULE=github.com/prometheus-operator/prometheus-operator
PROMETHEUS_MODULE=github.com/prometheus/prometheus
# Both projects stamp their version here (prometheus-operator reads Prometheus's to pick flags).
VERSION_PKG=github.com/prometheus/common/version
PROMETHEUS_BUILD_TAGS=remove_all_sd,enable_kubernetes_sd

# shellcheck source=SCRIPTDIR/lib/log.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"

# The Go module of Prometheus x.y.z is v0.<x><yy>.z (3.16.0: v0.316.0).
prometheus_module_version() {
	local major minor patch
	IFS=. read -r major minor patch <<<"${PROMETHEUS_VERSION#v}"
	printf 'v0.%d%02d.%s' "${major}" "${minor}" "${patch}"
}

# write_module dir name tool... -- require...: the throwaway module, resolved by go mod tidy.
write_module() {
	local dir="$1" name="$2" p
	shift 2
	[[ -f "${dir}/go.sum" ]] && return
	mkdir -p "${dir}"
	{
		printf 'module tatara.local/%s-build\n\ngo %s\n\ntool (\n' "${name}" "$(go env GOVERSION | sed 's/^go//')"
		while [[ "$1" != -- ]]; do printf '\t%s\n' "$1"; shift; done
		shift
		printf ')\n\nrequire (\n'
		for p in "$@"; do printf '\t%s\n' "${p}"; done
		printf ')\n'
	} >"${dir}/go.mod"
	(cd "${dir}" && go mod tidy) || { rm -f "${dir}/go.sum"; die "go mod tidy failed in ${dir}"; }
}

# go_build dir out pkg version [tags]: a static, trimmed, version-stamped linux binary.
go_build() {
	local dir="$1" out="$2" pkg="$3" version="$4" tags="${5:-}" start=${SECONDS}
	log "building ${pkg##*/} ${version} (linux/${ARCH}${tags:+, tags ${tags}})"
	(cd "${dir}" && GOOS=linux GOARCH="${ARCH}" nice -n 10 go build -trimpath -tags "${tags}" -o "${out}.tmp" \
		-ldflags "-s -w -X ${VERSION_PKG}.Version=${version}" "${pkg}")
	mv "${out}.tmp" "${out}"
	log "built ${pkg##*/} ${version} in $((SECONDS - start))s ($(du -h "${out}" | cut -f1))"
}

# binary name file: the cached binary file of image name (its path), built under the lock if missing.
binary() {
	local name="$1" file="$2" out dir pmv src
	case "${name}" in
		prometheus-operator | prometheus-config-reloader)
			out="${CACHE}/monitoring/prometheus-operator-${PROMETHEUS_OPERATOR_VERSION}-linux-${ARCH}"
			dir="${CACHE}/build/prometheus-operator-${PROMETHEUS_OPERATOR_VERSION}" ;;
		prometheus)
			out="${CACHE}/monitoring/prometheus-${PROMETHEUS_VERSION}-${PROMETHEUS_BUILD_TAGS//,/-}-linux-${ARCH}"
			dir="${CACHE}/build/prometheus-${PROMETHEUS_VERSION}" ;;
	esac
	if [[ ! -x "${out}/${file}" ]]; then
		mkdir -p "${out}" "$(dirname "${LOCK}")"
		exec 9>"${LOCK}"
		flock 9
	fi
	if [[ ! -x "${out}/${file}" ]]; then
		case "${name}" in
			prometheus-operator | prometheus-config-reloader)
				write_module "${dir}" prometheus-operator \
					"${OPERATOR_MODULE}/cmd/operator" "${OPERATOR_MODULE}/cmd/prometheus-config-reloader" -- \
					"${OPERATOR_MODULE} ${PROMETHEUS_OPERATOR_VERSION}" \
					"${OPERATOR_MODULE}/pkg/apis/monitoring ${PROMETHEUS_OPERATOR_VERSION}" \
					"${OPERATOR_MODULE}/pkg/client ${PROMETHEUS_OPERATOR_VERSION}"
				go_build "${dir}" "${out}/${file}" "${OPERATOR_MODULE}/cmd/${file}" "${PROMETHEUS_OPERATOR_VERSION#v}" ;;
			prometheus)
				pmv="$(prometheus_module_version)"
				write_module "${dir}" prometheus "${PROMETHEUS_MODULE}/cmd/prometheus" -- "${PROMETHEUS_MODULE} ${pmv}"
				# The mapping is a convention: the module's VERSION file is the truth.
				src="$(cd "${dir}" && go list -m -f '{{.Dir}}' "${PROMETHEUS_MODULE}")"
				[[ "$(cat "${src}/VERSION")" == "${PROMETHEUS_VERSION#v}" ]] ||
					die "${PROMETHEUS_MODULE}@${pmv} is Prometheus $(cat "${src}/VERSION"), not ${PROMETHEUS_VERSION}"
				go_build "${dir}" "${out}/${file}" "${PROMETHEUS_MODULE}/cmd/prometheus" "${PROMETHEUS_VERSION#v}" \
					"${PROMETHEUS_BUILD_TAGS}" ;;
		esac
	fi
	exec 9>&-
	echo "${out}/${file}"
}

# image name version file [change...]: imports <registry>/<name>:<version>, the binary file of the
# cache as /bin/<file>, its entrypoint, with the extra Dockerfile instructions given.
image() {
	local name="$1" version="$2" file="$3" ref="${REGISTRY}/$1:$2" hash bin ctx c
	shift 3
	# Inputs known before any build, so an up-to-date image costs no Go build even on a cold cache.
	hash="$({
		echo "${ref} ${ARCH} $*"
		cat "${BASH_SOURCE[0]}"
	} | sha256sum | cut -c1-32)"
	if [[ "$(docker image inspect -f "{{ index .Config.Labels \"${INPUTS_LABEL}\" }}" "${ref}" 2>/dev/null || true)" == "${hash}" ]]; then
		log "${ref} is up to date"
		return
	fi
	bin="$(binary "${name}" "${file}")"
	ctx="$(mktemp -d "${CACHE}/monitoring/rootfs.XXXXXX")"
	# The root file system's / and /bin: mktemp's 0700 would lock UID 65532 out.
	chmod 0755 "${ctx}"
	mkdir -m 0755 "${ctx}/bin"
	# A hard link (same file system): the Prometheus binary is large.
	ln "${bin}" "${ctx}/bin/${file}"
	local changes=(--change "USER 65532:65532" --change "ENTRYPOINT [\"/bin/${file}\"]"
		--change "LABEL ${INPUTS_LABEL}=${hash} org.opencontainers.image.title=${name} org.opencontainers.image.version=${version} org.opencontainers.image.licenses=Apache-2.0")
	for c in "$@"; do changes+=(--change "${c}"); done
	tar --numeric-owner --owner=0 --group=0 -C "${ctx}" -c . | docker import "${changes[@]}" - "${ref}" >/dev/null || {
		rm -rf "${ctx:?}"
		die "docker import of ${ref} failed"
	}
	rm -rf "${ctx:?}"
	log "built ${ref}: $(docker image inspect -f '{{.Size}}' "${ref}" | numfmt --to=iec)"
}

command -v docker >/dev/null || die "docker is not on PATH (hack/ensure-docker.sh installs and starts it)"
command -v go >/dev/null || die "go is not on PATH (the binaries are built from the Go module proxy)"
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
mkdir -p "${CACHE}/monitoring"
image prometheus-operator "${PROMETHEUS_OPERATOR_VERSION}" operator
image prometheus-config-reloader "${PROMETHEUS_OPERATOR_VERSION}" prometheus-config-reloader
image prometheus "${PROMETHEUS_VERSION}" prometheus "EXPOSE 9090"
