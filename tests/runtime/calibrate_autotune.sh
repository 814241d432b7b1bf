#!/usr/bin/env bash
# README walk-through of calibration and autotuning on the CPU backend (2 ranks):
# dtplan calibrate (quick microbenchmarks + calibration steps), dtplan accuracy (two held-out
# configurations), dtplan autotune (2 trials, then --resume to 3 without redoing any; then
# recomputation searched), and the errors a user meets: an existing results file, a resume of a
# different job, a bad backend or checkpointing.
set -euo pipefail
bin="$1"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cd "$work"
"$bin/dtplan" calibrate --np 2 --quick --out profile.json --work-dir cal > calibrate.txt
grep -q "step correction from 3 training steps" calibrate.txt
python3 - <<'PY'
import json
p = json.load(open("profile.json"))
assert p["schema_version"] == 2 and p["backend"] == "cpu"
assert {c["kind"] for c in p["collectives"]} == {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "send_recv"}
assert all(c["ranks"] == 2 for c in p["collectives"])
assert len(p["residuals"]["steps"]) == 3 and len(p["residuals"]["gemm"]) > 0
k = p["step_correction"]
assert k["samples"] == 3 and 0.2 < k["compute_scale"] < 5, k
PY
"$bin/dtplan" accuracy --profile profile.json --np 2 --limit 2 --json --work-dir acc > accuracy.json
python3 - <<'PY'
import json
a = json.load(open("accuracy.json"))
assert len(a["rows"]) == 2
errs = sorted(abs(r["error"]) for r in a["rows"])
assert abs(a["median_abs_error"] - sum(errs) / 2) < 1e-12 and a["max_abs_error"] == errs[-1]
assert all(r["measured_step_s"] > 0 and r["predicted_step_s"] > 0 for r in a["rows"])
PY
tune=(--model gpt2 --global-batch 8 --seq-len 64 --np 2 --scale 0.05 --profile profile.json
      --results trials.jsonl --steps 2 --exhaustive --work-dir at)
"$bin/dtplan" autotune "${tune[@]}" --max-trials 2 > first.txt
test "$(wc -l < trials.jsonl)" -eq 3   # header + 2 trials
if "$bin/dtplan" autotune "${tune[@]}" --max-trials 3 > /dev/null 2> exists.txt; then
  echo "an existing results file must not be overwritten"; exit 1
fi
grep -q "exists: pass --resume" exists.txt
"$bin/dtplan" autotune "${tune[@]}" --max-trials 3 --resume --export-deepspeed ds.json \
  --export-launch > second.txt
grep -q "(2 trials resumed)" second.txt
grep -q "^best (measured): " second.txt
python3 - <<'PY'
import json
lines = [json.loads(l) for l in open("trials.jsonl")]
assert lines[0]["type"] == "autotune" and len(lines) == 4
keys = [l["key"] for l in lines[1:]]
assert len(set(keys)) == 3, keys   # the resumed run did not redo a trial
PY
other=(--model gpt2 --global-batch 8 --seq-len 64 --np 4 --scale 0.05 --profile profile.json
       --results trials.jsonl --steps 2 --exhaustive --work-dir at)
if "$bin/dtplan" autotune "${other[@]}" --resume > /dev/null 2> other.txt; then
  echo "resuming a different job must fail"; exit 1
fi
grep -q 'tuned a different job' other.txt
if "$bin/dtplan" calibrate --backend tpu --out x.json 2> bad.txt; then exit 1; fi
grep -q -- "--backend: tpu: expected cpu or cuda" bad.txt
# Without --seq-len the model's maximum (GPT-2: 1,024 positions) is what the trials run and the
# results record; it used to be passed on as 0 and every trial's plan was refused.
"$bin/dtplan" autotune --model gpt2 --global-batch 4 --np 2 --scale 0.05 --profile profile.json \
  --results default_seq.jsonl --steps 1 --warmup 0 --max-trials 1 --work-dir at2 > default_seq.txt
python3 - <<'PY'
import json
lines = [json.loads(l) for l in open("default_seq.jsonl")]
assert lines[0]["seq_len"] == 1024, lines[0]
assert len(lines) == 2 and "failure" not in lines[1] and lines[1]["measured_step_s"] > 0, lines[1]
PY
# Recomputation searched on request: one strategy and micro-batch under none, selective and
# full are three distinct executions, each run with the recomputation its key names (the
# measurement's workload says what it reran), and the header records the search.
"$bin/dtplan" autotune --model gpt2 --global-batch 4 --seq-len 64 --np 2 --scale 0.05 \
  --profile profile.json --results recompute.jsonl --steps 1 --warmup 0 --exhaustive \
  --strategy zero2 --micro-batch 2 --checkpointing none,selective,full --work-dir at3 \
  > recompute.txt
grep -q "recomputation none, selective, full" recompute.txt
python3 - <<'PY'
import glob, json
lines = [json.loads(l) for l in open("recompute.jsonl")]
assert lines[0]["checkpointing"] == ["none", "selective", "full"], lines[0]
keys = sorted(l["key"] for l in lines[1:])
assert keys == ["zero2 mb 2 x 1", "zero2 mb 2 x 1 full recompute",
                "zero2 mb 2 x 1 selective recompute"], keys
ran = set()
for l in lines[1:]:
    assert "failure" not in l and l["measured_step_s"] > 0, l
    ran.add(json.load(open(l["measurement"]))["workload"]["recompute"])
assert ran == {"none", "selective", "full"}, ran
PY
if "$bin/dtplan" autotune --model gpt2 --global-batch 4 --np 2 --checkpointing some \
     --results x.jsonl 2> bad_ckpt.txt; then exit 1; fi
grep -q -- "--checkpointing" bad_ckpt.txt
# Four ranks: collectives are swept for communicator sizes 2 and 4.
mpirun -np 4 --oversubscribe "$bin/dtplan-run" --measure-profile --quick --out p4.json > /dev/null 2>&1
python3 - <<'PY'
import json
p = json.load(open("p4.json"))
sizes = {(c["kind"], c["ranks"]) for c in p["collectives"]}
kinds = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "send_recv"}
assert sizes == {(k, n) for k in kinds for n in (2, 4)}, sizes
PY
echo "calibrate -> accuracy -> autotune -> resume: ok"
