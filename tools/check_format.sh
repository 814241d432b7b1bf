#!/usr/bin/env bash
# Checks that every C++ and CUDA file tracked by git is formatted by clang-format 14 with the
# repository's .clang-format; lists the files that are not. `--fix` formats them instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
format="$(command -v clang-format-14 || command -v clang-format)"
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
if [[ "${1:-}" == "--fix" ]]; then
  "$format" -i "${files[@]}"
  exit 0
fi
"$format" --dry-run --Werror "${files[@]}" || {
  echo "clang-format: the files above differ from .clang-format; run tools/check_format.sh --fix" >&2
  exit 1
}
echo "clang-format: ${#files[@]} files clean"
