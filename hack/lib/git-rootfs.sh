# shellcheck shell=bash
# The images that run git, built without pulling any image from one cached minimal Debian root
# filesystem (hack/lib/debian.sh): the wrapper image (hack/wrapper-image.sh: workspace-init clones
# with it), the agent image (hack/agent-image.sh) and the e2e git server (hack/git-server-image.sh).
# One package list, so all three use the same cached rootfs tarball: git, the TLS roots it clones
# with, and ssh for ssh remotes; minbase brings glibc, bash and coreutils. (Kept apart from
# hack/lib/debian.sh, which the kind node image's inputs hash covers.) The caller sources log.sh and
# debian.sh, defines DEB_CACHE, and calls debian_init first.
# shellcheck disable=SC2034 # used by the scripts that source this file
GIT_ROOTFS_PACKAGES=(git ca-certificates openssh-client)

# GIT_IMAGE_UID is the user every one of these images runs as.
GIT_IMAGE_UID=65532

# git_rootfs prints the path of the cached root filesystem tarball, building it on first use.
git_rootfs() {
	mkdir -p "${DEB_CACHE}"
	# Named "agent" for the image that first used it; renaming would rebuild every cache.
	cached_rootfs agent "${GIT_ROOTFS_PACKAGES[@]}"
}

# git_image_up_to_date IMAGE LABEL HASH succeeds when IMAGE exists with HASH in its LABEL.
git_image_up_to_date() {
	[[ "$(docker image inspect -f "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true)" == "$3" ]]
}

# git_image_import WORK IMAGE ACCOUNT HOME SHELL CHANGE...: WORK is the unpacked root filesystem
# with the image's own files added. This adds the account of GIT_IMAGE_UID (git and ssh look their
# user up), makes /tmp sticky, removes apt (nothing installs packages at run time), and imports WORK
# as IMAGE running as that user, with the given `docker import --change` instructions.
git_image_import() {
	local work="$1" image="$2" account="$3" home="$4" shell="$5"
	shift 5
	echo "${account}:x:${GIT_IMAGE_UID}:${GIT_IMAGE_UID}:${account}:${home}:${shell}" >>"${work}/etc/passwd"
	echo "${account}:x:${GIT_IMAGE_UID}:" >>"${work}/etc/group"
	chmod 1777 "${work}/tmp"
	rm -rf "${work}"/var/lib/apt "${work}"/var/cache/apt "${work}"/etc/apt "${work}"/usr/bin/apt* "${work}"/usr/lib/apt
	local changes=(--change "USER ${GIT_IMAGE_UID}:${GIT_IMAGE_UID}") c
	for c in "$@"; do
		changes+=(--change "${c}")
	done
	tar --numeric-owner -C "${work}" -c . | docker import "${changes[@]}" - "${image}" >/dev/null
}
