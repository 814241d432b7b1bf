#!/bin/bash
# The device call that produced this folder (run from the repository root by the device tool,
# on one lent H200; everything it keeps ends up in $OUT/h200-cuda.tgz, re-packed after every
# stage so that a call cut short still returns what finished).
#
# 1. dtplan's CUDA backend on a GPU for the first time since its attention, norm, rotary,
#    dropout and tensor-parallel kernels were written: test_runtime's [cuda] cases (each kernel
#    against the CPU device, NCCL collectives over one rank).
# 2. dtplan-run --measure-profile --backend cuda: the H200's measured profile.
# 3. dtplan-run on the plans in this folder (GPT-2 124M, 1.5B and Llama 3.2 1B, fp32, DDP on one
#    GPU), for dtplan validate on the build machine.
# 4. Three CUDA jobs dumped with --dump and replayed in PyTorch (tools/torch_replay.py, on the
#    device's CPU): the CUDA kernels' arithmetic against PyTorch's own modules, dropout masks
#    rebuilt with numpy.
# 5. tools/torch_profile.py under FSDP2 at world size 1 (and DDP): where FSDP2's host time goes
#    (issue 16), beside the bare-module cases of ../h200-torch-profile.
# 6. The same models bare and under FSDP2 in one process, four GPT-2 sizes and Llama 3.2 1B,
#    bf16 and fp32: FSDP2's added time per wrapped block from unprofiled phase times.
#
# dtplan-run and test_runtime (CUDA backend, sm_90) and Open MPI travel in .devcarry/
# (tools/devcarry.sh). Usage: run.sh [STAGE...]   (default: 1 2 3 4 5)
set -u
stages=" ${*:-1 2 3 4 5} "
want() { [[ "$stages" == *" $1 "* ]]; }
O=${OUT:?}
W=/tmp/w; rm -rf $W; mkdir -p $W
M=data/measurements/h200-cuda
c() { echo "--case"; echo "$1"; }
source .devcarry/env.sh
B=.devcarry/bin
pack() { tar -C $W -czf $O/h200-cuda.tgz . ; }
stage() { echo; echo "=== $1 $(date -u +%T)"; }
exec > >(tee $O/log.txt) 2>&1
echo "stages:$stages"
export NCCL_DEBUG=VERSION PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.memory,power.limit --format=csv
  python3 -c 'import torch, transformers, accelerate; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "transformers", transformers.__version__, "accelerate", accelerate.__version__)'
  nvcc --version | tail -2; uname -r; nproc; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; } > $W/env.txt 2>&1
cat $W/env.txt
nvidia-smi > $W/nvidia-smi.txt 2>&1

if want 1; then
stage "1 test_runtime [cuda]"
timeout 120 $B/test_runtime "[cuda]" --durations yes > $W/test-runtime-cuda.txt 2>&1
echo "exit $?" >> $W/test-runtime-cuda.txt; tail -25 $W/test-runtime-cuda.txt; pack
fi

if want 2; then
stage "2 measure-profile"
timeout 60 $B/dtplan-run --measure-profile --backend cuda --out $W/profile-cuda-h200.json \
  --data-dir data > $W/profile.txt 2>&1; echo "exit $?" >> $W/profile.txt; tail -5 $W/profile.txt; pack
fi

if want 3; then
stage "3 plans"
for p in gpt2-fp32-b8 gpt2-fp32-b8-full llama-3.2-1b-fp32-b4 gpt2-xl-fp32-b4; do
  echo "--- $p"
  timeout 90 $B/dtplan-run --plan $M/plan-$p.json --backend cuda --steps 3 --warmup 1 --scale 1 \
    --out $W/measured-$p.json --data-dir data > $W/run-$p.txt 2>&1
  echo "exit $?" >> $W/run-$p.txt; tail -8 $W/run-$p.txt; pack
done
fi

if want 4; then
stage "4 replays"
for rs in replay-gpt2:0.05 replay-llama32:0.05 replay-llama2:0.02; do
  r=${rs%:*}; echo "--- $r"
  timeout 60 $B/dtplan-run --plan $M/plan-$r.json --backend cuda --steps 2 --warmup 1 \
    --scale ${rs#*:} --dump $W/$r > $W/$r.txt 2>&1
  echo "dtplan-run exit $?" >> $W/$r.txt
  timeout 90 python3 tools/torch_replay.py $W/$r --json $W/$r.result.json >> $W/$r.txt 2>&1
  echo "torch_replay exit $?" >> $W/$r.txt
  rm -f $W/$r/*.f32 $W/$r/*.i32; tail -12 $W/$r.txt; pack
done
fi

if want 5; then
stage "5 torch_profile fsdp2"
mapfile -t cases < <(
  c model=gpt2,precision=bf16,micro_batch=8,strategy=fsdp2,trace=1
  c model=gpt2,precision=bf16,micro_batch=8,strategy=ddp
  c model=gpt2,precision=fp32,micro_batch=8,strategy=fsdp2
  c model=llama-3.2-1b,precision=bf16,micro_batch=4,strategy=fsdp2
  c model=gpt2-xl,precision=bf16,micro_batch=4,strategy=fsdp2
)
timeout 180 python3 tools/torch_profile.py --out $W/profile "${cases[@]}" > $W/torch-profile.txt 2>&1
echo "exit $?" >> $W/torch-profile.txt; tail -20 $W/torch-profile.txt; pack
fi

if want 6; then
stage "6 bare and fsdp2"
mapfile -t cases < <(
  for m in gpt2:8 gpt2-medium:8 gpt2-large:4 gpt2-xl:4 llama-3.2-1b:4; do
    for s in none fsdp2; do c model=${m%:*},precision=bf16,micro_batch=${m#*:},strategy=$s; done
  done
  c model=gpt2,precision=fp32,micro_batch=8,strategy=none
  c model=gpt2-medium,precision=fp32,micro_batch=8,strategy=none
  c model=gpt2-medium,precision=fp32,micro_batch=8,strategy=fsdp2
  c model=gpt2,precision=bf16,micro_batch=32,strategy=fsdp2
  c model=gpt2,precision=bf16,micro_batch=8,strategy=fsdp2,checkpointing=1
)
timeout 240 python3 tools/torch_profile.py --out $W/bare-fsdp2 "${cases[@]}" > $W/bare-fsdp2.txt 2>&1
echo "exit $?" >> $W/bare-fsdp2.txt; grep -v Warning $W/bare-fsdp2.txt | tail -20; pack
fi
stage done
