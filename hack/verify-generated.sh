#!/usr/bin/env bash
# make verify: runs make generate and fails when it changed anything, naming each file it changed
# and the command that fixes it. It compares the working tree's content before and after (every
# file git tracks or would track), not git's index: uncommitted work of the caller is neither a
# failure nor lost. A stale file is left regenerated, for review.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=SCRIPTDIR/lib/log.sh
source "${ROOT}/hack/lib/log.sh"
cd "${ROOT}"

# tree_sums prints "<sha256>  <path>" for every file of the working tree git tracks or does not
# ignore, sorted by path; a deleted tracked file is listed as missing.
tree_sums() {
	git ls-files --cached --others --exclude-standard -z | sort -zu |
		while IFS= read -r -d '' f; do
			if [[ -f "${f}" ]]; then sha256sum -- "${f}"; else echo "missing  ${f}"; fi
		done
}

before="$(mktemp)" after="$(mktemp)"
trap 'rm -f "${before}" "${after}"' EXIT
tree_sums >"${before}"
log "make generate"
make --no-print-directory -s generate >/dev/null
tree_sums >"${after}"

# Paths whose line differs: changed, added (a generator wrote a new file) or removed.
mapfile -t stale < <(diff "${before}" "${after}" | sed -n 's/^[<>] [^ ]*  //p' | sort -u)
if ((${#stale[@]} > 0)); then
	log "stale: make generate changed ${#stale[@]} file(s) (left regenerated: review, then commit):"
	printf '  %s\n' "${stale[@]}" >&2
	git --no-pager diff --stat -- "${stale[@]}" >&2 || true
	die "generated files were stale: run 'make generate' and commit the result"
fi
log "every generated file is up to date"
