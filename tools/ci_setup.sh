#!/usr/bin/env bash
# The tools CI needs beyond tools/setup.sh: clang with libFuzzer and the sanitizer runtimes
# (the sanitizer and fuzz build) and its linker lld, clang-format and clang-tidy (the checks). Installs only what
# is missing.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/tools/apt_install_missing.sh" clang-14 libclang-rt-14-dev lld-14 clang-format-14 clang-tidy-14
