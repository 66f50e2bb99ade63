#!/usr/bin/env bash
# Builds the e2e git server image tatara.local/tatara-git-server:<STANDIN_VERSION> without pulling
# any image: the minimal Debian root filesystem with git (hack/lib/git-rootfs.sh: the cached tarball
# the wrapper and agent images use) plus the static git-server binary (cmd/git-server
# of the e2e module), which serves git http-backend. It runs as UID 65532 with no apt; the pod gives
# it --root and /tmp as emptyDirs on a read-only root filesystem.
#
# The binary is $GIT_SERVER_BINARY, by default bin/image-context/git-server, where `make images`
# builds it (linux, the host's architecture). An image of that tag built from the same inputs is
# kept (git_image_build). Usage: hack/git-server-image.sh [IMAGE]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/lib/log.sh
source "${ROOT}/hack/lib/log.sh"
# shellcheck source=SCRIPTDIR/lib/debian.sh
source "${ROOT}/hack/lib/debian.sh"
# shellcheck source=SCRIPTDIR/lib/git-rootfs.sh
source "${ROOT}/hack/lib/git-rootfs.sh"

DEB_CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}/debian"
# The stand-ins are versioned with the wrapper (Makefile STANDIN_VERSION).
STANDIN_VERSION="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "${ROOT}/charts/tatara-wrapper/Chart.yaml")"

# The default --root for `docker run`; in the pod it is an emptyDir. No home: the server gives its
# git processes a HOME under /tmp.
git_image_customize() {
	mkdir -p "$1/srv/git"
	chown "${GIT_IMAGE_UID}:${GIT_IMAGE_UID}" "$1/srv/git"
}

git_image_build "${1:-tatara.local/tatara-git-server:${STANDIN_VERSION}}" \
	"${GIT_SERVER_BINARY:-${ROOT}/bin/image-context/git-server}" /usr/local/bin/git-server \
	git-server /nonexistent /usr/sbin/nologin \
	'WORKDIR /' \
	'EXPOSE 8080'
