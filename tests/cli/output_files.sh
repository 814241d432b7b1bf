#!/usr/bin/env bash
# Files and standard output as a user meets them (issue 14, items 3-5): a write that fails
# half-way (a full disk, simulated by a file-size limit) leaves the previous file intact,
# links are followed, FIFOs are written into, and an unwritable stdout is an error.
# Usage: output_files.sh BIN_DIR MPIRUN
set -uo pipefail
bin="$1"; mpirun="$2"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
plan="$work/one-gpu.json"
"$bin/dtplan" plan --model gpt2 --topology pcie-1switch-4 --gpu A100-80GB --gpus 1 \
  --global-batch 4 --seq-len 128 --exact-batch --save-plan "$plan" > /dev/null || exit 1
failures=0
check() {  # check "what" command...: the command must succeed
  local what="$1"; shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}

# 3. --dot under a 1 KiB file-size limit: the old file stays, the command fails and says why.
echo "old graph" > "$work/g.dot"
(trap '' XFSZ; ulimit -f 1; "$bin/dtplan" topo --topology dgx-h100 --nodes 4 --dot "$work/g.dot") \
  > "$work/dot.out" 2> "$work/dot.err"
rc=$?
check "--dot on a full disk fails" test "$rc" -ne 0
check "--dot on a full disk names the file" grep -q -- "--dot $work/g.dot: File too large" "$work/dot.err"
check "--dot on a full disk keeps the old file" grep -qx "old graph" "$work/g.dot"
check "--dot on a full disk leaves no temporary" test "$(ls -A "$work" | grep -c '\.tmp$')" -eq 0

# 3. dtplan-run --out under the limit: the previous measurement is not destroyed.
echo '{"previous": true}' > "$work/m.json"
# The limit applies to dtplan-run alone (mpirun keeps its own session files in /tmp).
"$mpirun" -np 1 bash -c 'trap "" XFSZ; ulimit -f 2; exec "$@"' limited "$bin/dtplan-run" \
  --plan "$plan" --backend cpu --steps 1 --warmup 0 --scale 0.02 --out "$work/m.json" \
  > "$work/run.out" 2>&1
rc=$?
check "dtplan-run --out on a full disk fails" test "$rc" -ne 0
check "dtplan-run --out on a full disk keeps the old file" grep -qx '{"previous": true}' "$work/m.json"
# ... and with room, it writes the measurement.
"$mpirun" -np 1 "$bin/dtplan-run" --plan "$plan" --backend cpu --steps 1 --warmup 0 \
  --scale 0.02 --out "$work/m.json" > /dev/null 2>&1
check "dtplan-run --out writes the measurement" grep -q '"steps"' "$work/m.json"
# A directory that does not exist is refused before the job runs.
"$mpirun" -np 1 "$bin/dtplan-run" --plan "$plan" --backend cpu --out "$work/none/m.json" \
  > "$work/nodir.out" 2>&1
check "dtplan-run --out into a missing directory is named" \
  grep -q -- "--out $work/none/m.json: the directory $work/none does not exist" "$work/nodir.out"

# 4. --save-plan through a symbolic link: the link stays, its target gets the plan.
plan_args=(plan --model gpt2 --topology pcie-1switch-4 --gpu A100-80GB --gpus 2
           --global-batch 16 --seq-len 128)
mkdir "$work/plans"; echo old > "$work/plans/real.json"
ln -s plans/real.json "$work/link.json"
"$bin/dtplan" "${plan_args[@]}" --save-plan "$work/link.json" > /dev/null
check "--save-plan keeps the symbolic link" test -L "$work/link.json"
check "--save-plan writes the link's target" grep -q '"schema_version"' "$work/plans/real.json"

# 4. --save-plan into a FIFO: the reader gets the plan, the FIFO stays a FIFO.
mkfifo "$work/plan.fifo"
cat "$work/plan.fifo" > "$work/from-fifo.json" &
reader=$!
"$bin/dtplan" "${plan_args[@]}" --save-plan "$work/plan.fifo" > /dev/null
wait "$reader"
check "--save-plan into a FIFO keeps the FIFO" test -p "$work/plan.fifo"
check "--save-plan into a FIFO reaches its reader" grep -q '"schema_version"' "$work/from-fifo.json"

# 4. A character device is written, never replaced: /dev/full refuses with its reason.
"$bin/dtplan" "${plan_args[@]}" --save-plan /dev/full > /dev/null 2> "$work/full.err"
rc=$?
check "--save-plan /dev/full fails" test "$rc" -ne 0
check "--save-plan /dev/full says why" grep -q -- "--save-plan /dev/full: No space left on device" "$work/full.err"
check "/dev/full is still a character device" test -c /dev/full

# 5. Standard output that cannot be written is an error with a message, not exit 0.
"$bin/dtplan" gpus > /dev/full 2> "$work/stdout.err"
rc=$?
check "dtplan gpus > /dev/full fails" test "$rc" -ne 0
check "dtplan gpus > /dev/full says why" \
  grep -q "cannot write the standard output: No space left on device" "$work/stdout.err"
"$bin/dtplan" "${plan_args[@]}" --json > /dev/full 2> /dev/null
check "dtplan plan --json > /dev/full fails" test "$?" -ne 0
# Run as an MPI singleton: under mpirun, mpirun itself writes the ranks' output.
"$bin/dtplan-run" --plan "$plan" --backend cpu --steps 1 --warmup 0 --scale 0.02 \
  > /dev/full 2> "$work/run-stdout.err"
check "dtplan-run > /dev/full fails" test "$?" -ne 0
check "dtplan-run > /dev/full says why" \
  grep -q "cannot write the standard output: No space left on device" "$work/run-stdout.err"

echo "output files: $failures failed"
test "$failures" -eq 0
