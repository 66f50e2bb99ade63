#!/usr/bin/env bash
# Builds the wrapper image tatara.local/tatara-wrapper:<WRAPPER_VERSION> without pulling any image:
# the minimal Debian root filesystem with git (hack/lib/git-rootfs.sh, the agent image's) plus the
# static wrapper binary. The agent pod's first init container runs it: workspace-init clones the
# Task's repository with this image's git, so the read credential meets only our git, and copies
# the wrapper for a Project's agent image in the same container (one container start instead of
# two). Without an agent image, the wrapper image is the agent's container itself.
#
# The binary is $WRAPPER_BINARY, by default bin/image-context/wrapper, where `make images` builds it
# (linux, the host's architecture). An image of that tag built from the same inputs is kept
# (git_image_build). Usage: hack/wrapper-image.sh [IMAGE]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/lib/log.sh
source "${ROOT}/hack/lib/log.sh"
# shellcheck source=SCRIPTDIR/lib/debian.sh
source "${ROOT}/hack/lib/debian.sh"
# shellcheck source=SCRIPTDIR/lib/git-rootfs.sh
source "${ROOT}/hack/lib/git-rootfs.sh"

DEB_CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}/debian"
WRAPPER_VERSION="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "${ROOT}/charts/tatara-wrapper/Chart.yaml")"

# Operators before 0.8.0 install the wrapper with /usr/local/bin/cp (the static cp of the
# FROM-scratch image this one replaces): kept, so rolling the operator back stays safe.
git_image_customize() {
	ln -s /usr/bin/cp "$1/usr/local/bin/cp"
}

git_image_build "${1:-tatara.local/tatara-wrapper:${WRAPPER_VERSION}}" \
	"${WRAPPER_BINARY:-${ROOT}/bin/image-context/wrapper}" /usr/local/bin/wrapper \
	wrapper /nonexistent /usr/sbin/nologin \
	'WORKDIR /' \
	'LABEL org.opencontainers.image.licenses=Apache-2.0'
