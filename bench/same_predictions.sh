#!/bin/bash
# Issue 18: a speed change must change no prediction. Prints, for each plan below, the md5 of
# `dtplan plan --json --all-rejected` from each of two binaries with the timing fields removed;
# the two sums of each plan must be equal.  bench/same_predictions.sh OLD/dtplan build/bin/dtplan
set -o pipefail
A=$1; B=$2; status=0
run() { "$1" plan "${@:2}" --json --all-rejected | python3 -c "
import json,sys
d=json.load(sys.stdin)
for k in ('elapsed_s','search_s','search_configs_per_s','overall_configs_per_s'): d['stats'].pop(k,None)
d['layout_search'].pop('elapsed_s',None)
d.pop('rejected_summary',None)
print(json.dumps(d,sort_keys=True))" | md5sum; }
for args in "--model llama-2-70b --topology dgx-h100 --nodes 16 --gpu H100-SXM --global-batch 1024 --seq-len 4096" \
            "--model deepseek-v3 --topology dgx-h100 --nodes 32 --gpu H100-SXM --global-batch 1024 --seq-len 4096" \
            "--model gpt2-xl --topology pcie-split-8 --gpu A100-80GB --global-batch 64 --host-memory 64GiB" \
            "--model mixtral-8x7b --topology dgx-a100 --nodes 4 --gpu A100-80GB --global-batch 256 --seq-len 4096"; do
  a=$(run "$A" $args); b=$(run "$B" $args)
  if [ "$a" = "$b" ]; then echo "same      $args"; else echo "DIFFERENT $args"; status=1; fi
done
exit $status
