#!/usr/bin/env python3
"""Whole-process timing of dtplan commands (issue 18): runs each case under each binary,
alternating binaries run by run, and prints the median wall time and peak RSS per binary and
the ratio to the first binary. Timing lives here, never in unit tests.

    bench/whole_process.py [--runs N] [--case NAME] BINARY [BINARY ...]

BINARY is a dtplan executable (e.g. build/bin/dtplan and a saved copy of an older build).
Run it from the repository root (the 1T cases read bench/gpt-1t-ptdp.json)."""
import argparse
import statistics
import subprocess
import sys
import time

CASES = {
    "version": ["--version"],
    "plan-70b-128xdgx-h100": ["plan", "--model", "llama-2-70b", "--topology", "dgx-h100",
                              "--nodes", "128", "--gpu", "H100-SXM", "--global-batch", "1024",
                              "--seq-len", "4096"],
    "plan-70b-128xdgx-h100-json": ["plan", "--model", "llama-2-70b", "--topology", "dgx-h100",
                                   "--nodes", "128", "--gpu", "H100-SXM", "--global-batch",
                                   "1024", "--seq-len", "4096", "--json"],
    # Narayanan et al. 2021's 1T GPT (bench/gpt-1t-ptdp.json, from data/published), as issue 18
    # times it on 384 and 2,048 DGX A100 nodes.
    "plan-1t-384xdgx-a100": ["plan", "--model", "bench/gpt-1t-ptdp.json", "--topology",
                             "dgx-a100", "--nodes", "384", "--gpu", "A100-80GB",
                             "--global-batch", "3072", "--seq-len", "2048"],
    "plan-1t-2048xdgx-a100": ["plan", "--model", "bench/gpt-1t-ptdp.json", "--topology",
                              "dgx-a100", "--nodes", "2048", "--gpu", "A100-80GB",
                              "--global-batch", "3072", "--seq-len", "2048"],
    # One GB200 NVL72 rack's 72-GPU NVLink domain and 20 racks: the ring search's greedy orders.
    "comm-nvl72-20-racks": ["comm", "--topology", "gb200-nvl72", "--nodes", "20",
                            "--collective", "allreduce", "--size", "512MiB"],
    # Every row of data/published predicted (what the accuracy report and its tests cost).
    "accuracy-published": ["accuracy", "--published", "--json"],
}


def one_run(binary, args):
    """Wall seconds of one child process."""
    start = time.perf_counter()
    proc = subprocess.run([binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{binary} {' '.join(args)}: exit {proc.returncode}: {proc.stderr.decode()}")
    return wall


def peak_rss_mib(binary, args):
    out = subprocess.run(["/usr/bin/time", "-f", "%M", binary, *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    return int(out.stderr.strip().splitlines()[-1]) / 1024.0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--case", action="append", choices=sorted(CASES))
    p.add_argument("binaries", nargs="+")
    a = p.parse_args()
    for name in a.case or CASES:
        args = CASES[name]
        walls = {b: [] for b in a.binaries}
        for _ in range(a.runs):
            for b in a.binaries:
                walls[b].append(one_run(b, args))
        base = statistics.median(walls[a.binaries[0]])
        for b in a.binaries:
            med = statistics.median(walls[b])
            print(f"{name:28} {b:32} median {med * 1e3:9.1f} ms  x{med / base:5.2f}  "
                  f"peak RSS {peak_rss_mib(b, args):7.1f} MiB  ({a.runs} runs)")


if __name__ == "__main__":
    main()
