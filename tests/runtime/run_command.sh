#!/usr/bin/env bash
# `dtplan run`: one rank starts dtplan-run itself (no mpirun); a plan dtplan-run cannot
# execute (a mixture of experts, ZeRO-2 over tied stages) is refused before any process starts;
# dtplan-run's own exit codes.
set -euo pipefail
bin="$1"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
"$bin/dtplan" plan --model gpt2 --topology pcie-1switch-4 --gpu A100-80GB --gpus 1 \
  --global-batch 4 --seq-len 128 --exact-batch --save-plan "$work/one.json" > /dev/null
"$bin/dtplan" run --np 1 --plan "$work/one.json" --backend cpu --steps 1 --scale 0.05 \
  --out "$work/m.json" 2> "$work/err.txt"
grep -q "^dtplan run: .*dtplan-run --plan" "$work/err.txt"
if grep -q "mpirun" "$work/err.txt"; then echo "FAIL: one rank went through mpirun"; exit 1; fi
test -s "$work/m.json"
python3 - "$work/one.json" "$work/moe.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["model"] = "qwen1.5-moe-a2.7b"
json.dump(plan, open(sys.argv[2], "w"))
PY
if "$bin/dtplan" run --np 2 --plan "$work/moe.json" --backend cpu > "$work/out.txt" 2>&1; then
  echo "FAIL: a mixture-of-experts plan ran"; exit 1
fi
grep -q "is a mixture of experts; dtplan-run executes dense blocks only" "$work/out.txt"
if grep -q "mpirun" "$work/out.txt"; then echo "FAIL: mpirun started before the refusal"; exit 1; fi
# A ZeRO-2 plan split into stages would shard the tied embedding's summed gradient: refused
# before any process starts, naming the plan's field.
sed 's/"strategy": "[a-z0-9-]*"/"strategy": "zero2"/' "$work/one.json" > "$work/zero2.json"
if "$bin/dtplan" run --np 2 --pp 2 --plan "$work/zero2.json" --backend cpu > "$work/out.txt" 2>&1
then
  echo "FAIL: a ZeRO-2 plan over tied stages ran"; exit 1
fi
grep -q "/strategy: zero2 with a tied embedding across pipeline stages" "$work/out.txt"
if grep -q "mpirun" "$work/out.txt"; then echo "FAIL: mpirun started before the refusal"; exit 1; fi
# What dtplan-run does not execute is refused, not run without it (a measurement would then seem
# to confirm the plan): offloaded states, FP8.
sed 's/"offload": "none"/"offload": "optimizer"/' "$work/one.json" > "$work/offload.json"
if "$bin/dtplan" run --np 1 --plan "$work/offload.json" --backend cpu > "$work/out.txt" 2>&1; then
  echo "FAIL: an offloaded plan ran"; exit 1
fi
grep -q "/offload: optimizer: dtplan-run keeps every state on the device" "$work/out.txt"
sed 's/"fp8": "none"/"fp8": "delayed"/' "$work/one.json" > "$work/fp8.json"
if "$bin/dtplan" run --np 1 --plan "$work/fp8.json" --backend cpu > "$work/out.txt" 2>&1; then
  echo "FAIL: an FP8 plan ran"; exit 1
fi
grep -q "/fp8: delayed: dtplan-run has no FP8 GEMMs" "$work/out.txt"
# The measurement records how much of a core each rank had (validate notes less than 0.9).
python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['hardware']['cpu_share']; sys.exit(0 if 0 < s <= 4 else 1)" "$work/m.json"
# A flag dtplan-run refuses is refused once, by dtplan-run --check, before mpirun starts any rank.
set +e
"$bin/dtplan" run --np 2 --pp 2 --plan "$work/one.json" --steps 0 > "$work/out.txt" 2>&1
rc=$?
set -e
test "$rc" -eq 2 || { cat "$work/out.txt"; echo "FAIL: --steps 0 exited $rc, not 2"; exit 1; }
test "$(grep -c -- "--steps: must be at least 1" "$work/out.txt")" -eq 1
if grep -q "mpirun\|MPI_ABORT" "$work/out.txt"; then echo "FAIL: mpirun started"; exit 1; fi
# Without --plan the flags meant for dtplan-run are not what is wrong: --plan is named.
if "$bin/dtplan" run --np 2 --backend cpu --scale 0.05 > "$work/out.txt" 2>&1; then
  echo "FAIL: ran without --plan"; exit 1
fi
grep -q "dtplan: error: --plan is required" "$work/out.txt"
# dtplan-run alone, as one process: a command line that does not parse exits 2, as dtplan's do;
# a plan it refuses exits 1 with its one line and no MPI abort report.
set +e
"$bin/dtplan-run" --plan "$work/one.json" --steps 0 > "$work/out.txt" 2>&1
rc=$?
set -e
test "$rc" -eq 2 || { cat "$work/out.txt"; echo "FAIL: --steps 0 exited $rc, not 2"; exit 1; }
grep -q "^dtplan-run: error: --steps: must be at least 1, got 0 (see dtplan-run --help)" \
  "$work/out.txt"
set +e
"$bin/dtplan-run" --plan "$work/zero2.json" --pp 2 --backend cpu > "$work/out.txt" 2>&1
rc=$?
set -e
test "$rc" -eq 1 || { cat "$work/out.txt"; echo "FAIL: a refused plan exited $rc, not 1"; exit 1; }
grep -q "not 1: start 2" "$work/out.txt"
if grep -qi "MPI_ABORT" "$work/out.txt"; then echo "FAIL: one process printed MPI's abort"; exit 1; fi
echo "PASS"
