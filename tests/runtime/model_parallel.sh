#!/usr/bin/env bash
# Tensor and pipeline parallelism through the CLI as a user runs them: a one-replica GPT-2 plan
# executed over 2 tensor-parallel CPU ranks (dtplan run ... --tp 2) and over 2 pipeline stages
# (--pp 2, 4 micro-batches), each validated from its measurement alone: every memory component
# of rank 0 exactly as predicted, the split's all-reduces and the stages' exchanges listed by
# phase. The refusals name the problem: --plan differing from the measurement's (by its tp), a
# rank count that is not dp x tp x pp, a tp that does not divide the heads, a pp that does not
# divide the layers, model parallelism on the CUDA backend. A layout the planner saves as the
# plan (dtplan plan --save-plan) runs as it is.
set -euo pipefail
bin="$1"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
"$bin/dtplan" plan --model gpt2 --topology pcie-1switch-4 --gpu A100-80GB --gpus 1 \
  --global-batch 8 --micro-batch 2 --seq-len 64 --strategy ddp --precision fp32 --exact-batch \
  --save-plan "$work/one.json" > /dev/null

validated() {  # name layout-words phase...: run, validate, check memory and the listed phases
  local name="$1" words="$2"; shift 2
  "$bin/dtplan" validate --measured "$work/$name.json" > "$work/$name.txt"
  cat "$work/$name.txt"
  grep -q "ddp on 1 x 2 $words ranks" "$work/$name.txt"
  for c in weights gradients optimizer_states activations buffers "peak (rank 0)"; do
    grep -q "memory $c .* +0.0%$" "$work/$name.txt" || { echo "FAIL: $name memory $c"; exit 1; }
  done
  for phase in "$@"; do
    grep -q "($phase, [0-9]*/step)" "$work/$name.txt" || { echo "FAIL: $name: no $phase"; exit 1; }
  done
}

"$bin/dtplan" run --np 2 --plan "$work/one.json" --tp 2 --backend cpu --steps 2 --scale 0.05 \
  --out "$work/tp.json" > "$work/run.txt" 2> /dev/null
grep -q "ddp on 1 x 2 tensor-parallel ranks (cpu)" "$work/run.txt"
validated tp tensor-parallel "tensor-parallel forward" "tensor-parallel backward"
grep -q "all_reduce .* (tensor-parallel forward, 100/step)" "$work/tp.txt"  # 4 x (1 + 2 x 12)
grep -q "note: tensor parallel over 2 ranks as Megatron-LM splits a block" "$work/tp.txt"

"$bin/dtplan" run --np 2 --plan "$work/one.json" --pp 2 --backend cpu --steps 2 --scale 0.05 \
  --out "$work/pp.json" > "$work/run.txt" 2> /dev/null
grep -q "ddp on 1 x 2 pipeline-stage ranks (cpu)" "$work/run.txt"
validated pp pipeline-stage "pipeline forward" "pipeline backward" "gradient sync"
# Stage 0 of 2 over 4 micro-batches: 1 activation sent ahead, then 3 + 1 gradient waits.
grep -q "send_recv .* (pipeline forward, 1/step)" "$work/pp.txt"
grep -q "send_recv .* (pipeline backward, 4/step)" "$work/pp.txt"
grep -q "note: pipeline of 2 stages of 6 blocks" "$work/pp.txt"

# The planner's own layout: with --strategy megatron --tp 2 --sp off its best is tp 2 under the
# distributed optimizer (ZeRO-1), which --save-plan writes and dtplan run executes, no --tp.
"$bin/dtplan" plan --model gpt2 --topology pcie-1switch-4 --gpu A100-80GB --gpus 2 \
  --global-batch 4 --seq-len 64 --exact-batch --strategy megatron --tp 2 \
  --sp off --save-plan "$work/layout.json" > "$work/plan.txt"
grep -q "wrote plan (the best layout, tp 2 x pp 1 x dp 1" "$work/plan.txt"
"$bin/dtplan" run --np 2 --plan "$work/layout.json" --backend cpu --steps 2 --scale 0.05 \
  --out "$work/layout-m.json" > "$work/run.txt" 2> /dev/null
grep -q "zero1 on 1 x 2 tensor-parallel ranks (cpu)" "$work/run.txt"
"$bin/dtplan" validate --measured "$work/layout-m.json" > "$work/layout.txt"
grep -q "memory peak (rank 0) .* +0.0%$" "$work/layout.txt" || { echo "FAIL: layout peak"; exit 1; }
grep -q "(tensor-parallel forward, [0-9]*/step)" "$work/layout.txt"

refused() {  # expected-text command...: the command fails and says so
  local want="$1"; shift
  if "$@" > "$work/out.txt" 2>&1; then echo "FAIL: ran: $*"; exit 1; fi
  grep -qF -- "$want" "$work/out.txt" || { cat "$work/out.txt"; echo "FAIL: no '$want'"; exit 1; }
}
refused "tp 2 (--plan: 1)" "$bin/dtplan" validate --plan "$work/one.json" --measured "$work/tp.json"
refused "the plan is for 1 data-parallel x 2 tensor-parallel ranks (2 processes), not 3: start 2" \
  "$bin/dtplan" run --np 3 --plan "$work/one.json" --tp 2 --backend cpu --steps 1 --scale 0.05
refused "--tp 0: expected a whole number of ranks >= 1" \
  "$bin/dtplan" run --np 2 --plan "$work/one.json" --tp 0 --backend cpu --steps 1 --scale 0.05
if grep -q "mpirun" "$work/out.txt"; then echo "FAIL: mpirun started before the refusal"; exit 1; fi
refused "/tp: 3 tensor-parallel ranks do not divide ffn 154 at --scale 0.05" \
  "$bin/dtplan" run --np 3 --plan "$work/one.json" --tp 3 --backend cpu --steps 1 --scale 0.05
refused "/tp: 5 tensor-parallel ranks do not divide heads 12" \
  "$bin/dtplan" run --np 5 --plan "$work/one.json" --tp 5 --backend cpu --steps 1 --scale 0.05
refused "/pp: 5 pipeline stages do not divide layers 12" \
  "$bin/dtplan" run --np 5 --plan "$work/one.json" --pp 5 --backend cpu --steps 1 --scale 0.05
if grep -q "mpirun" "$work/out.txt"; then echo "FAIL: mpirun started before /pp's refusal"; exit 1; fi
refused "tensor and pipeline parallelism on the CPU backend only" \
  "$bin/dtplan" run --np 2 --plan "$work/one.json" --pp 2 --backend cuda --steps 1 --scale 0.05
echo "PASS"
