#!/usr/bin/env bash
# PyTorch as the reference of the CPU runtime (issue 19): three dtplan-run jobs dumped with
# --dump and replayed by tools/torch_replay.py in PyTorch DDP over gloo must end with the same
# weights and losses; a dump whose final weights are disturbed must be reported as disagreeing.
#   GPT-2 kind (LayerNorm, learned positions, GELU, biases, tied head), ZeRO-2 (FSDP
#     SHARD_GRAD_OP) with 2 micro-steps, 2 ranks, selective recomputation
#   Llama 3.2 kind (RMSNorm, rotary base 500,000, SwiGLU, 8 of 32 key/value heads, tied),
#     DDP with 4 micro-steps under no_sync, 1 rank
#   Llama 2 kind (untied head, no biases), ZeRO-3 with 2 micro-steps, 2 ranks, full
#     recomputation
# (Recomputation changes what is kept, not the arithmetic: PyTorch keeps everything.)
set -euo pipefail
bin="$1"; mpirun="$2"; python="$3"; tools="$4"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT

replay() {  # name model strategy ranks micro seq scale checkpointing
  local name="$1" model="$2" strategy="$3" ranks="$4" micro="$5" seq="$6" scale="$7"
  local checkpointing="$8"
  "$bin/dtplan" plan --model "$model" --topology pcie-1switch-4 --gpu A100-80GB \
    --gpus "$ranks" --global-batch 8 --micro-batch "$micro" --seq-len "$seq" \
    --strategy "$strategy" --checkpointing "$checkpointing" --exact-batch \
    --save-plan "$work/$name.json" > /dev/null
  local shape
  shape="$("$python" -c 'import json, sys; p = json.load(open(sys.argv[1]))
print(p["strategy"], p["dp"], p["checkpointing"], p["grad_accum"])' "$work/$name.json")"
  echo "$name: planned $shape (strategy, ranks, checkpointing, micro-steps)"
  [[ "$shape" == "$strategy $ranks $checkpointing "* ]] ||
    { echo "FAIL: $name is not $strategy on $ranks with $checkpointing checkpointing"; exit 1; }
  "$mpirun" -np "$ranks" --oversubscribe "$bin/dtplan-run" --plan "$work/$name.json" \
    --backend cpu --steps 2 --warmup 1 --scale "$scale" --dump "$work/$name" > /dev/null
  "$python" "$tools/torch_replay.py" "$work/$name"
}

replay gpt2 gpt2 fsdp-grad-op 2 2 128 0.05 selective
replay llama32 llama-3.2-1b ddp 1 2 32 0.05 none
replay llama2 llama-2-7b zero3 2 2 64 0.02 full

# The comparison can fail: nudge one final weight of the GPT-2 run by 0.01.
"$python" - "$work/gpt2/final.f32" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(4 * 1000)
    (w,) = struct.unpack("<f", f.read(4))
    f.seek(4 * 1000)
    f.write(struct.pack("<f", w + 0.01))
PY
if "$python" "$tools/torch_replay.py" "$work/gpt2" > "$work/nudged.txt"; then
  cat "$work/nudged.txt"; echo "FAIL: a disturbed weight went unnoticed"; exit 1
fi
grep -q "DISAGREE" "$work/nudged.txt"
echo "PASS"
