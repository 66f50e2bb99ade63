#!/usr/bin/env bash
# Builds the e2e git server image tatara.local/tatara-git-server:<STANDIN_VERSION> without pulling
# any image: the agent image's minimal Debian root filesystem (hack/lib/debian.sh,
# hack/lib/git-rootfs.sh: the same cached tarball) plus the static git-server binary (cmd/git-server
# of the e2e module), which serves git http-backend. It runs as UID 65532 with no apt; the pod gives
# it --root and /tmp as emptyDirs on a read-only root filesystem.
#
# The binary is $GIT_SERVER_BINARY, by default bin/image-context/git-server, where `make images`
# builds it (linux, the host's architecture). The image carries a label with the hash of its
# inputs; when an image with that tag and hash exists, nothing is done.
# Usage: hack/git-server-image.sh [IMAGE]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/lib/debian.sh
source "${ROOT}/hack/lib/debian.sh"
# shellcheck source=SCRIPTDIR/lib/git-rootfs.sh
source "${ROOT}/hack/lib/git-rootfs.sh"

CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"
DEB_CACHE="${CACHE}/debian"
# The stand-ins are versioned with the wrapper (Makefile STANDIN_VERSION).
STANDIN_VERSION="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "${ROOT}/charts/tatara-wrapper/Chart.yaml")"
IMAGE="${1:-tatara.local/tatara-git-server:${STANDIN_VERSION}}"
VERSION="${IMAGE##*:}"
BINARY="${GIT_SERVER_BINARY:-${ROOT}/bin/image-context/git-server}"
INPUTS_LABEL="dev.tatara.git-server-image.inputs"
SERVER_UID=65532

log() { printf '[git-server-image %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$(id -u)" == 0 ]] || die "building the git server image needs root (debootstrap)"
for tool in docker tar; do
	command -v "${tool}" >/dev/null || die "${tool} is not on PATH"
done
[[ -f "${BINARY}" ]] || die "no git-server binary at ${BINARY}: make images builds it (or set GIT_SERVER_BINARY)"

main() {
	debian_init
	local rootfs hash
	mkdir -p "${DEB_CACHE}"
	# Named "agent" like hack/agent-image.sh's: same name and packages, one tarball for both.
	rootfs="$(cached_rootfs agent "${GIT_ROOTFS_PACKAGES[@]}")"
	hash="$({
		echo "${IMAGE} ${SUITE} ${MIRROR}"
		sha256sum "${BINARY}" | cut -d' ' -f1
		printf '%s\n' "${GIT_ROOTFS_PACKAGES[@]}"
		cat "${BASH_SOURCE[0]}" "${ROOT}/hack/lib/debian.sh" "${ROOT}/hack/lib/git-rootfs.sh"
	} | sha256sum | cut -c1-32)"
	if [[ "$(docker image inspect -f "{{ index .Config.Labels \"${INPUTS_LABEL}\" }}" "${IMAGE}" 2>/dev/null || true)" == "${hash}" ]]; then
		log "${IMAGE} is up to date"
		return
	fi

	work="$(mktemp -d "${CACHE}/git-server-image.XXXXXX")"
	trap 'rm -rf "${work:?}"' EXIT
	tar --numeric-owner -C "${work}" -xf "${rootfs}"
	install -m 0755 "${BINARY}" "${work}/usr/local/bin/git-server"
	# A passwd entry for the server's UID (git may look its user up); no home: the server gives
	# its git processes a HOME under /tmp.
	echo "git-server:x:${SERVER_UID}:${SERVER_UID}:git-server:/nonexistent:/usr/sbin/nologin" >>"${work}/etc/passwd"
	echo "git-server:x:${SERVER_UID}:" >>"${work}/etc/group"
	# The default --root for `docker run`; in the pod it is an emptyDir.
	mkdir -p "${work}/srv/git"
	chown "${SERVER_UID}:${SERVER_UID}" "${work}/srv/git"
	chmod 1777 "${work}/tmp"
	# No apt in the image: nothing installs packages at run time.
	rm -rf "${work}"/var/lib/apt "${work}"/var/cache/apt "${work}"/etc/apt "${work}"/usr/bin/apt* "${work}"/usr/lib/apt

	tar --numeric-owner -C "${work}" -c . | docker import \
		--change "USER ${SERVER_UID}:${SERVER_UID}" \
		--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
		--change 'WORKDIR /' \
		--change 'EXPOSE 8080' \
		--change 'ENTRYPOINT ["/usr/local/bin/git-server"]' \
		--change "LABEL ${INPUTS_LABEL}=${hash} org.opencontainers.image.title=tatara-git-server org.opencontainers.image.version=${VERSION} org.opencontainers.image.vendor=Tatara" \
		- "${IMAGE}" >/dev/null
	log "built ${IMAGE}: $(docker image inspect -f '{{.Size}}' "${IMAGE}" | numfmt --to=iec) (git-server ${VERSION}, ${SUITE}: ${GIT_ROOTFS_PACKAGES[*]})"
}

main "$@"
