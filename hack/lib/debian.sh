# shellcheck shell=bash
# Debian root filesystems from this machine's own apt sources, for images that cannot be pulled:
# sourced by hack/kind-node-image.sh and the git images (hack/lib/git-rootfs.sh). The caller sources
# hack/lib/log.sh (log, die), defines DEB_CACHE (where .debs and rootfs tarballs are kept), then
# calls debian_init once.

# apt_mirror SUITE prints the Debian mirror of this machine's apt sources (deb822 .sources or
# one-line sources.list) that serves SUITE, so no mirror host is written in this repository.
apt_mirror() {
	local suite="$1" f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -f "${f}" ]] || continue
		uri="$(awk -v suite="${suite}" '
			/^[[:space:]]*$/ { if (ok && u != "") { print u; exit } ok = 0; u = "" ; next }
			/^URIs:/ { u = $2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) ok = 1 }
			END { if (ok && u != "") print u }' "${f}" | head -n1)"
		[[ -n "${uri}" ]] && { echo "${uri}"; return; }
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -f "${f}" ]] || continue
		uri="$(awk -v suite="${suite}" '$1 == "deb" && $0 !~ /\[/ && $3 == suite { print $2; exit }
			$1 == "deb" && $2 ~ /^\[/ { for (i = 3; i < NF; i++) if ($(i+1) == suite && $i ~ /:\/\//) { print $i; exit } }' "${f}")"
		[[ -n "${uri}" ]] && { echo "${uri}"; return; }
	done
	die "found no apt source for suite ${suite} in /etc/apt/sources.list or /etc/apt/sources.list.d/"
}

# debian_init sets SUITE (the host's Debian release) and MIRROR.
debian_init() {
	SUITE="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
	[[ -n "${SUITE}" ]] || die "cannot read VERSION_CODENAME from /etc/os-release (need a Debian host for debootstrap)"
	MIRROR="$(apt_mirror "${SUITE}")"
}

ensure_debootstrap() {
	"$(dirname "${BASH_SOURCE[0]}")/../ensure-apt.sh" debootstrap || die "could not install debootstrap"
}

# debootstrap_tar OUT PACKAGES...: a minbase root filesystem with the packages, as a tarball.
debootstrap_tar() {
	local out="$1" dir
	shift
	dir="${out%.tar}.d"
	rm -rf "${dir}"
	mkdir -p "${DEB_CACHE}/debs"
	log "debootstrap ${SUITE} (${#} packages) into ${dir}"
	# nice: the machine is shared; --cache-dir keeps the .debs for the next rootfs; the lock keeps
	# two builds from writing the same .deb at once.
	(
		flock 8
		nice -n 19 debootstrap --variant=minbase --cache-dir="${DEB_CACHE}/debs" \
			--include="$(IFS=,; echo "$*")" "${SUITE}" "${dir}" "${MIRROR}" >"${dir}.log" 2>&1
	) 8>"${DEB_CACHE}/debs.lock" || { tail -n 30 "${dir}.log" >&2; die "debootstrap failed (log: ${dir}.log)"; }
	# Trim what is never read at run time: docs, man pages, locales, apt lists.
	rm -rf "${dir}"/usr/share/{doc,man,info,locale}/* "${dir}"/var/lib/apt/lists/* \
		"${dir}"/var/cache/apt/archives/*.deb "${dir}"/var/log/* "${dir}"/tmp/*
	tar --numeric-owner --one-file-system -C "${dir}" -cf "${out}.tmp" \
		--exclude=./dev/* --exclude=./proc/* --exclude=./sys/* .
	mv "${out}.tmp" "${out}"
	rm -rf "${dir}" "${dir}.log"
}

# cached_rootfs NAME PACKAGES... prints the path of a rootfs tarball, built once per suite, mirror
# and package list.
cached_rootfs() {
	local name="$1" key out
	shift
	key="$(printf '%s\n' "${SUITE}" "${MIRROR}" "$@" | sha256sum | cut -c1-16)"
	out="${DEB_CACHE}/${name}-${SUITE}-${key}.tar"
	if [[ -f "${out}" ]]; then
		log "cached ${name} rootfs: ${out}"
	else
		ensure_debootstrap
		debootstrap_tar "${out}" "$@"
	fi
	echo "${out}"
}
