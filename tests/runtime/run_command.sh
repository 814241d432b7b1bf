#!/usr/bin/env bash
# `dtplan run`: one rank starts dtplan-run itself (no mpirun); a plan dtplan-run cannot
# execute (a mixture of experts) is refused before any process starts.
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
echo "PASS"
