#!/usr/bin/env python3
"""Fit the fused-attention curves of data/compute.json ("attention_kernels") to kernel
benchmark rows.

Each curve is efficiency(s) = plateau * s / (s + half_tokens), for one kernel, GPU architecture
and head dimension (docs/step-time-model.md). Written as time per FLOP,
1/efficiency = (1/plateau) + (half_tokens/plateau) / s, it is linear in 1/s; the fit minimises
the relative error of the predicted time (weights efficiency^2), so long and short sequences
count alike.

Input: JSON lines of {"kind": "attention", "head_dim", "seq", "causal", "fwd_bwd_tflops"} (and
"fwd_tflops" where the forward was timed alone: a forward curve is fitted alike) with
the kernel as "backend" (flash, cudnn: tools/kernel_bench.py's rows) or "kernel" (dtplan's name:
data/kernels/), FLOPs counted as 3.5 x the causal forward's; the GPU's dense 16-bit peak.
--gpu keeps the rows of one GPU where a file holds several. Kernels dtplan does not model are
skipped and named. Prints the curve entries, and each curve's worst point on stderr.

  tools/fit_attention_curves.py data/measurements/h100-torch/kernels.jsonl \
      --peak-tflops 989.5 --architecture hopper
  tools/fit_attention_curves.py data/kernels/flash-attention-2-paper.jsonl --gpu A100-80GB \
      --peak-tflops 312 --architecture ampere
"""
import argparse
import collections
import json
import sys

BACKENDS = {"flash": "flash-attn-2", "cudnn": "cudnn"}  # PyTorch SDPA back ends
KERNELS = {"flash-attn-1", "flash-attn-2", "flash-attn-triton", "cudnn"}  # dtplan's names


def fit(points):
    """points: [(seq, efficiency)] -> (plateau, half_tokens, worst relative error of time)."""
    s11 = sum(e * e for _, e in points)
    s12 = sum(e * e / s for s, e in points)
    s22 = sum(e * e / s / s for s, e in points)
    t1 = sum(e for _, e in points)
    t2 = sum(e / s for s, e in points)
    det = s11 * s22 - s12 * s12
    a = (t1 * s22 - t2 * s12) / det
    b = (s11 * t2 - s12 * t1) / det
    # Rounded as committed; the worst error is that of the rounded curve.
    plateau, half = round(1.0 / a, 3), round(b / a)
    worst = max(abs(e / (plateau * s / (s + half)) - 1.0) for s, e in points)
    return plateau, half, worst


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("rows", help="kernel benchmark JSON lines")
    p.add_argument("--peak-tflops", type=float, required=True, help="dense bf16 peak")
    p.add_argument("--architecture", required=True, help="as data/gpus.json names it")
    p.add_argument("--gpu", help="only the rows whose 'gpu' is this")
    a = p.parse_args()
    groups = collections.defaultdict(list)
    forward = collections.defaultdict(list)  # the forward alone, where the rows time it
    skipped = set()
    with open(a.rows) as f:
        for n, line in enumerate(f, 1):
            row = json.loads(line)
            if row.get("kind") != "attention" or (a.gpu and row.get("gpu") != a.gpu):
                continue
            kernel = row["kernel"] if "kernel" in row else BACKENDS.get(row["backend"])
            if kernel not in KERNELS:
                skipped.add(kernel or row["backend"])
                continue
            if not row["causal"]:
                sys.exit(f"{a.rows}:{n}: only causal rows are fitted")
            eff = row["fwd_bwd_tflops"] / a.peak_tflops
            groups[(kernel, row["head_dim"])].append((row["seq"], eff))
            if "fwd_tflops" in row:
                forward[(kernel, row["head_dim"])].append((row["seq"], row["fwd_tflops"] / a.peak_tflops))
    if skipped:
        print(f"# skipped (not a dtplan kernel): {', '.join(sorted(skipped))}", file=sys.stderr)
    if not groups:
        sys.exit(f"{a.rows}: no rows to fit")
    curves = []
    for (kernel, head_dim), points in sorted(groups.items()):
        plateau, half, worst = fit(sorted(points))
        curve = {"kernel": kernel, "architecture": a.architecture, "head_dim": head_dim,
                 "plateau_efficiency": plateau, "half_efficiency_tokens": half}
        print(f"# {kernel} head_dim {head_dim}: plateau {plateau:.3f}, half at {half:.0f} "
              f"tokens, worst time error {100 * worst:.2f}% over {len(points)} points",
              file=sys.stderr)
        if forward[(kernel, head_dim)]:
            fplateau, fhalf, fworst = fit(sorted(forward[(kernel, head_dim)]))
            curve["forward_plateau_efficiency"] = fplateau
            curve["forward_half_efficiency_tokens"] = fhalf
            print(f"#   forward: plateau {fplateau:.3f}, half at {fhalf:.0f} tokens, worst time "
                  f"error {100 * fworst:.2f}%", file=sys.stderr)
        curve["source"] = f"{a.rows}, fitted by tools/fit_attention_curves.py"
        curves.append(curve)
    print(json.dumps(curves, indent=2))


if __name__ == "__main__":
    main()
