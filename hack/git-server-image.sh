#!/usr/bin/env bash
# Builds the e2e git server image tatara.local/tatara-git-server:<STANDIN_VERSION> without pulling
# any image: the minimal Debian root filesystem with git (hack/lib/git-rootfs.sh: the cached tarball
# the wrapper and agent images use) plus the static git-server binary (cmd/git-server
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

# shellcheck source=SCRIPTDIR/lib/log.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"

[[ "$(id -u)" == 0 ]] || die "building the git server image needs root (debootstrap)"
for tool in docker tar; do
	command -v "${tool}" >/dev/null || die "${tool} is not on PATH"
done
[[ -f "${BINARY}" ]] || die "no git-server binary at ${BINARY}: make images builds it (or set GIT_SERVER_BINARY)"

main() {
	debian_init
	local rootfs hash
	rootfs="$(git_rootfs)"
	hash="$({
		echo "${IMAGE} ${SUITE} ${MIRROR}"
		sha256sum "${BINARY}" | cut -d' ' -f1
		printf '%s\n' "${GIT_ROOTFS_PACKAGES[@]}"
		cat "${BASH_SOURCE[0]}" "${ROOT}/hack/lib/debian.sh" "${ROOT}/hack/lib/git-rootfs.sh"
	} | sha256sum | cut -c1-32)"
	if git_image_up_to_date "${IMAGE}" "${INPUTS_LABEL}" "${hash}"; then
		log "${IMAGE} is up to date"
		return
	fi

	work="$(mktemp -d "${CACHE}/git-server-image.XXXXXX")"
	trap 'rm -rf "${work:?}"' EXIT
	tar --numeric-owner -C "${work}" -xf "${rootfs}"
	install -m 0755 "${BINARY}" "${work}/usr/local/bin/git-server"
	# The default --root for `docker run`; in the pod it is an emptyDir.
	mkdir -p "${work}/srv/git"
	chown "${GIT_IMAGE_UID}:${GIT_IMAGE_UID}" "${work}/srv/git"
	# No home: the server gives its git processes a HOME under /tmp.
	git_image_import "${work}" "${IMAGE}" git-server /nonexistent /usr/sbin/nologin \
		'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
		'WORKDIR /' \
		'EXPOSE 8080' \
		'ENTRYPOINT ["/usr/local/bin/git-server"]' \
		"LABEL ${INPUTS_LABEL}=${hash} org.opencontainers.image.title=tatara-git-server org.opencontainers.image.version=${VERSION} org.opencontainers.image.vendor=Tatara"
	log "built ${IMAGE}: $(docker image inspect -f '{{.Size}}' "${IMAGE}" | numfmt --to=iec) (git-server ${VERSION}, ${SUITE}: ${GIT_ROOTFS_PACKAGES[*]})"
}

main "$@"
