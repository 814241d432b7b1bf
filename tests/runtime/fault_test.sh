#!/usr/bin/env bash
# A dtplan-run job that must end with an error, within a time limit, saying why.
# usage: fault_test.sh LIMIT_SECONDS EXPECTED_TEXT -- command...
set -u
limit="$1"; expected="$2"; shift 3
start=$(date +%s)
output="$(timeout "$((limit + 30))" "$@" 2>&1)"
status=$?
elapsed=$(( $(date +%s) - start ))
echo "$output" | tail -20
echo "exit status $status after ${elapsed}s"
if [[ $status -eq 0 ]]; then echo "FAIL: the job succeeded"; exit 1; fi
if [[ $status -eq 124 ]]; then echo "FAIL: the job hung past ${limit}s"; exit 1; fi
if (( elapsed > limit )); then echo "FAIL: took ${elapsed}s, more than ${limit}s"; exit 1; fi
if ! grep -qF -- "$expected" <<<"$output"; then echo "FAIL: no '$expected' in the output"; exit 1; fi
echo "PASS"
