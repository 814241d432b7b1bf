#!/usr/bin/env bash
# The device call that produced this folder: where one eager PyTorch training step spends its
# time, kernel by kernel (tools/torch_profile.py), on the GPU the device tool lent.
# Usage: sweep.sh OUTDIR GROUP, GROUP profile (the first call: one Python process runs every case
# in order and appends each as it ends) or kernels (the second call: a Linear's three products with
# and without 8-element alignment, and PyTorch's element-wise kernels' bandwidth).
set -u
out=$1 group=${2:-profile}
mkdir -p "$out"
if [ "$group" = kernels ]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory --format=csv >"$out/env-kernels.txt"
  python3 tools/kernel_bench.py --only linear --out "$out/kernels.jsonl" 2>&1 | tee "$out/log-kernels.txt"
  [ "${SWEEP_LINEAR_ONLY:-0}" = 1 ] && exit 0
  python3 tools/kernel_bench.py --only elementwise --out "$out/kernels.jsonl" 2>&1 | tee -a "$out/log-kernels.txt"
  exit 0
fi
{ python3 -c 'import torch, transformers, accelerate; print(torch.__version__, torch.version.cuda, transformers.__version__, accelerate.__version__)'
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory,power.limit,memory.total --format=csv
  uname -a; nproc; } >"$out/env.txt" 2>&1
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
c() { echo "--case"; echo "$1"; }
mapfile -t cases < <(
  c model=gpt2,precision=bf16,micro_batch=8,trace=1
  c model=gpt2,precision=fp32,micro_batch=8
  c model=gpt2,precision=bf16,micro_batch=8,dropout=off
  c model=llama-3.2-1b,precision=bf16,micro_batch=4
  c model=llama-3.2-1b,precision=fp32,micro_batch=4
  c model=gpt2-xl,precision=bf16,micro_batch=4
  c model=gpt2-xl,precision=fp32,micro_batch=4
  c model=qwen3-30b-a3b,precision=bf16,micro_batch=4,layers=2
  c model=qwen3-30b-a3b,precision=bf16,micro_batch=4,layers=4
  c model=llama-3.1-8b,precision=bf16,micro_batch=2,layers=8
  c model=gpt2,precision=bf16,micro_batch=8,checkpointing=1
  c model=gpt2,precision=bf16,micro_batch=32
  c model=llama-3.2-1b,precision=bf16,micro_batch=4,optimizer=fused
  c model=mixtral-8x7b,precision=bf16,micro_batch=2,layers=2
)
PYTHONUNBUFFERED=1 timeout "${SWEEP_LIMIT_S:-420}" python3 tools/torch_profile.py --out "$out" --host-overhead \
  "${cases[@]}" 2>&1 | tee "$out/log.txt"
