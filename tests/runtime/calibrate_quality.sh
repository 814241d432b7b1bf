#!/usr/bin/env bash
# dtplan calibrate judges its own noise (issue 14, item 17): the profile gets a `quality`
# section, and a noisy calibration does not replace a good profile unless --force. Noise is
# forced with --max-spread 0 (any spread of repeated calls is then too much).
set -euo pipefail
bin="$1"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cd "$work"
cal=(--np 2 --quick --no-steps)
"$bin/dtplan" calibrate "${cal[@]}" --out good.json --work-dir c1 > c1.txt 2> c1.err
grep -q "^noise: repeats vary" c1.txt
# Whatever this machine's noise, make it a good profile by hand.
python3 - <<'PY'
import json
p = json.load(open("good.json"))
q = p["quality"]
assert q["benchmarks"] > 10 and q["cores"] >= 1 and q["median_spread"] >= 0, q
assert q["max_spread"] >= q["median_spread"] and q["load_before"] >= 0, q
q["noisy"], q["reasons"] = False, []
json.dump(p, open("good.json", "w"), indent=2)
PY
cp good.json before.json
if "$bin/dtplan" calibrate "${cal[@]}" --max-spread 0 --out good.json --work-dir c2 \
    > c2.txt 2> c2.err; then
  echo "a noisy profile must not replace a good one"; exit 1
fi
grep -q "warning: repeated calls of one microbenchmark differ by" c2.err
grep -q "warning: the profile is marked noisy" c2.err
grep -q -- "--out: good.json: not replaced: it holds a profile not marked noisy (created .*GEMM fit error" c2.err
grep -q "Pass --force to replace it" c2.err
cmp -s good.json before.json
# --force replaces it, marked noisy; a noisy profile is then replaced without --force.
"$bin/dtplan" calibrate "${cal[@]}" --max-spread 0 --force --out good.json --work-dir c3 > /dev/null 2>&1
python3 -c 'import json; q = json.load(open("good.json"))["quality"]; assert q["noisy"] and q["reasons"], q'
"$bin/dtplan" calibrate "${cal[@]}" --max-spread 0 --out good.json --work-dir c4 > /dev/null 2>&1
echo "calibrate quality: ok"
