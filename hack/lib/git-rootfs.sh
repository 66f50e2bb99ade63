# shellcheck shell=bash
# The packages of the root filesystem of the images that run git: the agent image
# (hack/agent-image.sh) and the e2e git server (hack/git-server-image.sh). One list, so both use the
# same cached rootfs tarball: git, the TLS roots it clones with, and ssh for ssh remotes. minbase
# brings glibc, bash and coreutils. (Kept apart from hack/lib/debian.sh, which the kind node image's
# inputs hash covers.)
# shellcheck disable=SC2034 # used by the scripts that source this file
GIT_ROOTFS_PACKAGES=(git ca-certificates openssh-client)
