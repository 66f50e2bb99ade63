#!/usr/bin/env bash
# Builds the agent image tatara.local/tatara-agent-claude:<CLAUDE_CODE_VERSION> without pulling any
# image: a minimal Debian root filesystem from this machine's apt sources (glibc, a shell, git, ssh,
# ca-certificates) plus Claude Code's native executable from the npm registry, checked against the
# sha512 pinned in hack/versions.env. It runs as UID 65532 and ships no credentials; the agent pod
# gives it HOME, /tmp and the workspace as emptyDirs on a read-only root filesystem.
#
# The image carries a label with the hash of its inputs; when an image with that tag and hash
# exists, nothing is done. Usage: hack/agent-image.sh [IMAGE] (GOARCH picks the architecture, as for hack/claude-code.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"
# shellcheck source=SCRIPTDIR/lib/debian.sh
source "${ROOT}/hack/lib/debian.sh"
# shellcheck source=SCRIPTDIR/lib/git-rootfs.sh
source "${ROOT}/hack/lib/git-rootfs.sh"

CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"
DEB_CACHE="${CACHE}/debian"
IMAGE="${1:-tatara.local/tatara-agent-claude:${CLAUDE_CODE_VERSION}}"
INPUTS_LABEL="dev.tatara.agent-image.inputs"

# shellcheck source=SCRIPTDIR/lib/log.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"

[[ "$(id -u)" == 0 ]] || die "building the agent image needs root (debootstrap)"
for tool in docker tar; do
	command -v "${tool}" >/dev/null || die "${tool} is not on PATH"
done

main() {
	debian_init
	local claude rootfs hash
	claude="$("${ROOT}/hack/claude-code.sh")"
	rootfs="$(git_rootfs)"
	hash="$({
		echo "${IMAGE} ${SUITE} ${MIRROR}"
		sha256sum "${claude}"
		printf '%s\n' "${GIT_ROOTFS_PACKAGES[@]}"
		cat "${BASH_SOURCE[0]}" "${ROOT}/hack/lib/debian.sh" "${ROOT}/hack/lib/git-rootfs.sh"
	} | sha256sum | cut -c1-32)"
	if git_image_up_to_date "${IMAGE}" "${INPUTS_LABEL}" "${hash}"; then
		log "${IMAGE} is up to date"
		return
	fi

	work="$(mktemp -d "${CACHE}/agent-image.XXXXXX")"
	trap 'rm -rf "${work:?}"' EXIT
	tar --numeric-owner -C "${work}" -xf "${rootfs}"
	install -m 0755 "${claude}" "${work}/usr/local/bin/claude"
	# HOME itself is the pod's emptyDir; nothing in the image is writable by the agent.
	mkdir -p "${work}/home/agent" "${work}/workspace"
	chown "${GIT_IMAGE_UID}:${GIT_IMAGE_UID}" "${work}/home/agent" "${work}/workspace"
	git_image_import "${work}" "${IMAGE}" agent /home/agent /bin/bash \
		'ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/agent' \
		'WORKDIR /workspace' \
		'ENTRYPOINT ["/usr/local/bin/claude"]' \
		"LABEL ${INPUTS_LABEL}=${hash} org.opencontainers.image.title=tatara-agent-claude org.opencontainers.image.version=${CLAUDE_CODE_VERSION} org.opencontainers.image.vendor=Tatara"
	log "built ${IMAGE}: $(docker image inspect -f '{{.Size}}' "${IMAGE}" | numfmt --to=iec) (claude ${CLAUDE_CODE_VERSION}, ${SUITE}: ${GIT_ROOTFS_PACKAGES[*]})"
}

main "$@"
