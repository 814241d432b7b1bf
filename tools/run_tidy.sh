#!/usr/bin/env bash
# Runs clang-tidy (the checks of .clang-tidy, findings are errors) over the product code of
# model, cost, planner, runtime, cli and gui, using a build's compile_commands.json. CUDA
# sources are left out (clang-tidy would need the CUDA toolkit to parse them).
#   tools/run_tidy.sh [BUILD_DIR]     default: build
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$repo/build}"
tidy="$(command -v clang-tidy-14 || command -v clang-tidy)"
runner="$(command -v run-clang-tidy-14 || command -v run-clang-tidy)"
[[ -f "$build/compile_commands.json" ]] || {
  echo "run_tidy: no $build/compile_commands.json; build first (tools/setup.sh)" >&2
  exit 1
}
# GCC-only warning flags in the compile commands are not clang-tidy's business.
"$runner" -quiet -clang-tidy-binary "$tidy" -p "$build" -j "$(nproc)" \
  -extra-arg=-Wno-unknown-warning-option \
  "^$repo/(model|cost|planner|runtime|cli|gui)/.*\.cpp$"
