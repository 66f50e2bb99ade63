#!/usr/bin/env bash
# Makes sure a Docker daemon answers: does nothing when `docker info` already works (a laptop, a CI
# runner with Docker); otherwise installs Debian's docker.io (root only) and starts dockerd in the
# background, logging to $TATARA_CACHE/logs/dockerd.log, and waits until it answers.
set -euo pipefail

CACHE="${TATARA_CACHE:-${HOME}/.cache/tatara}"
LOG_DIR="${CACHE}/logs"

# shellcheck source=SCRIPTDIR/lib/log.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"

if docker info >/dev/null 2>&1; then
	exit 0
fi

[[ "$(id -u)" == 0 ]] || die "no Docker daemon answers and this script can only install/start one as root; start Docker yourself"
mkdir -p "${LOG_DIR}"
# Serialise concurrent callers (several make targets, several engineers) so only one dockerd starts.
exec 9>"${LOG_DIR}/.ensure-docker.lock"
flock 9
if docker info >/dev/null 2>&1; then
	exit 0
fi

"$(dirname "${BASH_SOURCE[0]}")/ensure-apt.sh" dockerd:docker.io iptables
command -v dockerd >/dev/null || die "dockerd is still missing after apt-get install docker.io"
command -v docker >/dev/null || die "the docker client is missing (apt-get install docker.io)"

if ! pgrep -x dockerd >/dev/null; then
	# containerd from the docker.io dependencies is started by dockerd itself when no system
	# containerd runs (no systemd here).
	log "starting dockerd (log: ${LOG_DIR}/dockerd.log)"
	# Its own session: a caller whose process group is stopped (.ci/run's background build) does
	# not take the daemon with it.
	setsid nohup dockerd >>"${LOG_DIR}/dockerd.log" 2>&1 9>&- &
	echo $! >"${LOG_DIR}/dockerd.pid"
fi

for _ in $(seq 1 60); do
	if docker info >/dev/null 2>&1; then
		log "docker is up: $(docker version --format '{{.Server.Version}}')"
		exit 0
	fi
	sleep 1
done
tail -n 20 "${LOG_DIR}/dockerd.log" >&2 || true
die "dockerd did not answer within 60s (see ${LOG_DIR}/dockerd.log)"
