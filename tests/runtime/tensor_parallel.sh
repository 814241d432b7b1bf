#!/usr/bin/env bash
# Tensor parallelism through the CLI as a user runs it: a one-replica GPT-2 plan executed over
# 2 tensor-parallel CPU ranks (dtplan run ... --tp 2), validated from its measurement alone: every
# memory component exactly as predicted, the split's all-reduces listed by phase. The refusals
# name the problem: --plan differing from the measurement's (by its tp), a rank count that is not
# dp x tp, a tp that does not divide the heads, tensor parallelism on the CUDA backend.
set -euo pipefail
bin="$1"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
"$bin/dtplan" plan --model gpt2 --topology pcie-1switch-4 --gpu A100-80GB --gpus 1 \
  --global-batch 4 --micro-batch 2 --seq-len 64 --strategy ddp --precision fp32 --exact-batch \
  --save-plan "$work/one.json" > /dev/null
"$bin/dtplan" run --np 2 --plan "$work/one.json" --tp 2 --backend cpu --steps 2 --scale 0.05 \
  --out "$work/m.json" > "$work/run.txt" 2> /dev/null
grep -q "ddp on 1 x 2 tensor-parallel ranks (cpu)" "$work/run.txt"
"$bin/dtplan" validate --measured "$work/m.json" > "$work/validate.txt"
cat "$work/validate.txt"
grep -q "ddp on 1 x 2 tensor-parallel ranks" "$work/validate.txt"
for c in weights gradients optimizer_states activations buffers "peak (rank 0)"; do
  grep -q "memory $c .* +0.0%$" "$work/validate.txt" || { echo "FAIL: memory $c"; exit 1; }
done
grep -q "all_reduce .* (tensor-parallel forward, 50/step)" "$work/validate.txt"
grep -q "all_reduce .* (tensor-parallel backward, 50/step)" "$work/validate.txt"
grep -q "note: tensor parallel over 2 ranks as Megatron-LM splits a block" "$work/validate.txt"

refused() {  # expected-text command...: the command fails and says so
  local want="$1"; shift
  if "$@" > "$work/out.txt" 2>&1; then echo "FAIL: ran: $*"; exit 1; fi
  grep -qF -- "$want" "$work/out.txt" || { cat "$work/out.txt"; echo "FAIL: no '$want'"; exit 1; }
}
refused "tp 2 (--plan: 1)" "$bin/dtplan" validate --plan "$work/one.json" --measured "$work/m.json"
refused "the plan is for 1 data-parallel x 2 tensor-parallel ranks but mpirun started 3 (run mpirun -np 2" \
  "$bin/dtplan" run --np 3 --plan "$work/one.json" --tp 2 --backend cpu --steps 1 --scale 0.05
refused "/tp: 5 tensor-parallel ranks do not divide heads 12" \
  "$bin/dtplan" run --np 5 --plan "$work/one.json" --tp 5 --backend cpu --steps 1 --scale 0.05
refused "tensor parallelism on the CPU backend only" \
  "$bin/dtplan" run --np 2 --plan "$work/one.json" --tp 2 --backend cuda --steps 1 --scale 0.05
echo "PASS"
