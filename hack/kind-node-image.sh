#!/usr/bin/env bash
# Builds a kind node image without pulling any container image, from the Go module proxy (the
# Kubernetes binaries, hack/k8s-binaries.sh; kind's own node files from the kind module) and Debian
# packages (the root filesystem, from this machine's apt sources):
#
#   1. rootfs:  debootstrap a Debian root filesystem with systemd, containerd, runc, CNI plugins
#               (cached as a tarball keyed by suite, mirror and package list)
#   2. images:  one image per control-plane component, tagged exactly as `kubeadm config images
#               list` asks, built from the locally built binaries
#   3. node:    kind's node files + kubeadm/kubelet/kubectl + /kind/version on the rootfs, imported
#               into Docker, the component images imported into its containerd, committed as
#               ${KIND_NODE_IMAGE:-tatara.local/kind-node:${KUBERNETES_VERSION}}
#
# The image carries a label with the hash of all its inputs; when an image with that tag and hash
# exists, nothing is done. On a machine that can pull images none of this is needed: kind's
# default node image works (see README, "Kind clusters").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"
# shellcheck source=SCRIPTDIR/lib/kubernetes.sh
source "${ROOT}/hack/lib/kubernetes.sh"
# shellcheck source=SCRIPTDIR/lib/debian.sh
source "${ROOT}/hack/lib/debian.sh"

CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"
K8S_BIN="${CACHE}/k8s/${KUBERNETES_VERSION}/bin"
NODE_CACHE="${CACHE}/kind-node"
# Rootfs tarballs and .debs of hack/lib/debian.sh.
DEB_CACHE="${NODE_CACHE}"
IMAGE="${KIND_NODE_IMAGE:-tatara.local/kind-node:${KUBERNETES_VERSION}}"
INPUTS_LABEL="dev.tatara.kind-node.inputs"
# The NetworkPolicy enforcer hack/node/default-cni.yaml runs (the tag must match it).
NETPOL_IMAGE="tatara.local/kube-network-policies:${KUBE_NETWORK_POLICIES_VERSION}"

# Packages of the node: systemd as PID 1, what kubelet/kubeadm/kube-proxy exec on the node, the
# container runtime and CNI plugins, and what kind's entrypoint and hooks use.
NODE_PACKAGES=(systemd systemd-sysv dbus conntrack iptables nftables iproute2 ethtool util-linux
	mount kmod libseccomp2 pigz ca-certificates jq procps containerd runc containernetworking-plugins
	socat bash)
# The kube-proxy image only needs what kube-proxy execs (iptables/nft, conntrack).
PROXY_PACKAGES=(iptables nftables conntrack kmod)

# shellcheck source=SCRIPTDIR/lib/log.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"

# step NAME CMD...: runs one step and prints its wall time.
step() {
	local name="$1" start=${SECONDS}
	shift
	log "step ${name}: start"
	"$@"
	log "step ${name}: done in $((SECONDS - start))s"
}

[[ "$(id -u)" == 0 ]] || die "building the node image needs root (debootstrap, chroot)"
for tool in docker go sha256sum tar; do
	command -v "${tool}" >/dev/null || die "${tool} is not on PATH"
done
debian_init

kind_module_dir() {
	local dir
	dir="$(GOFLAGS=-mod=mod GOWORK=off go mod download -json "sigs.k8s.io/kind@${KIND_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	[[ -d "${dir}/images/base/files" ]] || die "kind ${KIND_VERSION} module has no images/base/files (go mod download sigs.k8s.io/kind@${KIND_VERSION})"
	echo "${dir}"
}

inputs_hash() {
	{
		echo "${IMAGE} ${SUITE} ${MIRROR}"
		printf '%s\n' "${NODE_PACKAGES[@]}" "${PROXY_PACKAGES[@]}"
		cat "${ROOT}/hack/versions.env" "${BASH_SOURCE[0]}" "${ROOT}/hack/lib/debian.sh" "${ROOT}/hack/lib/kubernetes.sh"
		cat "${ROOT}"/hack/node/*
		cat "${K8S_BIN}"/.stamps/*
		(cd "${KIND_DIR}/images/base/files" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
	} | sha256sum | cut -c1-32
}

# component_images WORK: docker-archive tarballs of every image kubeadm asks for, in WORK/images.
component_images() {
	local work="$1" img name tag base out
	mkdir -p "${work}/images" "${work}/layer"
	for img in "${REQUIRED_IMAGES[@]}"; do
		name="${img##*/}"; tag="${name#*:}"; name="${name%%:*}"
		out="${work}/images/${name}.tar"
		# The tags must be those of the pinned versions, else the binary in the image is not the
		# one kubeadm expects.
		case "${name}" in
			etcd) [[ "${tag}" == "${ETCD_VERSION#v}-"* ]] || die "kubeadm wants ${img} but ETCD_VERSION=${ETCD_VERSION} (update hack/versions.env)" ;;
			coredns) [[ "${tag}" == "${COREDNS_VERSION}" ]] || die "kubeadm wants ${img} but COREDNS_VERSION=${COREDNS_VERSION} (update hack/versions.env)" ;;
			pause) [[ "${tag}" == "${PAUSE_VERSION}" ]] || die "kubeadm wants ${img} but PAUSE_VERSION=${PAUSE_VERSION} (update hack/versions.env)" ;;
			*) [[ "${tag}" == "${KUBERNETES_VERSION}" ]] || die "kubeadm wants ${img} but KUBERNETES_VERSION=${KUBERNETES_VERSION}" ;;
		esac
		local changes=(--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin')
		rm -rf "${work}/layer" && mkdir -p "${work}/layer/usr/local/bin"
		case "${name}" in
			kube-proxy)
				# kube-proxy execs iptables/conntrack: it gets a small Debian root filesystem.
				cp "${PROXY_TAR}" "${work}/proxy.tar"
				install -m 0755 "${K8S_BIN}/kube-proxy" "${work}/layer/usr/local/bin/kube-proxy"
				tar --numeric-owner --owner=0 --group=0 -C "${work}/layer" -rf "${work}/proxy.tar" ./usr/local/bin/kube-proxy
				docker import "${changes[@]}" --change 'ENTRYPOINT ["/usr/local/bin/kube-proxy"]' \
					"${work}/proxy.tar" "${img}" >/dev/null
				rm -f "${work}/proxy.tar"
				;;
			coredns)
				install -m 0755 "${K8S_BIN}/coredns" "${work}/layer/coredns"
				mkdir -p "${work}/layer/etc/coredns" "${work}/layer/tmp" && chmod 1777 "${work}/layer/tmp"
				tar --numeric-owner --owner=0 --group=0 -C "${work}/layer" -c . \
					| docker import "${changes[@]}" --change 'ENTRYPOINT ["/coredns"]' - "${img}" >/dev/null
				;;
			pause)
				install -m 0755 "${K8S_BIN}/pause" "${work}/layer/pause"
				tar --numeric-owner --owner=0 --group=0 -C "${work}/layer" -c . \
					| docker import "${changes[@]}" --change 'ENTRYPOINT ["/pause"]' - "${img}" >/dev/null
				;;
			etcd|kube-apiserver|kube-controller-manager|kube-scheduler)
				install -m 0755 "${K8S_BIN}/${name}" "${work}/layer/usr/local/bin/${name}"
				mkdir -p "${work}/layer/tmp" "${work}/layer/var/lib/etcd" && chmod 1777 "${work}/layer/tmp"
				tar --numeric-owner --owner=0 --group=0 -C "${work}/layer" -c . \
					| docker import "${changes[@]}" --change "ENTRYPOINT [\"/usr/local/bin/${name}\"]" - "${img}" >/dev/null
				;;
			*) die "kubeadm asks for ${img}, which this script does not know how to build" ;;
		esac
		docker save -o "${out}" "${img}"
		# The tag only existed to be saved; keep the host's image list clean.
		docker rmi "${img}" >/dev/null
		log "image ${img}: $(du -h "${out}" | cut -f1)"
	done
	netpol_image "${work}"
}

# netpol_image WORK: the kube-network-policies image (a static binary FROM scratch) in WORK/images.
netpol_image() {
	local work="$1" out="$1/images/kube-network-policies.tar"
	grep -q "image: ${NETPOL_IMAGE}$" "${ROOT}/hack/node/default-cni.yaml" \
		|| die "hack/node/default-cni.yaml does not run ${NETPOL_IMAGE} (KUBE_NETWORK_POLICIES_VERSION in hack/versions.env)"
	rm -rf "${work}/layer" && mkdir -p "${work}/layer/bin"
	install -m 0755 "${K8S_BIN}/kube-network-policies" "${work}/layer/bin/netpol"
	tar --numeric-owner --owner=0 --group=0 -C "${work}/layer" -c . \
		| docker import --change 'ENTRYPOINT ["/bin/netpol"]' - "${NETPOL_IMAGE}" >/dev/null
	docker save -o "${out}" "${NETPOL_IMAGE}"
	docker rmi "${NETPOL_IMAGE}" >/dev/null
	log "image ${NETPOL_IMAGE}: $(du -h "${out}" | cut -f1)"
}

# assemble WORK: kind's node files and the Kubernetes binaries on the node root filesystem.
assemble_rootfs() {
	local work="$1" r="$1/rootfs" files="${KIND_DIR}/images/base/files"
	rm -rf "${r}" && mkdir -p "${r}"
	tar --numeric-owner -C "${r}" -xf "${NODE_TAR}"

	# kind's node files, with the modes of kind's images/base/Dockerfile.
	install -m 0755 "${files}"/usr/local/bin/* "${r}/usr/local/bin/"
	mkdir -p "${r}/kind/bin" "${r}/kind/manifests" "${r}/LICENSES"
	install -m 0644 "${files}"/kind/README.txt "${r}/kind/"
	install -m 0755 "${files}"/kind/bin/* "${r}/kind/bin/"
	install -m 0644 "${files}"/LICENSES/* "${r}/LICENSES/"
	install -m 0644 "${files}"/etc/crictl.yaml "${r}/etc/"
	mkdir -p "${r}/etc/containerd" "${r}/etc/default" "${r}/etc/sysctl.d" "${r}/etc/systemd/system/kubelet.service.d"
	install -m 0644 "${files}"/etc/containerd/* "${r}/etc/containerd/"
	install -m 0644 "${files}"/etc/default/* "${r}/etc/default/"
	install -m 0644 "${files}"/etc/sysctl.d/* "${r}/etc/sysctl.d/"
	find "${files}/etc/systemd/system" -maxdepth 1 -type f -exec install -m 0644 {} "${r}/etc/systemd/system/" \;
	install -m 0644 "${files}"/etc/systemd/system/kubelet.service.d/* "${r}/etc/systemd/system/kubelet.service.d/"

	# kind expects the upstream install paths; Debian's packages put them elsewhere.
	local b
	for b in containerd containerd-shim-runc-v2 ctr; do ln -sf "/usr/bin/${b}" "${r}/usr/local/bin/${b}"; done
	ln -sf /usr/sbin/runc "${r}/usr/local/sbin/runc"
	mkdir -p "${r}/opt/cni" && ln -sfn /usr/lib/cni "${r}/opt/cni/bin"
	install -m 0755 "${K8S_BIN}/crictl" "${r}/usr/local/bin/crictl"
	for b in kubeadm kubelet kubectl; do install -m 0755 "${K8S_BIN}/${b}" "${r}/usr/bin/${b}"; done

	# containerd: the fuse-overlayfs proxy plugin is not installed (it is only for rootless
	# Docker), and the sandbox image is the pause image imported below.
	local cfg="${r}/etc/containerd/config.toml" pause_ref
	# The exact pause reference kubeadm asks for (never a registry name written here).
	pause_ref="$(printf '%s\n' "${REQUIRED_IMAGES[@]}" | grep -m1 "/pause:${PAUSE_VERSION}$")" \
		|| die "kubeadm config images list names no pause:${PAUSE_VERSION} image"
	sed -i -e '/^\[proxy_plugins\]/,/^$/d' \
		-e "s#^\([[:space:]]*sandbox_image[[:space:]]*=\).*#\1 \"${pause_ref}\"#" "${cfg}"
	grep -q "pause:${PAUSE_VERSION}" "${cfg}" || die "could not set sandbox_image in ${cfg}"
	! grep -q fuse-overlayfs.sock "${cfg}" || die "could not drop the fuse-overlayfs plugin from ${cfg}"
	# As kind's Dockerfile: the OCI spec base with the product_uuid hook and without rlimits.
	chroot "${r}" /usr/bin/ctr oci spec \
		| chroot "${r}" jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"} | del(.process.rlimits)' \
		>"${r}/etc/containerd/cri-base.json"

	# Static CNI instead of kindnetd, and kube-network-policies to enforce NetworkPolicies, which
	# kind applies from /kind/manifests/default-cni.yaml (see that file).
	mkdir -p "${r}/etc/cni/net.d"
	install -m 0644 "${ROOT}/hack/node/10-tatara-ptp.conflist" "${r}/etc/cni/net.d/"
	install -m 0644 "${ROOT}/hack/node/default-cni.yaml" "${r}/kind/manifests/default-cni.yaml"
	install -m 0755 "${ROOT}/hack/node/tatara-entrypoint" "${r}/kind/bin/tatara-entrypoint"

	# systemd in a container, as kind's Dockerfile sets it up.
	rm -f "${r}"/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service \
		"${r}"/lib/systemd/system/multi-user.target.wants/* "${r}"/etc/systemd/system/*.wants/* \
		"${r}"/lib/systemd/system/local-fs.target.wants/* "${r}"/lib/systemd/system/sockets.target.wants/*udev* \
		"${r}"/lib/systemd/system/sockets.target.wants/*initctl* "${r}"/lib/systemd/system/basic.target.wants/*
	echo "ReadKMsg=no" >>"${r}/etc/systemd/journald.conf"
	ln -sf /usr/lib/systemd/systemd "${r}/sbin/init"
	chroot "${r}" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
	chroot "${r}" systemctl mask systemd-binfmt.service >/dev/null 2>&1
	[[ -L "${r}/etc/systemd/system/multi-user.target.wants/kubelet.service" ]] || die "systemctl enable kubelet.service did not take effect"
	mkdir -p "${r}/etc/kubernetes/manifests"
	printf '%s' "${KUBERNETES_VERSION}" >"${r}/kind/version"
}

# node_image WORK HASH: imports the rootfs, loads the component images into its containerd inside a
# throwaway container, commits the result as IMAGE with kind's entrypoint settings.
node_image() {
	local work="$1" hash="$2"
	local base="tatara.local/kind-node-base:${hash}" ctr_name="${BUILD_CONTAINER}"
	tar --numeric-owner -C "${work}/rootfs" -c . | docker import - "${base}" >/dev/null
	rm -rf "${work}/rootfs"
	docker rm -f "${ctr_name}" >/dev/null 2>&1 || true
	# containerd runs unprivileged here: importing with --no-unpack only writes its content store
	# and metadata (images are unpacked on first use in the node), so no mount is needed.
	docker run --name "${ctr_name}" --pull=never --entrypoint /bin/bash \
		-v "${work}/images:/images:ro" "${base}" -euc '
			containerd >/tmp/containerd.log 2>&1 &
			pid=$!
			for _ in $(seq 1 60); do ctr version >/dev/null 2>&1 && break; sleep 0.5; done
			for t in /images/*.tar; do
				ctr -n k8s.io images import --all-platforms --no-unpack "$t" >/dev/null
			done
			ctr -n k8s.io images ls -q
			kill "$pid"; wait "$pid" || true
			rm -rf /tmp/* /run/containerd /var/log/*' >"${work}/imported.txt" \
		|| { docker rm -f "${ctr_name}" >/dev/null 2>&1; die "importing the component images into the node's containerd failed"; }
	local img
	for img in "${REQUIRED_IMAGES[@]}" "${NETPOL_IMAGE}"; do
		grep -qxF "${img}" "${work}/imported.txt" || { docker rm -f "${ctr_name}" >/dev/null; die "image ${img} missing from the node's containerd after import"; }
	done
	# docker commit cannot set STOPSIGNAL: commit (dropping the build command), then set kind's
	# runtime settings with a metadata-only build on top (no pull: FROM a local image).
	local committed="tatara.local/kind-node-build:${hash}"
	docker commit --change 'CMD []' "${ctr_name}" "${committed}" >/dev/null
	docker rm -f "${ctr_name}" >/dev/null
	# systemd wants to know it runs in a container, and stops on SIGRTMIN+3 (kind's base Dockerfile).
	docker build -q -t "${IMAGE}" - >/dev/null 2>"${work}/build.log" <<EOF || { cat "${work}/build.log" >&2; die "docker build of ${IMAGE} failed"; }
FROM ${committed}
ENV container=docker
STOPSIGNAL SIGRTMIN+3
LABEL ${INPUTS_LABEL}="${hash}" dev.tatara.kind-node.kubernetes-version="${KUBERNETES_VERSION}"
ENTRYPOINT ["/kind/bin/tatara-entrypoint", "/sbin/init"]
EOF
	docker rmi "${committed}" >/dev/null
	docker rmi "${base}" >/dev/null
}

cleanup() {
	rm -rf "${NODE_CACHE}/work"
	docker rm -f "${BUILD_CONTAINER}" >/dev/null 2>&1 || true
	docker rmi "tatara.local/kind-node-base:${INPUTS_HASH}" "tatara.local/kind-node-build:${INPUTS_HASH}" >/dev/null 2>&1 || true
}

main() {
	local total=${SECONDS}
	if [[ "${1:-}" == "rootfs" ]]; then
		# Only the Debian root filesystems (no Docker, no Go build): warms the cache.
		mkdir -p "${NODE_CACHE}"
		step rootfs-node cached_rootfs node "${NODE_PACKAGES[@]}" >/dev/null
		step rootfs-proxy cached_rootfs proxy "${PROXY_PACKAGES[@]}" >/dev/null
		return
	fi
	step docker "${ROOT}/hack/ensure-docker.sh"
	step k8s-binaries "${ROOT}/hack/k8s-binaries.sh"
	KIND_DIR="$(kind_module_dir)"
	local hash
	hash="$(inputs_hash)"
	if [[ "$(docker image inspect -f "{{ index .Config.Labels \"${INPUTS_LABEL}\" }}" "${IMAGE}" 2>/dev/null || true)" == "${hash}" ]]; then
		log "${IMAGE} is up to date (inputs ${hash})"
		return
	fi
	log "building ${IMAGE} (inputs ${hash}; Debian ${SUITE} from the machine's apt sources)"
	mkdir -p "${NODE_CACHE}"
	NODE_TAR="$(step rootfs-node cached_rootfs node "${NODE_PACKAGES[@]}")"
	PROXY_TAR="$(step rootfs-proxy cached_rootfs proxy "${PROXY_PACKAGES[@]}")"
	local work="${NODE_CACHE}/work"
	rm -rf "${work}" && mkdir -p "${work}"
	BUILD_CONTAINER="tatara-kind-node-build-$$"
	# Whatever happens, leave no work tree, build container or intermediate tag behind.
	INPUTS_HASH="${hash}"
	trap cleanup EXIT
	mapfile -t REQUIRED_IMAGES < <("${K8S_BIN}/kubeadm" config images list --kubernetes-version "${KUBERNETES_VERSION}" 2>/dev/null)
	((${#REQUIRED_IMAGES[@]} > 0)) || die "kubeadm config images list printed nothing"
	step component-images component_images "${work}"
	step assemble assemble_rootfs "${work}"
	local previous
	previous="$(docker image inspect -f '{{.Id}}' "${IMAGE}" 2>/dev/null || true)"
	step node-image node_image "${work}" "${hash}"
	# The image this one replaces is 1 GB; drop it unless a container (a running cluster) uses it.
	[[ -z "${previous}" ]] || docker rmi "${previous}" >/dev/null 2>&1 || true
	log "built ${IMAGE} ($(docker image inspect -f '{{.Size}}' "${IMAGE}" | awk '{printf "%.0f MB", $1/1e6}')) in $((SECONDS - total))s"
}

main "$@"
