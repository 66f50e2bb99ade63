#!/usr/bin/env bash
# Builds the agent image tatara.local/tatara-agent-claude:<CLAUDE_CODE_VERSION> without pulling any
# image: a minimal Debian root filesystem from this machine's apt sources (glibc, a shell, git,
# ca-certificates) plus Claude Code's native executable from the npm registry, checked against the
# sha512 pinned in hack/versions.env. It runs as UID 65532 and ships no credentials; the agent pod
# gives it HOME, /tmp and the workspace as emptyDirs on a read-only root filesystem.
#
# The image carries a label with the hash of its inputs; when an image with that tag and hash
# exists, nothing is done. Usage: hack/agent-image.sh [IMAGE] (GOARCH picks the architecture).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"
# shellcheck source=SCRIPTDIR/lib/debian.sh
source "${ROOT}/hack/lib/debian.sh"

CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"
DEB_CACHE="${CACHE}/debian"
NPM_CACHE="${CACHE}/npm"
IMAGE="${1:-tatara.local/tatara-agent-claude:${CLAUDE_CODE_VERSION}}"
INPUTS_LABEL="dev.tatara.agent-image.inputs"
AGENT_UID=65532
# Only what the agent needs to work in a repository: git (and the TLS roots it clones with).
# minbase brings glibc, bash and coreutils.
AGENT_PACKAGES=(git ca-certificates)

log() { printf '[agent-image %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$(id -u)" == 0 ]] || die "building the agent image needs root (debootstrap)"
for tool in docker npm sha512sum base64 od tar; do
	command -v "${tool}" >/dev/null || die "${tool} is not on PATH"
done

case "${GOARCH:-$(go env GOARCH)}" in
	amd64) NPM_ARCH=x64; INTEGRITY="${CLAUDE_CODE_INTEGRITY_LINUX_X64}" ;;
	arm64) NPM_ARCH=arm64; INTEGRITY="${CLAUDE_CODE_INTEGRITY_LINUX_ARM64}" ;;
	*) die "no Claude Code build is pinned for GOARCH=${GOARCH:-$(go env GOARCH)} (amd64 and arm64 are)" ;;
esac
PACKAGE="@anthropic-ai/claude-code-linux-${NPM_ARCH}@${CLAUDE_CODE_VERSION}"

# claude_tgz prints the path of the package tarball, fetched once and verified every time.
claude_tgz() {
	local dir="${NPM_CACHE}/claude-code-linux-${NPM_ARCH}-${CLAUDE_CODE_VERSION}" tgz want got
	mkdir -p "${dir}"
	tgz="$(find "${dir}" -maxdepth 1 -name '*.tgz' | head -n1)"
	if [[ -z "${tgz}" ]]; then
		log "npm pack ${PACKAGE}"
		(cd "${dir}" && npm pack --silent "${PACKAGE}" >/dev/null) || die "npm pack ${PACKAGE} failed"
		tgz="$(find "${dir}" -maxdepth 1 -name '*.tgz' | head -n1)"
		[[ -n "${tgz}" ]] || die "npm pack ${PACKAGE} wrote no tarball into ${dir}"
	fi
	# npm's integrity is the base64 of the digest; compare it as hex.
	want="$(printf '%s' "${INTEGRITY#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
	got="$(sha512sum "${tgz}" | cut -d' ' -f1)"
	if [[ "${got}" != "${want}" ]]; then
		rm -f "${tgz}"
		die "${PACKAGE}: sha512 ${got} is not the pinned ${want} (hack/versions.env); the tarball was removed"
	fi
	echo "${tgz}"
}

main() {
	debian_init
	local tgz rootfs hash work
	tgz="$(claude_tgz)"
	mkdir -p "${DEB_CACHE}"
	rootfs="$(cached_rootfs agent "${AGENT_PACKAGES[@]}")"
	hash="$({
		echo "${IMAGE} ${SUITE} ${MIRROR} ${INTEGRITY}"
		printf '%s\n' "${AGENT_PACKAGES[@]}"
		cat "${BASH_SOURCE[0]}" "${ROOT}/hack/lib/debian.sh"
	} | sha256sum | cut -c1-32)"
	if [[ "$(docker image inspect -f "{{ index .Config.Labels \"${INPUTS_LABEL}\" }}" "${IMAGE}" 2>/dev/null || true)" == "${hash}" ]]; then
		log "${IMAGE} is up to date"
		return
	fi

	work="$(mktemp -d "${CACHE}/agent-image.XXXXXX")"
	trap 'rm -rf "${work}"' EXIT
	tar --numeric-owner -C "${work}" -xf "${rootfs}"
	tar -C "${work}/usr/local/bin" --strip-components=1 -xzf "${tgz}" package/claude
	chmod 0755 "${work}/usr/local/bin/claude"
	# A passwd entry for the agent's UID: git and ssh look the user up. HOME itself is the pod's
	# emptyDir; nothing in the image is writable by the agent.
	echo "agent:x:${AGENT_UID}:${AGENT_UID}:agent:/home/agent:/bin/bash" >>"${work}/etc/passwd"
	echo "agent:x:${AGENT_UID}:" >>"${work}/etc/group"
	mkdir -p "${work}/home/agent" "${work}/workspace"
	chown "${AGENT_UID}:${AGENT_UID}" "${work}/home/agent" "${work}/workspace"
	chmod 1777 "${work}/tmp"
	# No apt in the image: nothing installs packages at run time.
	rm -rf "${work}"/var/lib/apt "${work}"/var/cache/apt "${work}"/etc/apt "${work}"/usr/bin/apt* "${work}"/usr/lib/apt

	tar --numeric-owner -C "${work}" -c . | docker import \
		--change "USER ${AGENT_UID}:${AGENT_UID}" \
		--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/agent' \
		--change 'WORKDIR /workspace' \
		--change 'ENTRYPOINT ["/usr/local/bin/claude"]' \
		--change "LABEL ${INPUTS_LABEL}=${hash} org.opencontainers.image.title=tatara-agent-claude org.opencontainers.image.version=${CLAUDE_CODE_VERSION} org.opencontainers.image.vendor=Tatara" \
		- "${IMAGE}" >/dev/null
	log "built ${IMAGE}: $(docker image inspect -f '{{.Size}}' "${IMAGE}" | numfmt --to=iec) (claude ${CLAUDE_CODE_VERSION}, ${SUITE}: ${AGENT_PACKAGES[*]})"
}

main "$@"
