#!/usr/bin/env python3
"""FSDP2's host time in an eager step, from bare-module and FSDP2 runs of the same models.

Reads tools/torch_profile.py summaries (profile.jsonl) and, for every FSDP2 case whose phase
the host set the pace of (GPU busy time under 70% of the synchronised phase time; at 83-84%,
GPT-2 at micro-batch 32 forward and Llama 3.2 1B's optimizer step are the GPU's), the part of
the phase that the modules' own launches do not explain, with the per-launch host costs
dtplan uses (data/compute.json):

  forward:   (wall - launches x eager_forward_host_s_per_kernel) / wrapped modules
  backward:  (wall - launches x autograd_backward_host_s_per_kernel) / wrapped modules
  optimizer: wall / parameter tensors (torch.optim's foreach AdamW on DTensors)

The launches and the parameter tensors are dtplan's own for the case (`dtplan estimate --json`:
compute_per_micro_step.eager_launches, parameter_tensors), so the constants hold what dtplan
prices nothing else for: FSDP's hooks, with the copy and collective kernels they launch. The
wrapped modules are the blocks and the root (tools/torch_reference.py wraps them so). Cases
with recomputation are left out (their backward reruns the forward). Prints every case's
figure and the median of each, the values data/compute.json takes.

Usage: tools/fit_fsdp_host.py [--dtplan build/bin/dtplan] \
           data/measurements/h200-cuda/call2/bare-fsdp2/profile.jsonl ...
"""
import argparse
import json
import statistics
import subprocess
import sys

HOST_BOUND_BUSY_SHARE = 0.7
FORWARD_HOST_S_PER_KERNEL = 59e-6    # data/compute.json eager_forward_host_s_per_kernel
BACKWARD_HOST_S_PER_KERNEL = 18e-6   # data/compute.json autograd_backward_host_s_per_kernel


def inventory(dtplan, c):
    """dtplan's eager launches (forward, backward) and parameter tensors for the case, as it
    prices it: FSDP (full shard) on one H200 with eager layer kernels."""
    precision = "bf16" if c["precision"] == "bf16" else "fp32"
    out = subprocess.run(
        [dtplan, "estimate", "--model", c["model"], "--gpu", "H200", "--topology", "dgx-h100",
         "--gpus", "1", "--strategy", "fsdp-full", "--precision", precision,
         "--layer-kernels", "eager", "--micro-batch", str(c["micro_batch"]),
         "--global-batch", str(c["micro_batch"]), "--seq-len", str(c["seq_len"]), "--json"],
        check=True, capture_output=True, text=True).stdout
    k = json.loads(out)["compute_per_micro_step"]
    return k["eager_launches"]["forward"], k["eager_launches"]["backward"], k["parameter_tensors"]


def cases(paths):
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                c = r["case"]
                if c["strategy"] == "fsdp2" and not c["checkpointing"] and r.get("layers"):
                    yield path, r


def host_bound(r, phase):
    p = r["profile"][phase]
    return p["busy_us"] / 1e3 < HOST_BOUND_BUSY_SHARE * r["phase_ms_median"][phase]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtplan", default="build/bin/dtplan")
    ap.add_argument("profiles", nargs="+")
    args = ap.parse_args(argv)
    per = {"forward": [], "backward": [], "optimizer": []}
    for path, r in cases(args.profiles):
        c, units = r["case"], r["layers"] + 1
        forward, backward, tensors = inventory(args.dtplan, c)
        launches = {"forward": forward, "backward": backward}
        wall = r["phase_ms_median"]
        fig = {}
        if host_bound(r, "forward"):
            fig["forward"] = (wall["forward"] - launches["forward"] * FORWARD_HOST_S_PER_KERNEL * 1e3) / units
        if host_bound(r, "backward"):
            fig["backward"] = (wall["backward"] - launches["backward"] * BACKWARD_HOST_S_PER_KERNEL * 1e3) / units
        if host_bound(r, "optimizer"):
            fig["optimizer"] = wall["optimizer"] / tensors * 1e3  # us
        for k, v in fig.items():
            per[k].append(v)
        shown = ", ".join(f"{k} {v:.2f} {'us' if k == 'optimizer' else 'ms'}" for k, v in fig.items())
        print(f"{path}: {c['model']} {c['precision']} mb {c['micro_batch']}: {shown or 'GPU-bound'}")
    for k, v in per.items():
        if v:
            unit = "us a tensor" if k == "optimizer" else "ms a module"
            print(f"{k}: median {statistics.median(v):.2f} {unit} over {len(v)} phases "
                  f"(range {min(v):.2f}-{max(v):.2f})")


if __name__ == "__main__":
    main(sys.argv[1:])
