#!/usr/bin/env bash
# PyTorch as the reference of the CPU runtime (issue 19): dtplan-run jobs dumped with --dump and
# replayed by tools/torch_replay.py in PyTorch DDP over gloo. Every job's static memory on rank
# 0 (weights, gradients, optimizer states) must be PyTorch's, padded and sharded as dtplan-run
# keeps them. Three fp32 jobs must end with the same weights and losses:
#   GPT-2 kind (LayerNorm, learned positions, GELU, biases, tied head), ZeRO-2 (FSDP
#     SHARD_GRAD_OP) with 2 micro-steps, 2 ranks, selective recomputation
#   Llama 3.2 kind (RMSNorm, rotary base 500,000, SwiGLU, 8 of 32 key/value heads, tied),
#     DDP with 4 micro-steps under no_sync, 1 rank
#   Llama 2 kind (untied head, no biases), ZeRO-3 with 2 micro-steps, 2 ranks, full
#     recomputation
# (Recomputation changes what is kept, not the arithmetic: PyTorch keeps everything.)
# Four fp32 jobs split the model as Megatron-LM does (dtplan-run --tp, --pp) and must end where
# PyTorch trains the whole model (under tp the vocabulary padded to even):
#   GPT-2 kind with its dropout, 2 tensor-parallel ranks, DDP on 1 data-parallel rank
#   Llama 3.2 kind, 2 tensor-parallel x 2 data-parallel ranks, ZeRO-1, full recomputation
#   GPT-2 kind with its dropout, 2 pipeline stages (tied: the last stage's copy of the
#     embedding), 8 micro-batches under one-forward-one-backward, DDP
#   Llama 3.2 kind, 2 tensor-parallel ranks x 2 pipeline stages, ZeRO-1, 4 micro-batches
# Two bf16 jobs (one-block GPT-2 and Llama 3.2 shapes, one SGD step at learning rate 1 without
# clipping, so that the weights move by the gradient) must give the gradient PyTorch's bf16
# autocast gives, element by element (torch_replay.py says how closely):
#   GPT-2 kind, ZeRO-3 on 2 ranks, 2 micro-steps;  Llama 3.2 kind, DDP on 2 ranks, 2 micro-steps
# Two more bf16 steps split each block over 2 tensor-parallel ranks (one-block GPT-2 with its
# dropout and Llama 3.2 shapes, DDP on 1 data-parallel rank, 2 micro-steps): their partial
# outputs and input gradients are rounded before they are summed, as a 16-bit all-reduce
# leaves them, and the replay computes each split Linear rank by rank the same way.
# The GPT-2 jobs run GPT-2's dropout (p = 0.1 on the attention probabilities, both projections
# and the embeddings); the replay rebuilds dtplan-run's masks with numpy. Four disturbed dumps
# must be reported as disagreeing: an fp32 job with one final weight nudged, one with four
# bytes of gradient memory too many, the GPT-2 bf16 step with another seed's dropout masks, and
# an fp32 run presented as bf16 (a runtime that forgot to round).
set -euo pipefail
bin="$1"; mpirun="$2"; python="$3"; tools="$4"
models="$tools/../data/models"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT

plan() {  # name model strategy ranks global micro seq checkpointing precision optimizer
  local name="$1" model="$2" strategy="$3" ranks="$4" global="$5" micro="$6" seq="$7"
  "$bin/dtplan" plan --model "$model" --topology "$topology" --gpu A100-80GB --gpus "$ranks" \
    --global-batch "$global" --micro-batch "$micro" --seq-len "$seq" --strategy "$strategy" \
    --checkpointing "$8" --precision "$9" --optimizer "${10}" --exact-batch \
    --save-plan "$work/$name.json" > /dev/null
  local shape
  shape="$("$python" -c 'import json, sys; p = json.load(open(sys.argv[1]))
print(p["strategy"], p["dp"], p["checkpointing"], p["precision"], p["grad_accum"])' "$work/$name.json")"
  echo "$name: planned $shape (strategy, ranks, checkpointing, precision, micro-steps)"
  [[ "$shape" == "$strategy $ranks $8 $9 "* ]] ||
    { echo "FAIL: $name is not $strategy on $ranks with $8 checkpointing in $9"; exit 1; }
}

replay() {  # name model strategy ranks micro seq scale checkpointing
  topology=pcie-1switch-4
  plan "$1" "$2" "$3" "$4" 8 "$5" "$6" "$8" fp32 adamw
  "$mpirun" -np "$4" --oversubscribe "$bin/dtplan-run" --plan "$work/$1.json" \
    --backend cpu --steps 2 --warmup 1 --scale "$7" --dump "$work/$1" > /dev/null
  "$python" "$tools/torch_replay.py" "$work/$1"
}

replay_mp() {  # name model strategy dp micro seq scale checkpointing global tp pp
  topology=pcie-1switch-4
  plan "$1" "$2" "$3" "$4" "$9" "$5" "$6" "$8" fp32 adamw
  "$mpirun" -np $(($4 * ${10} * ${11})) --oversubscribe "$bin/dtplan-run" --plan "$work/$1.json" \
    --tp "${10}" --pp "${11}" --backend cpu --steps 2 --warmup 1 --scale "$7" \
    --dump "$work/$1" > /dev/null
  if [[ "${10}" -gt 1 ]]; then grep -q "\"tensor_parallel\": ${10}" "$work/$1/replay.json"; fi
  if [[ "${11}" -gt 1 ]]; then grep -q "\"pipeline_stages\": ${11}" "$work/$1/replay.json"; fi
  "$python" "$tools/torch_replay.py" "$work/$1"
}

one_block() {  # catalogue model -> a copy with one decoder block
  "$python" - "$models/$1.json" "$work/$1-1-block.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
c = m["hf_config"]
c["n_layer" if "n_layer" in c else "num_hidden_layers"] = 1
m["name"] += "-1-block"
json.dump(m, open(sys.argv[2], "w"))
PY
}

gradient() {  # name model strategy global micro [tp]: one bf16 SGD step on 2 ranks
  local tp="${6:-1}"
  topology=dgx-a100
  plan "$1" "$2" "$3" $((2 / tp)) "$4" "$5" 128 none bf16 sgd
  "$mpirun" -np 2 --oversubscribe "$bin/dtplan-run" --plan "$work/$1.json" --backend cpu \
    --tp "$tp" --steps 1 --warmup 0 --lr 1 --max-grad-norm 0 --scale 0.05 \
    --dump "$work/$1" > /dev/null
  "$python" "$tools/torch_replay.py" "$work/$1"
}

replay gpt2 gpt2 fsdp-grad-op 2 2 128 0.05 selective
replay llama32 llama-3.2-1b ddp 1 2 32 0.05 none
replay llama2 llama-2-7b zero3 2 2 64 0.02 full
replay_mp gpt2-tp gpt2 ddp 1 2 64 0.05 none 4 2 1
replay_mp llama32-tp llama-3.2-1b zero1 2 2 64 0.05 full 8 2 1
replay_mp gpt2-pp gpt2 ddp 1 2 64 0.05 none 16 1 2
replay_mp llama32-tp-pp llama-3.2-1b zero1 1 2 64 0.05 none 8 2 2

one_block gpt2
one_block llama-3.2-1b
gradient gpt2-bf16 "$work/gpt2-1-block.json" zero3 8 2
gradient llama32-bf16 "$work/llama-3.2-1b-1-block.json" ddp 4 1
gradient gpt2-bf16-tp "$work/gpt2-1-block.json" ddp 4 2 2
gradient llama32-bf16-tp "$work/llama-3.2-1b-1-block.json" ddp 4 2 2

expect_disagreement() {  # name: torch_replay must report the dump as disagreeing
  if "$python" "$tools/torch_replay.py" "$work/$1" > "$work/$1.txt"; then
    cat "$work/$1.txt"; echo "FAIL: $2 went unnoticed"; exit 1
  fi
  grep "gradient:\|weights:\|DISAGREE" "$work/$1.txt"; grep -q "DISAGREE" "$work/$1.txt"
}

# The fp32 comparison can fail: nudge one final weight of the GPT-2 run by 0.01.
"$python" - "$work/gpt2/final.f32" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(4 * 1000)
    (w,) = struct.unpack("<f", f.read(4))
    f.seek(4 * 1000)
    f.write(struct.pack("<f", w + 0.01))
PY
expect_disagreement gpt2 "a disturbed weight"

# And the memory comparison: four bytes more gradient than PyTorch's on the Llama 3.2 run.
"$python" - "$work/llama32/replay.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["memory"]["gradients"] += 4
json.dump(r, open(sys.argv[1], "w"))
PY
expect_disagreement llama32 "a gradient buffer PyTorch does not have"

# The dropout masks (GPT-2 has p = 0.1 on the probabilities, both projections and the
# embeddings): the GPT-2 bf16 step replayed with the masks of another seed.
"$python" - "$work/gpt2-bf16/replay.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert min(r["workload"]["dropout"].values()) == 0.1
r["seed"] += 1
json.dump(r, open(sys.argv[1], "w"))
PY
expect_disagreement gpt2-bf16 "dropout masks from another seed"

# So can the bf16 one: the same Llama step computed in fp32, its dump labelled bf16.
sed -i 's/"precision": "bf16"/"precision": "fp32"/' "$work/llama32-bf16.json"
"$mpirun" -np 2 --oversubscribe "$bin/dtplan-run" --plan "$work/llama32-bf16.json" --backend cpu \
  --steps 1 --warmup 0 --lr 1 --max-grad-norm 0 --scale 0.05 --dump "$work/unrounded" > /dev/null
grep -q '"compute": "fp32"' "$work/unrounded/replay.json"
sed -i 's/"compute": "fp32"/"compute": "bf16"/' "$work/unrounded/replay.json"
expect_disagreement unrounded "an unrounded run presented as bf16"
echo "PASS"
