#!/usr/bin/env bash
# Installs the given Debian packages that are not installed yet (apt-get, through sudo when
# not root); does nothing, and needs no network, when all of them are there.
#   tools/apt_install_missing.sh PACKAGE...
set -euo pipefail

missing=()
for pkg in "$@"; do
  status="$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)"
  [[ "$status" == "installed" ]] || missing+=("$pkg")
done
((${#missing[@]} > 0)) || exit 0

echo "dtplan setup: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ "$(id -u)" -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "dtplan setup: missing packages (${missing[*]}); run as root or install sudo" >&2
    exit 1
  fi
  sudo_cmd=(sudo)
fi
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >&2
