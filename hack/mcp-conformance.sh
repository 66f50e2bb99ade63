#!/usr/bin/env bash
# Prints the path of a runner for the official MCP conformance suite (npm
# @modelcontextprotocol/conformance at MCP_CONFORMANCE_VERSION, hack/versions.env), used by
# make conformance. The suite and its whole dependency tree are pinned by hack/conformance's
# package-lock.json (sha512 integrity per package), installed once with `npm ci --ignore-scripts`
# into the cache, keyed by the lock's hash. The runner is `node --import <node20-globsync.mjs>
# <the suite's CLI> "$@"`: the loader lets the suite's CLI start on node 20 (see the loader).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/versions.env
source "${ROOT}/hack/versions.env"

CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"
SRC="${ROOT}/hack/conformance"

# shellcheck source=SCRIPTDIR/lib/log.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"

"${ROOT}/hack/ensure-apt.sh" npm node:nodejs
for tool in node npm sha256sum; do
	command -v "${tool}" >/dev/null || die "${tool} is not on PATH"
done
# module.register (the loader's hook) needs node >= 20.6.
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=6)?0:1)' \
	|| die "node $(node --version) is too old: the conformance runner needs node >= 20.6"

pinned="$(sed -n 's/.*"@modelcontextprotocol\/conformance": *"\([^"]*\)".*/\1/p' "${SRC}/package.json")"
[[ "${pinned}" == "${MCP_CONFORMANCE_VERSION}" ]] \
	|| die "hack/conformance/package.json pins ${pinned:-nothing}, hack/versions.env MCP_CONFORMANCE_VERSION=${MCP_CONFORMANCE_VERSION}: update both (and the lock, with npm install --package-lock-only)"

key="$(cat "${SRC}/package.json" "${SRC}/package-lock.json" "${SRC}/node20-globsync.mjs" | sha256sum | cut -c1-12)"
dir="${CACHE}/npm/mcp-conformance-${MCP_CONFORMANCE_VERSION}-${key}"
runner="${dir}/conformance"
if [[ ! -x "${runner}" ]]; then
	log "npm ci @modelcontextprotocol/conformance@${MCP_CONFORMANCE_VERSION} into ${dir}"
	mkdir -p "${CACHE}/npm"
	tmp="$(mktemp -d "${CACHE}/npm/.mcp-conformance.XXXXXX")"
	trap 'rm -rf "${tmp}"' EXIT
	cp "${SRC}/package.json" "${SRC}/package-lock.json" "${SRC}/node20-globsync.mjs" "${tmp}/"
	# --ignore-scripts: no package's install script runs; the engines warning (node >= 22) is
	# expected on node 20.
	(cd "${tmp}" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2) || die "npm ci failed"
	cli="${dir}/node_modules/@modelcontextprotocol/conformance/dist/index.js"
	printf '#!/bin/sh\nexec node --import "%s" "%s" "$@"\n' "${dir}/node20-globsync.mjs" "${cli}" >"${tmp}/conformance"
	chmod 0755 "${tmp}/conformance"
	rm -rf "${dir}"
	mv "${tmp}" "${dir}"
	trap - EXIT
	"${runner}" --version >/dev/null || die "the installed runner does not start: ${runner} --version failed"
fi
echo "${runner}"
