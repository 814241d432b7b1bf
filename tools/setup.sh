#!/usr/bin/env bash
# dtplan set-up: installs the Debian packages the build needs (only those missing),
# configures the CMake build in build/ once, and builds. Safe to run again: with
# everything installed and nothing changed it only re-checks and returns quickly.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${DTPLAN_BUILD_DIR:-$repo/build}"

packages=(
  cmake g++ make pkg-config python3
  libboost-graph-dev libeigen3-dev nlohmann-json3-dev libcli11-dev catch2
  qt6-base-dev libqt6opengl6-dev qt6-charts-dev qt6-svg-dev
  libopenmpi-dev openmpi-bin xvfb xauth libbenchmark-dev python3-torch
)

"$repo/tools/apt_install_missing.sh" "${packages[@]}"

if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$build_dir" --parallel "$(nproc)" >&2
