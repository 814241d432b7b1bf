#!/usr/bin/env bash
# Stopping dtplan autotune and calibrate the way users do (issue 14, items 6 and 7), on the
# CPU backend with 2 ranks and the bundled profile:
#  - Ctrl-C: a terminal sends SIGINT to the whole foreground process group (the tuner, mpirun,
#    the ranks). The tuner must exit 130 at once, leave no process behind, keep the finished
#    trials (complete lines, none of them a failure logged for the interrupted one), and a
#    later --resume must accept them.
#  - SIGTERM to the tuner alone (a process manager): it must stop its mpirun too, and exit 143;
#    SIGHUP (a lost terminal) the same, exit 129.
#  - A second tuner on a results file that another process holds is refused with its pid.
#  - dtplan calibrate on Ctrl-C: exit 130, no profile written.
set -euo pipefail
bin="$1"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cd "$work"
tune=(--model gpt2 --global-batch 8 --seq-len 64 --np 2 --scale 0.05 --results trials.jsonl
      --steps 40 --exhaustive --work-dir "$work/at")

trial_lines() { if [ -f trials.jsonl ]; then echo $(($(wc -l < trials.jsonl) - 1)); else echo 0; fi; }
# Polls (at most 90 s) until the command in "$@" succeeds.
poll() { for _ in $(seq 900); do if "$@"; then return 0; fi; sleep 0.1; done; echo "timed out: $*"; exit 1; }
at_least_one_trial() { [ "$(trial_lines)" -ge 1 ]; }
runs_a_rank() { pgrep -f "dtplan-run .*$work/$1" > /dev/null; }
# No process of process group $1 and none running in work folder $2, 2 s after `since`.
nothing_left() {
  local rest; rest=$(python3 -c "import time; print(max(0.0, $since + 2 - time.time()))")
  sleep "$rest"
  if pgrep -g "$1" -a || pgrep -f -a "dtplan-run .*$work/$2"; then echo "processes left after 2 s"; exit 1; fi
}
now() { python3 -c "import time; print(time.time())"; }

# 1. Ctrl-C in a terminal: the tuner in its own process group (set -m), SIGINT to the group.
set -m
"$bin/dtplan" autotune "${tune[@]}" > first.txt 2> first.err &
pid=$!
set +m
poll at_least_one_trial
poll runs_a_rank at   # the next trial is running
since=$(now)
kill -INT -- "-$pid"
status=0; wait "$pid" || status=$?
took=$(python3 -c "import time; print(round(time.time() - $since, 2))")
test "$status" -eq 130 || { echo "Ctrl-C: exit $status, expected 130"; cat first.err; exit 1; }
python3 -c "import sys; sys.exit(0 if $took < 2 else 1)" || { echo "Ctrl-C took $took s"; exit 1; }
nothing_left "$pid" at
kept=$(trial_lines)
grep -q "stopped; $kept finished trials are kept in trials.jsonl (continue with --resume)" first.err
python3 - <<'PY'
import json
lines = open("trials.jsonl").read().split("\n")
assert lines[-1] == "", "the last line is complete"
trials = [json.loads(l) for l in lines[1:-1]]
assert trials and all("measured_step_s" in t for t in trials), trials  # no failure logged
PY
# The finished trials resume (--max-trials: nothing more to run).
"$bin/dtplan" autotune "${tune[@]}" --resume --max-trials "$kept" > resumed.txt
grep -q "($kept trials resumed)" resumed.txt

# 2. A signal to the tuner alone: SIGTERM (a process manager) exits 143, SIGHUP (the terminal or
#    ssh session gone) 129; either way its mpirun and ranks stop and the trials are kept.
signal_alone() {
  local sig="$1" expected="$2"
  set -m
  "$bin/dtplan" autotune "${tune[@]}" --resume > "$sig.txt" 2> "$sig.err" &
  pid=$!
  set +m
  poll runs_a_rank at
  since=$(now)
  kill "-$sig" "$pid"
  status=0; wait "$pid" || status=$?
  test "$status" -eq "$expected" || { echo "SIG$sig: exit $status, expected $expected"; cat "$sig.err"; exit 1; }
  nothing_left "$pid" at
  test "$(trial_lines)" -ge "$kept"
}
signal_alone TERM 143
signal_alone HUP 129

# 3. A results file held by another process (a POSIX lock, as a running tuner holds it).
python3 - <<'PY' &
import fcntl, os, time
f = open("trials.jsonl", "a")
fcntl.lockf(f, fcntl.LOCK_EX)
open("locked", "w").close()
while not os.path.exists("release"):
    time.sleep(0.05)
PY
holder=$!
poll test -e locked
if "$bin/dtplan" autotune "${tune[@]}" --resume > /dev/null 2> locked.err; then
  echo "a second tuner on a file in use must be refused"; exit 1
fi
touch release; wait "$holder"
grep -q "trials.jsonl: in use by process $holder" locked.err

# 4. Ctrl-C during dtplan calibrate's training steps (after its microbenchmarks).
set -m
"$bin/dtplan" calibrate --np 2 --quick --out profile.json --work-dir "$work/cal" > cal.txt 2> cal.err &
pid=$!
set +m
poll test -e "$work/cal/microbenchmarks.json"
since=$(now)
kill -INT -- "-$pid"
status=0; wait "$pid" || status=$?
test "$status" -eq 130 || { echo "calibrate Ctrl-C: exit $status, expected 130"; cat cal.err; exit 1; }
nothing_left "$pid" cal
test ! -e profile.json
echo "interrupted autotune and calibrate: ok"
