#!/usr/bin/env bash
# Fuzzes one libFuzzer target for a bounded time, starting from its seeds.
#   run_fuzzer.sh FUZZER SECONDS WORKDIR SEED...
# SEED is a file or a folder; their files are copied into WORKDIR/corpus, which libFuzzer then
# grows. A crash is written to WORKDIR/crash-* and fails the run: keep it as a regression in
# tests/fuzz/regressions/NAME/ once fixed (docs/reliability.md).
set -euo pipefail
fuzzer="$1" seconds="$2" work="$3"
shift 3
mkdir -p "$work/corpus"
# Named by content, as libFuzzer names its corpus: two seeds called config.json both stay.
while IFS= read -r -d '' file; do
  cp -f "$file" "$work/corpus/$(sha1sum <"$file" | cut -c1-40)"
done < <(find "$@" -maxdepth 1 -type f -print0)
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/" "$work/corpus"
