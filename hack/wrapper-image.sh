#!/usr/bin/env bash
# Builds the wrapper image tatara.local/tatara-wrapper:<WRAPPER_VERSION> without pulling any image:
# the minimal Debian root filesystem with git (hack/lib/git-rootfs.sh, the agent image's) plus the
# static wrapper binary. The agent pod's first init container runs it: workspace-init clones the
# Task's repository with this image's git, so the read credential meets only our git, and copies
# the wrapper for a Project's agent image in the same container (one container start instead of
# two). Without an agent image, the wrapper image is the agent's container itself.
#
# The binary is $WRAPPER_BINARY, by default bin/image-context/wrapper, where `make images` builds it
# (linux, the host's architecture). The image carries a label with the hash of its inputs; when an
# image with that tag and hash exists, nothing is done. Usage: hack/wrapper-image.sh [IMAGE]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/lib/debian.sh
source "${ROOT}/hack/lib/debian.sh"
# shellcheck source=SCRIPTDIR/lib/git-rootfs.sh
source "${ROOT}/hack/lib/git-rootfs.sh"

CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"
DEB_CACHE="${CACHE}/debian"
WRAPPER_VERSION="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "${ROOT}/charts/tatara-wrapper/Chart.yaml")"
IMAGE="${1:-tatara.local/tatara-wrapper:${WRAPPER_VERSION}}"
VERSION="${IMAGE##*:}"
BINARY="${WRAPPER_BINARY:-${ROOT}/bin/image-context/wrapper}"
INPUTS_LABEL="dev.tatara.wrapper-image.inputs"

# shellcheck source=SCRIPTDIR/lib/log.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"

[[ "$(id -u)" == 0 ]] || die "building the wrapper image needs root (debootstrap)"
for tool in docker tar; do
	command -v "${tool}" >/dev/null || die "${tool} is not on PATH"
done
[[ -f "${BINARY}" ]] || die "no wrapper binary at ${BINARY}: make images builds it (or set WRAPPER_BINARY)"

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

	work="$(mktemp -d "${CACHE}/wrapper-image.XXXXXX")"
	trap 'rm -rf "${work:?}"' EXIT
	tar --numeric-owner -C "${work}" -xf "${rootfs}"
	install -m 0755 "${BINARY}" "${work}/usr/local/bin/wrapper"
	# Operators before 0.8.0 install the wrapper with /usr/local/bin/cp (the static cp of the
	# FROM-scratch image this one replaces): kept, so rolling the operator back stays safe.
	ln -s /usr/bin/cp "${work}/usr/local/bin/cp"
	git_image_import "${work}" "${IMAGE}" wrapper /nonexistent /usr/sbin/nologin \
		'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
		'WORKDIR /' \
		'ENTRYPOINT ["/usr/local/bin/wrapper"]' \
		"LABEL ${INPUTS_LABEL}=${hash} org.opencontainers.image.title=tatara-wrapper org.opencontainers.image.version=${VERSION} org.opencontainers.image.vendor=Tatara org.opencontainers.image.licenses=Apache-2.0"
	log "built ${IMAGE}: $(docker image inspect -f '{{.Size}}' "${IMAGE}" | numfmt --to=iec) (wrapper ${VERSION}, ${SUITE}: ${GIT_ROOTFS_PACKAGES[*]})"
}

main "$@"
