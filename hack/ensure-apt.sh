#!/usr/bin/env bash
# Installs Debian packages from the machine's apt sources when their command is missing:
# hack/ensure-apt.sh COMMAND[:PACKAGE]... (PACKAGE defaults to COMMAND). Needs root to install.
set -euo pipefail

missing=()
for spec in "$@"; do
	cmd="${spec%%:*}" pkg="${spec#*:}"
	command -v "${cmd}" >/dev/null || missing+=("${pkg}")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ "$(id -u)" != 0 ]]; then
	echo "ensure-apt: missing ${missing[*]}; install them (apt-get install ${missing[*]})" >&2
	exit 1
fi
echo "ensure-apt: installing ${missing[*]} from the machine's apt sources" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
