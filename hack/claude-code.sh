#!/usr/bin/env bash
# Prints the path of Claude Code's native executable at CLAUDE_CODE_VERSION (hack/versions.env),
# for GOARCH (default: go env GOARCH): the npm registry's package
# @anthropic-ai/claude-code-linux-<arch>, fetched once with npm pack into the cache, checked against
# the pinned sha512 integrity every time, and unpacked beside it. Used by hack/agent-image.sh and
# make bench-tool-search.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"

CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"

# shellcheck source=SCRIPTDIR/lib/log.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"

"${ROOT}/hack/ensure-apt.sh" npm node:nodejs
for tool in npm sha512sum base64 od tar; do
	command -v "${tool}" >/dev/null || die "${tool} is not on PATH"
done

arch="${GOARCH:-$(go env GOARCH)}"
case "${arch}" in
	amd64) npm_arch=x64; integrity="${CLAUDE_CODE_INTEGRITY_LINUX_X64}" ;;
	arm64) npm_arch=arm64; integrity="${CLAUDE_CODE_INTEGRITY_LINUX_ARM64}" ;;
	*) die "no Claude Code build is pinned for GOARCH=${arch} (amd64 and arm64 are)" ;;
esac
package="@anthropic-ai/claude-code-linux-${npm_arch}@${CLAUDE_CODE_VERSION}"
dir="${CACHE}/npm/claude-code-linux-${npm_arch}-${CLAUDE_CODE_VERSION}"
mkdir -p "${dir}"

tgz="$(find "${dir}" -maxdepth 1 -name '*.tgz' | head -n1)"
if [[ -z "${tgz}" ]]; then
	log "npm pack ${package}"
	(cd "${dir}" && npm pack --silent "${package}" >/dev/null) || die "npm pack ${package} failed"
	tgz="$(find "${dir}" -maxdepth 1 -name '*.tgz' | head -n1)"
	[[ -n "${tgz}" ]] || die "npm pack ${package} wrote no tarball into ${dir}"
fi
# npm's integrity is the base64 of the digest; compare it as hex.
want="$(printf '%s' "${integrity#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')"
got="$(sha512sum "${tgz}" | cut -d' ' -f1)"
if [[ "${got}" != "${want}" ]]; then
	rm -f "${tgz}" "${dir}/claude"
	die "${package}: sha512 ${got} is not the pinned ${want} (hack/versions.env); the tarball was removed"
fi
if [[ ! -x "${dir}/claude" || "${dir}/claude" -ot "${tgz}" ]]; then
	tar -C "${dir}" --strip-components=1 -xzf "${tgz}" package/claude
	chmod 0755 "${dir}/claude"
fi
echo "${dir}/claude"
