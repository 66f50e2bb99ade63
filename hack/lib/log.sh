# shellcheck shell=bash
# log and die of every hack/ script: one line on stderr, tagged with the script's name (LOG_TAG,
# set before sourcing, overrides it) and the UTC time; die exits 1.
LOG_TAG="${LOG_TAG:-$(basename "${0}" .sh)}"
log() { printf '[%s %s] %s\n' "${LOG_TAG}" "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
