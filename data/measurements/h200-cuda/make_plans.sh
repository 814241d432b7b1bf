#!/bin/bash
# The plans run.sh executes, written by dtplan itself on the build machine (no GPU needed).
# Usage: make_plans.sh BIN_DIR     (from the repository root)
set -euo pipefail
bin=${1:?bin directory}
M=data/measurements/h200-cuda
h200() {  # name model micro checkpointing
  "$bin/dtplan" plan --model "$2" --gpu H200 --topology dgx-h100 --gpus 1 --global-batch "$3" \
    --micro-batch "$3" --seq-len 1024 --exact-batch --strategy ddp --precision fp32 \
    --checkpointing "$4" --save-plan "$M/plan-$1.json" > /dev/null
}
replay() {  # name model strategy micro seq checkpointing [gpu] (global batch 8 on one GPU)
  "$bin/dtplan" plan --model "$2" --topology pcie-1switch-4 --gpu "${7:-A100-80GB}" --gpus 1 \
    --global-batch 8 --micro-batch "$4" --seq-len "$5" --strategy "$3" --checkpointing "$6" \
    --precision fp32 --optimizer adamw --offload none --exact-batch \
    --save-plan "$M/plan-$1.json" > /dev/null
}
h200 gpt2-fp32-b8 gpt2 8 none
h200 gpt2-fp32-b8-full gpt2 8 full
h200 llama-3.2-1b-fp32-b4 llama-3.2-1b 4 none
h200 gpt2-xl-fp32-b4 gpt2-xl 4 none
replay replay-gpt2 gpt2 ddp 2 128 selective
replay replay-llama32 llama-3.2-1b ddp 2 32 none
# Llama 2 7B's states (16 B a parameter) fit only an H200's 141 GB without offload.
replay replay-llama2 llama-2-7b zero3 2 64 full H200
