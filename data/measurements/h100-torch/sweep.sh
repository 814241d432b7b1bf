#!/usr/bin/env bash
# The device session that produced this folder: PyTorch ground truth for dtplan's memory and
# step-time model (tools/torch_reference.py), one process per run, and kernel efficiencies
# (tools/kernel_bench.py). Usage: sweep.sh OUTDIR GROUP, GROUP one of smoke, kernels, small, large, rest.
set -u
out=$1 group=$2
ref() {  # model micro-batch [extra flags...]
  local model=$1 mb=$2; shift 2
  echo "== $model mb=$mb $*" >>"$out/log.txt"
  timeout 300 python3 tools/torch_reference.py --model "data/models/$model.json" --micro-batch "$mb" \
    --seq-len 1024 --warmup 2 --steps 5 --out "$out/torch-ref.jsonl" "$@" >>"$out/log.txt" 2>&1
}
grid() {  # model micro-batch: DDP and FSDP2, fp32 and bf16, with and without checkpointing
  for s in ddp fsdp2; do for p in fp32 bf16; do
    ref "$1" "$2" --strategy $s --precision $p
    ref "$1" "$2" --strategy $s --precision $p --checkpointing
  done; done
}
case $group in
  kernels) python3 tools/kernel_bench.py --out "$out/kernels.jsonl" >>"$out/log.txt" 2>&1 ;;
  small) grid gpt2 8; grid llama-3.2-1b 4; grid gpt2-medium 8
    ref gpt2 8 --strategy none --precision fp32; ref gpt2 8 --strategy ddp --precision bf16 --accum 4
    ref gpt2 8 --strategy ddp --precision fp32 --optimizer fused
    ref gpt2 8 --strategy ddp --precision fp32 --optimizer for-loop
    ref gpt2 16 --strategy ddp --precision bf16; ref gpt2 4 --strategy ddp --precision bf16 ;;
  large) grid gpt2-large 4; grid gpt2-xl 4 ;;
  rest)  # the second device call: what the first call's 590 s did not reach
    grid gpt2-large 4; grid gpt2-xl 4
    ref gpt2-medium 8 --strategy fsdp2 --precision fp32 --checkpointing
    ref gpt2-medium 8 --strategy fsdp2 --precision bf16
    ref gpt2-medium 8 --strategy fsdp2 --precision bf16 --checkpointing
    ref gpt2 8 --strategy none --precision fp32; ref gpt2 8 --strategy ddp --precision bf16 --accum 4
    ref gpt2 8 --strategy ddp --precision fp32 --optimizer fused
    ref gpt2 8 --strategy ddp --precision fp32 --optimizer for-loop
    ref gpt2 16 --strategy ddp --precision bf16; ref gpt2 4 --strategy ddp --precision bf16 ;;
  smoke) ref gpt2 2 --strategy ddp --precision bf16 --steps 1 --warmup 1 &&
    ref gpt2 2 --strategy fsdp2 --precision bf16 --checkpointing --steps 1 --warmup 1 ;;
  *) echo "sweep.sh: GROUP: expected smoke, kernels, small, large or rest, got $group" >&2; exit 2 ;;
esac
