#!/usr/bin/env bash
# README walk-through: dtplan plan --save-plan, mpirun dtplan-run --out, dtplan validate.
set -euo pipefail
bin="$1"; mpirun="$2"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
"$bin/dtplan" plan --model gpt2 --topology pcie-1switch-4 --gpu A100-80GB --gpus 2 \
  --global-batch 16 --seq-len 128 --exact-batch --save-plan "$work/plan.json" > /dev/null
"$mpirun" -np 2 --oversubscribe "$bin/dtplan-run" --plan "$work/plan.json" --backend cpu \
  --steps 3 --scale 0.05 --out "$work/m.json"
"$bin/dtplan" validate --plan "$work/plan.json" --measured "$work/m.json"
"$bin/dtplan" validate --plan "$work/plan.json" --measured "$work/m.json" --json \
  | python3 -c 'import json,sys; f=json.load(sys.stdin)["figures"]; assert any(x["name"]=="step time" and x["measured"]>0 for x in f); assert all(x["error"]==0 for x in f if x["name"].startswith("memory")), "memory mismatch"'
