#!/usr/bin/env bash
# Builds the agent image tatara.local/tatara-agent-claude:<CLAUDE_CODE_VERSION> without pulling any
# image: a minimal Debian root filesystem from this machine's apt sources (glibc, a shell, git, ssh,
# ca-certificates) plus Claude Code's native executable from the npm registry, checked against the
# sha512 pinned in hack/versions.env. It runs as UID 65532 and ships no credentials; the agent pod
# gives it HOME, /tmp and the workspace as emptyDirs on a read-only root filesystem.
#
# An image of that tag built from the same inputs is kept (git_image_build).
# Usage: hack/agent-image.sh [IMAGE] (GOARCH picks the architecture, as for hack/claude-code.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"
# shellcheck source=SCRIPTDIR/lib/log.sh
source "${ROOT}/hack/lib/log.sh"
# shellcheck source=SCRIPTDIR/lib/debian.sh
source "${ROOT}/hack/lib/debian.sh"
# shellcheck source=SCRIPTDIR/lib/git-rootfs.sh
source "${ROOT}/hack/lib/git-rootfs.sh"

DEB_CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}/debian"

# HOME itself is the pod's emptyDir; nothing in the image is writable by the agent.
git_image_customize() {
	mkdir -p "$1/home/agent" "$1/workspace"
	chown "${GIT_IMAGE_UID}:${GIT_IMAGE_UID}" "$1/home/agent" "$1/workspace"
}

claude="$("${ROOT}/hack/claude-code.sh")"
git_image_build "${1:-tatara.local/tatara-agent-claude:${CLAUDE_CODE_VERSION}}" \
	"${claude}" /usr/local/bin/claude \
	agent /home/agent /bin/bash \
	'ENV HOME=/home/agent' \
	'WORKDIR /workspace'
