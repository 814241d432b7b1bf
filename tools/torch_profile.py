#!/usr/bin/env python3
"""Where the time of one PyTorch training step goes, kernel by kernel (issue 16).

tools/torch_reference.py records what a step costs; this records why. For each
case (a dtplan model file trained by Hugging Face transformers in eager PyTorch
on one GPU, as torch_reference.py builds it) it measures:

  - the step's wall time, and the wall time of forward, backward and the
    optimizer step each (a device synchronisation closes each phase);
  - from a torch.profiler trace of one more step: every kernel, memcpy and
    memset with its duration, summed by category (GEMM, attention, norm,
    element-wise, optimizer, ...) and phase; the time the GPU was busy (the
    union of those intervals) against the phase's wall time, so the host-bound
    share is measured rather than guessed; the number of kernel launches and
    of host-device synchronisations per phase;
  - the peak of torch.cuda.max_memory_allocated / reserved over the steps.

`--host-overhead` also runs micro-benchmarks of the fixed cost of one eager op:
the host time to issue a tiny kernel, with and without autograd, and the GPU
time of the same kernel replayed from a CUDA graph (no host in the loop).

Usage (one process for all cases; each case's memory is freed before the next):
  tools/torch_profile.py --out DIR --host-overhead \
      --case model=gpt2,precision=bf16,micro_batch=8 \
      --case model=qwen3-30b-a3b,precision=bf16,micro_batch=4,layers=2 \
      --case model=gpt2-xl,precision=bf16,micro_batch=4,strategy=fsdp2
Case keys: model (file name under data/models without .json), precision (fp32 or
bf16: autocast, or under fsdp2 its MixedPrecisionPolicy), micro_batch, seq_len
(1024), checkpointing (0/1), dropout (config/off), optimizer
(foreach/fused/for-loop), layers (override the layer count), strategy (none, ddp
or fsdp2 at world size 1, wrapped as tools/torch_reference.py wraps them), trace
(1: also keep the chrome trace, gzipped).

Under fsdp2 the summary also sums, per phase, the host time of FSDP2's own
profiler annotations ("FSDP::..." user annotations: its hooks, all-gathers and
reduce-scatters as the host issues them), the part of an FSDP2 step that issue 16
finds unpriced; annotations nest, so the names are kept apart.
"""
import types

import argparse
import gc
import gzip
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402

CASE_KEYS = {"model": str, "precision": str, "micro_batch": int, "seq_len": int, "checkpointing": int,
             "dropout": str, "optimizer": str, "layers": int, "strategy": str, "trace": int}
CASE_DEFAULTS = {"precision": "bf16", "micro_batch": 1, "seq_len": 1024, "checkpointing": 0,
                 "dropout": "config", "optimizer": "foreach", "layers": 0, "strategy": "none", "trace": 0}
PHASES = ("forward", "backward", "optimizer")

# Kernel categories, first match wins; the patterns are lower-case substrings of
# kernel names as CUDA 13 / PyTorch 2.11 / cuDNN 9 name them.
CATEGORIES = (
    ("collective", ("nccl",)),
    ("attention", ("flash", "fmha", "sdpa", "attention", "cudnn_generated")),
    ("optimizer", ("multi_tensor_apply", "adam")),
    ("gemm", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "splitkreduce", "gemv", "dot_kernel")),
    ("norm", ("layer_norm", "layernorm", "rms_norm", "rmsnorm", "norm_kernel")),
    ("softmax_loss", ("softmax", "nll_loss", "cross_entropy", "logsumexp")),
    ("dropout", ("fused_dropout", "bernoulli", "dropout")),
    ("reduce", ("reduce_kernel", "reduce_", "sum_kernel")),
    ("index_scatter", ("index", "scatter", "gather", "embedding", "sort", "topk", "cumsum", "nonzero",
                       "histogram", "bincount", "radix", "arange", "where")),
    ("copy_cast", ("copy", "cast", "catarray", "cat_", "fill")),
    ("elementwise", ("elementwise", "vectorized", "unrolled", "pointwise", "triton")),
)


def parse_case(text):
    case = dict(CASE_DEFAULTS)
    for item in text.split(","):
        if "=" not in item:
            raise SystemExit(f"--case {text}: '{item}' is not key=value")
        key, value = item.split("=", 1)
        if key not in CASE_KEYS:
            raise SystemExit(f"--case {text}: unknown key '{key}' (known: {', '.join(CASE_KEYS)})")
        try:
            case[key] = CASE_KEYS[key](value)
        except ValueError:
            raise SystemExit(f"--case {text}: {key}={value} is not a {CASE_KEYS[key].__name__}")
    if "model" not in case:
        raise SystemExit(f"--case {text}: model= is required")
    if case["precision"] not in ref.PRECISIONS:
        raise SystemExit(f"--case {text}: precision must be one of {ref.PRECISIONS}")
    if case["optimizer"] not in ref.OPTIMIZERS:
        raise SystemExit(f"--case {text}: optimizer must be one of {ref.OPTIMIZERS}")
    if case["strategy"] not in ref.STRATEGIES:
        raise SystemExit(f"--case {text}: strategy must be one of {ref.STRATEGIES}")
    return case


def category(name):
    low = name.lower()
    for cat, keys in CATEGORIES:
        if any(k in low for k in keys):
            return cat
    return "other"


def union_us(intervals):
    """Length of the union of [start, end) intervals, in the intervals' unit."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def phase_of(ts, ranges):
    for name, (s, e) in ranges.items():
        if s <= ts <= e:
            return name
    return "outside"


def summarise_trace(events):
    """Kernel time by category and phase, busy time, launches and syncs from chrome-trace events."""
    ranges = {}
    for ev in events:
        if ev.get("ph") == "X" and ev.get("cat") == "user_annotation" and ev.get("name", "").startswith("phase:"):
            ranges[ev["name"][6:]] = (ev["ts"], ev["ts"] + ev["dur"])
    out = {p: {"wall_us": (ranges[p][1] - ranges[p][0]) if p in ranges else None, "by_category_us": {},
               "by_category_count": {}, "intervals": [], "launches": 0, "launch_host_us": 0.0, "syncs": 0,
               "d2h_copies": 0, "fsdp_host_us": {}} for p in list(PHASES) + ["outside"]}
    names = {}
    for ev in events:
        if ev.get("ph") != "X":
            continue
        cat, name, ts, dur = ev.get("cat", ""), ev.get("name", ""), ev.get("ts", 0.0), ev.get("dur", 0.0)
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            ph = out[phase_of(ts, ranges)]
            kind = category(name) if cat == "kernel" else cat
            ph["by_category_us"][kind] = ph["by_category_us"].get(kind, 0.0) + dur
            ph["by_category_count"][kind] = ph["by_category_count"].get(kind, 0) + 1
            ph["intervals"].append((ts, ts + dur))
            if cat == "gpu_memcpy" and "dtoh" in name.lower().replace(" ", "").replace("_", ""):
                ph["d2h_copies"] += 1
            key = (name[:300], kind, phase_of(ts, ranges))
            agg = names.setdefault(key, [0, 0.0])
            agg[0] += 1
            agg[1] += dur
        elif cat == "user_annotation" and name.startswith("FSDP::"):
            fsdp = out[phase_of(ts, ranges)]["fsdp_host_us"]
            count_us = fsdp.setdefault(name, [0, 0.0])
            count_us[0] += 1
            count_us[1] = round(count_us[1] + dur, 1)
        elif cat in ("cuda_runtime", "cuda_driver"):
            ph = out[phase_of(ts, ranges)]
            if "launchkernel" in name.lower() or "graphlaunch" in name.lower():
                ph["launches"] += 1
                ph["launch_host_us"] += dur
            if "synchronize" in name.lower():
                ph["syncs"] += 1
    for ph in out.values():
        ph["busy_us"] = union_us(ph.pop("intervals"))
        ph["kernel_us"] = sum(ph["by_category_us"].values())
    ordered = sorted(names.items(), key=lambda kv: -kv[1][1])
    out["kernels"] = [{"name": k[0], "category": k[1], "phase": k[2], "count": v[0], "total_us": round(v[1], 1)}
                      for k, v in ordered]
    return out


class Case:
    def __init__(self, torch, case, root):
        self.torch, self.case = torch, case
        path = os.path.join(root, "data", "models", case["model"] + ".json")
        self.name, hf_cfg = ref.load_hf_config(path, case["dropout"])
        if case["layers"]:
            hf_cfg["n_layer" if hf_cfg.get("model_type") == "gpt2" else "num_hidden_layers"] = case["layers"]
        torch.manual_seed(1234)
        self.model, self.config = ref.build_model(torch, dict(hf_cfg), "cuda")
        if case["checkpointing"]:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.model.train()
        # The wrapper first (FSDP2 turns the parameters into DTensors), then the optimizer.
        how = types.SimpleNamespace(strategy=case["strategy"], precision=case["precision"], device="cuda")
        self.module, self.dtype, self.facts = ref.wrap(torch, self.model, how)
        self.optimizer = ref.make_optimizer(torch, self.model, case["optimizer"])
        gen = torch.Generator(device="cuda").manual_seed(1234)
        self.batch = torch.randint(0, self.config.vocab_size, (case["micro_batch"], case["seq_len"]),
                                   device="cuda", generator=gen)

    def phase(self, name, fn, timed):
        torch = self.torch
        with torch.profiler.record_function("phase:" + name):
            t0 = time.perf_counter()
            result = fn()
            if timed:
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
        return result, dt

    def step(self, timed):
        torch = self.torch

        def forward():
            ctx = torch.autocast("cuda", dtype=self.dtype) if self.dtype else torch.autocast("cuda", enabled=False)
            with ctx:
                return self.module(input_ids=self.batch, labels=self.batch).loss

        def optimizer():
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)

        loss, t_fwd = self.phase("forward", forward, timed)
        _, t_bwd = self.phase("backward", loss.backward, timed)
        _, t_opt = self.phase("optimizer", optimizer, timed)
        return {"forward": t_fwd, "backward": t_bwd, "optimizer": t_opt}

    def measure(self, steps, phased_steps):
        torch = self.torch
        for _ in range(2):
            self.step(False)
        torch.cuda.synchronize()
        wall = []
        for _ in range(steps):
            t0 = time.perf_counter()
            self.step(False)
            torch.cuda.synchronize()
            wall.append(time.perf_counter() - t0)
        phased = [self.step(True) for _ in range(phased_steps)]
        return {"step_ms": [round(1e3 * w, 3) for w in wall],
                "step_ms_median": round(1e3 * statistics.median(wall), 3),
                "phase_ms_median": {p: round(1e3 * statistics.median(s[p] for s in phased), 3) for p in PHASES}}

    def profile(self, trace_path):
        torch = self.torch
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            self.step(True)
        tmp = trace_path or f"/tmp/torch_profile_{os.getpid()}.json"
        prof.export_chrome_trace(tmp)
        with open(tmp, encoding="utf-8") as f:
            events = json.load(f).get("traceEvents", [])
        if trace_path:
            with open(tmp, "rb") as src, gzip.open(tmp + ".gz", "wb") as dst:
                dst.write(src.read())
        os.remove(tmp)
        return summarise_trace(events)


def run_case(torch, case, root, out_dir):
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    record = {"case": case}
    try:
        c = Case(torch, case, root)
        record.update({"model": c.name, "parameters": sum(p.numel() for p in c.model.parameters()),
                       "layers": getattr(c.config, "num_hidden_layers", None),
                       "attn_implementation": getattr(c.config, "_attn_implementation", None),
                       "experts_implementation": getattr(c.config, "_experts_implementation", None),
                       "wrapper": c.facts})
        record.update(c.measure(steps=3, phased_steps=2))
        record["memory"] = {"max_allocated_bytes": torch.cuda.max_memory_allocated(),
                            "max_reserved_bytes": torch.cuda.max_memory_reserved()}
        trace = None
        if case["trace"]:
            trace = os.path.join(out_dir, f"trace-{case['model']}-{case['strategy']}-{case['precision']}"
                                          f"-mb{case['micro_batch']}.json")
        try:
            record["profile"] = c.profile(trace)
        except Exception as e:  # keep the timings when the profiler fails
            record["profile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        del c
    except Exception as e:  # one failed case must not lose the others
        record["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    record["taken_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return record


def time_host_loop(torch, fn, n):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t_issue = time.perf_counter() - t0
    torch.cuda.synchronize()
    return t_issue, time.perf_counter() - t0


def host_overhead(torch):
    """Fixed per-op costs: host issue time of tiny eager ops, GPU time of the same kernel from a CUDA graph."""
    n = 20000
    x = torch.zeros(1, device="cuda")
    res = {"ops": n}
    time_host_loop(torch, lambda: x.add_(1.0), 1000)
    issue, total = time_host_loop(torch, lambda: x.add_(1.0), n)
    res["eager_add_issue_us_per_op"] = 1e6 * issue / n
    res["eager_add_total_us_per_op"] = 1e6 * total / n
    w = torch.zeros(64, 64, device="cuda", dtype=torch.bfloat16)
    a = torch.zeros(64, 64, device="cuda", dtype=torch.bfloat16)
    issue, total = time_host_loop(torch, lambda: torch.mm(a, w), n)
    res["eager_small_mm_issue_us_per_op"] = 1e6 * issue / n
    res["eager_small_mm_total_us_per_op"] = 1e6 * total / n
    # autograd: a chain of k ops forward, then backward through it
    k = 2000
    leaf = torch.zeros(1, device="cuda", requires_grad=True)
    for _ in range(2):
        y = leaf
        for _ in range(k):
            y = y * 1.0001
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = leaf
        for _ in range(k):
            y = y * 1.0001
        t_fwd = time.perf_counter() - t0
        t0 = time.perf_counter()
        y.backward()
        torch.cuda.synchronize()
        t_bwd = time.perf_counter() - t0
    res["autograd_forward_issue_us_per_op"] = 1e6 * t_fwd / k
    res["autograd_backward_us_per_op"] = 1e6 * t_bwd / k
    # the same tiny kernel replayed from a CUDA graph: the GPU-side cost per kernel
    g_ops = 1000
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            x.add_(1.0)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(g_ops):
            x.add_(1.0)
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 20
    start.record()
    for _ in range(reps):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    res["graph_tiny_kernel_gpu_us_per_op"] = 1e3 * start.elapsed_time(end) / (reps * g_ops)
    # a device-to-host read, as .item() does (one sync each)
    issue, total = time_host_loop(torch, lambda: x.item(), 2000)
    res["item_sync_us_per_call"] = 1e6 * total / 2000
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in res.items()}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="folder for profile.jsonl, host-overhead.json and traces")
    p.add_argument("--case", action="append", default=[], help="key=value,... (see the module doc)")
    p.add_argument("--host-overhead", action="store_true", help="also run the per-op micro-benchmarks")
    args = p.parse_args(argv)
    cases = [parse_case(c) for c in args.case]
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("torch_profile.py: no CUDA device is visible to PyTorch")
    os.makedirs(args.out, exist_ok=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = ref.environment(torch, "cuda")
    if args.host_overhead:
        try:
            rec = {"host_overhead": host_overhead(torch), "env": env}
        except Exception as e:  # the cases still run
            rec = {"error": f"{type(e).__name__}: {e}", "env": env}
        with open(os.path.join(args.out, "host-overhead.json"), "w", encoding="utf-8") as f:
            json.dump(rec, f, indent=1)
        print(json.dumps(rec.get("host_overhead", rec.get("error"))), flush=True)
    for case in cases:
        t0 = time.perf_counter()
        record = run_case(torch, case, root, args.out)
        record["env"] = env
        with open(os.path.join(args.out, "profile.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        brief = {k: record.get(k) for k in ("step_ms_median", "phase_ms_median", "error")}
        print(f"{case}: {brief} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
