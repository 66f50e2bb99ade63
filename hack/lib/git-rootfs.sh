# shellcheck shell=bash
# The images that run git, built without pulling any image from one cached minimal Debian root
# filesystem (hack/lib/debian.sh): the wrapper image (hack/wrapper-image.sh: workspace-init clones
# with it), the agent image (hack/agent-image.sh) and the e2e git server (hack/git-server-image.sh).
# One package list, so all three use the same cached rootfs tarball: git, the TLS roots it clones
# with, ssh for ssh remotes, and curl, which agents fetch with (through their Project's egress
# proxy: the e2e's TestEgressThroughTheProxy probes with it); minbase brings glibc, bash and
# coreutils. (Kept apart from
# hack/lib/debian.sh, which the kind node image's inputs hash covers.) The caller sources log.sh and
# debian.sh and defines DEB_CACHE; git_image_build does the rest.
# shellcheck disable=SC2034 # used by the scripts that source this file
GIT_ROOTFS_PACKAGES=(git ca-certificates openssh-client curl)

# GIT_IMAGE_UID is the user every one of these images runs as.
GIT_IMAGE_UID=65532

# git_rootfs prints the path of the cached root filesystem tarball, building it on first use.
git_rootfs() {
	mkdir -p "${DEB_CACHE}"
	# Named "agent" for the image that first used it; renaming would rebuild every cache.
	cached_rootfs agent "${GIT_ROOTFS_PACKAGES[@]}"
}

# git_image_build IMAGE FILE DEST ACCOUNT HOME SHELL [CHANGE...] builds IMAGE (registry/name:version)
# from the cached root filesystem plus FILE, an executable, at DEST, run as ACCOUNT (uid
# GIT_IMAGE_UID, HOME and login SHELL as given) with DEST as its entrypoint, PATH
# /usr/local/bin:/usr/bin:/bin and the extra `docker import --change` instructions CHANGE. When the
# caller defines git_image_customize, it runs first on the unpacked tree (its path as $1). The image
# is labelled with the hash of its inputs (the tag, the Debian suite and mirror, FILE, the package
# list, the calling script and these libraries); when an image of that tag already carries it,
# nothing is done.
git_image_build() {
	local image="$1" file="$2" dest="$3" account="$4" home="$5" shell="$6"
	shift 6
	local title="${image##*/}" version="${image##*:}" label="dev.tatara.${account}-image.inputs"
	title="${title%%:*}"
	[[ "$(id -u)" == 0 ]] || die "building ${image} needs root (debootstrap)"
	local tool
	for tool in docker tar; do
		command -v "${tool}" >/dev/null || die "${tool} is not on PATH"
	done
	[[ -f "${file}" ]] || die "no ${title} executable at ${file}"
	debian_init
	local rootfs hash
	rootfs="$(git_rootfs)"
	hash="$({
		echo "${image} ${SUITE} ${MIRROR}"
		sha256sum "${file}" | cut -d' ' -f1
		printf '%s\n' "${GIT_ROOTFS_PACKAGES[@]}"
		cat "$0" "${BASH_SOURCE[0]%/*}/debian.sh" "${BASH_SOURCE[0]}"
	} | sha256sum | cut -c1-32)"
	if git_image_up_to_date "${image}" "${label}" "${hash}"; then
		log "${image} is up to date"
		return
	fi
	local work
	work="$(mktemp -d "${DEB_CACHE}/${account}-image.XXXXXX")"
	# shellcheck disable=SC2064 # expand now: work is local to this function
	trap "rm -rf '${work:?}'" EXIT
	tar --numeric-owner -C "${work}" -xf "${rootfs}"
	install -m 0755 "${file}" "${work}${dest}"
	if declare -F git_image_customize >/dev/null; then
		git_image_customize "${work}"
	fi
	git_image_import "${work}" "${image}" "${account}" "${home}" "${shell}" \
		'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
		"ENTRYPOINT [\"${dest}\"]" \
		"$@" \
		"LABEL ${label}=${hash} org.opencontainers.image.title=${title} org.opencontainers.image.version=${version} org.opencontainers.image.vendor=Tatara"
	log "built ${image}: $(docker image inspect -f '{{.Size}}' "${image}" | numfmt --to=iec) (${SUITE}: ${GIT_ROOTFS_PACKAGES[*]})"
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
