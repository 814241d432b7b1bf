#!/usr/bin/env bash
# Model-based autotuning against an exhaustive grid over the same candidates (issue 6, part 4):
# how many trials `dtplan autotune` needs to get within 3% of the best configuration the grid
# measures, next to the grid's count. Usage (after dtplan calibrate):
#   bench/autotune_vs_grid.sh PROFILE [dtplan autotune flags...]
# e.g. bench/autotune_vs_grid.sh profile.json --model gpt2 --global-batch 32 --seq-len 128 \
#        --np 2 --scale 0.05
set -euo pipefail
bin="$(cd "$(dirname "$0")/.." && pwd)/build/bin"
profile="$1"; shift
work="$(mktemp -d)"
echo "runs in $work" >&2
"$bin/dtplan" autotune --profile "$profile" "$@" --exhaustive --results "$work/grid.jsonl" \
  --work-dir "$work/grid" > "$work/grid.txt"
"$bin/dtplan" autotune --profile "$profile" "$@" --results "$work/tuned.jsonl" \
  --work-dir "$work/tuned" > "$work/tuned.txt"
python3 - "$work/grid.jsonl" "$work/tuned.jsonl" <<'PY'
import json, sys
def trials(path):
    return [json.loads(l) for l in open(path)][1:]
grid, tuned = trials(sys.argv[1]), trials(sys.argv[2])
ok = lambda t: "measured_step_s" in t
best = min(grid, key=lambda t: t["measured_step_s"] if ok(t) else 1e300)
target = best["measured_step_s"] * 1.03
within = next((i + 1 for i, t in enumerate(tuned) if ok(t) and t["measured_step_s"] <= target), None)
tuned_best = min((t for t in tuned if ok(t)), key=lambda t: t["measured_step_s"])
wall = lambda ts: sum(t["wall_s"] for t in ts)
print(f"grid: {len(grid)} trials ({wall(grid):.1f} s); best {best['key']} "
      f"{best['measured_step_s']*1e3:.2f} ms")
print(f"model-based: {len(tuned)} trials ({wall(tuned):.1f} s) before it stopped itself; "
      f"within 3% of the grid's best after trial {within}; its best {tuned_best['key']} "
      f"{tuned_best['measured_step_s']*1e3:.2f} ms "
      f"({(tuned_best['measured_step_s']/best['measured_step_s']-1)*100:+.1f}% vs the grid's)")
PY
