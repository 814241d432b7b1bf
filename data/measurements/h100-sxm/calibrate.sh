#!/bin/bash
# Calibration, accuracy and autotuning on the lent H100 (run from the repository root by the
# device tool; writes into $OUT). The device image has CUDA and NCCL but none of our Debian
# packages: dtplan and dtplan-run (built with -DDTPLAN_WITH_CUDA=ON, CMAKE_CUDA_ARCHITECTURES
# 90) and Open MPI 4.1.4's libraries travel in the git-ignored .devcarry/ folder; one rank runs
# as an MPI singleton, so no mpirun is needed. Usage: calibrate.sh calibrate|autotune
set -u
O=${OUT:?}
stage=${1:?calibrate or autotune}
EXTRA=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d $d ] && EXTRA="$EXTRA:$d"; done
for n in libnccl.so.2 libcublas.so.13 libcudart.so.13; do
  ok=0; for d in ${EXTRA//:/ }; do [ -e $d/$n ] && ok=1; done
  if [ $ok = 0 ]; then f=$(find /opt /usr -name "$n" 2>/dev/null | head -1); [ -n "$f" ] && EXTRA="$EXTRA:$(dirname $f)"; fi
done
export EXTRA_LD=${EXTRA#:}
source .devcarry/env.sh
B=.devcarry/bin
exec > >(tee $O/$stage.log) 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
if [ "$stage" = calibrate ]; then
  # The runtime's CUDA tests (cuBLAS and kernels against the CPU device, the caching allocator)
  $B/test_runtime 2>&1 | tail -3
  time $B/dtplan calibrate --backend cuda --np 1 --out $O/profile-cuda-1rank.json \
    --work-dir $O/calibrate --data-dir data > $O/calibrate.txt
  cat $O/calibrate.txt
  time $B/dtplan accuracy --profile $O/profile-cuda-1rank.json --np 1 --work-dir $O/accuracy \
    --data-dir data > $O/accuracy.txt
  cat $O/accuracy.txt
  $B/dtplan accuracy --profile $O/profile-cuda-1rank.json --np 1 --json --work-dir $O/accuracy2 \
    --data-dir data > $O/accuracy.json
  rm -rf $O/accuracy2
else
  P=${PROFILE:-data/measurements/h100-sxm/profile-cuda-1rank.json}
  A="--model gpt2 --global-batch 32 --seq-len 1024 --np 1 --backend cuda --scale 1 --profile $P --data-dir data"
  time $B/dtplan autotune $A --results $O/autotune.jsonl --work-dir $O/autotune \
    --export-deepspeed $O/ds_config.json --export-launch > $O/autotune.txt
  cat $O/autotune.txt
  time $B/dtplan autotune $A --exhaustive --results $O/autotune-grid.jsonl \
    --work-dir $O/autotune-grid > $O/autotune-grid.txt
  cat $O/autotune-grid.txt
fi
# Keep the measurement files, drop the plans (they are in each measurement).
find $O -name '*.plan.json' -delete
date -u
