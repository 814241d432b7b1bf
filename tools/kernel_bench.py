#!/usr/bin/env python3
"""Measure the kernel efficiencies dtplan's compute model needs, on one GPU, with PyTorch.

Writes one JSON object per line:
  kind "gemm":      C[M,N] = A[M,K] B[K,N] for the shapes of transformer layers, per element type
                    (fp32 without TF32, tf32, bf16, fp16, fp8 e4m3 through torch._scaled_mm);
                    TFLOP/s = 2 M N K / time.
  kind "attention": torch's scaled_dot_product_attention (flash backend where it applies), causal,
                    forward and forward+backward, by head dimension and sequence length;
                    FLOPs counted as 4 b h s^2 d for the forward, halved for causal, and 3.5x the
                    forward for forward+backward (the backward's five matrix products).
  kind "memory":    device-to-device copy, bytes read plus written per second.
  kind "linear":    a Linear layer's forward, input- and weight-gradient products, with N or K
                    aligned to 8 elements or not (cuBLAS's 16-byte aligned kernels need it).
  kind "elementwise": PyTorch's unfused element-wise kernels (adds, casts, tanh, GELU, LayerNorm)
                    at activation sizes, bytes read plus written per second.
Each figure is the median of `--reps` timed calls after warm-up calls, timed with CUDA events.
"""

import argparse
import json
import statistics
import sys
import time


def timed(torch, fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return statistics.median(times)


GEMM_SHAPES = [
    # (M tokens, N, K): QKV, attention out, MLP up, MLP down for hidden 768 .. 8192
    *[(m, n, k) for m in (2048, 8192) for (n, k) in
      ((2304, 768), (768, 768), (3072, 768), (768, 3072),
       (3 * 2048, 2048), (8192, 2048), (2048, 8192),
       (6144, 4096), (4096, 4096), (14336, 4096), (4096, 14336),
       (8192 * 3, 8192), (8192, 8192), (28672, 8192), (8192, 28672))],
    (16384, 16384, 16384), (8192, 8192, 8192), (4096, 4096, 4096), (1024, 1024, 1024), (512, 512, 512),
    # LM head: tokens x vocab x hidden
    (8192, 50257, 768), (8192, 128256, 2048), (8192, 128256, 4096),
]


def gemm_rows(torch, reps):
    dtypes = [("fp32", torch.float32, False), ("tf32", torch.float32, True),
              ("bf16", torch.bfloat16, False), ("fp16", torch.float16, False)]
    for (m, n, k) in GEMM_SHAPES:
        for name, dt, tf32 in dtypes:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(m, k, device="cuda", dtype=dt)
            b = torch.randn(k, n, device="cuda", dtype=dt)
            t = timed(torch, lambda: a @ b, reps)
            yield {"kind": "gemm", "dtype": name, "m": m, "n": n, "k": k, "time_s": t,
                   "tflops": 2 * m * n * k / t / 1e12}
            del a, b
        torch.backends.cuda.matmul.allow_tf32 = False
        fp8 = fp8_gemm(torch, m, n, k, reps)
        if fp8:
            yield fp8


def fp8_gemm(torch, m, n, k, reps):
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return None
    if m % 16 or n % 16 or k % 16:
        return None
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device="cuda")
    try:
        t = timed(torch, lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), reps)
    except RuntimeError as e:
        return {"kind": "gemm", "dtype": "fp8_e4m3", "m": m, "n": n, "k": k, "error": str(e).splitlines()[0]}
    return {"kind": "gemm", "dtype": "fp8_e4m3", "m": m, "n": n, "k": k, "time_s": t,
            "tflops": 2 * m * n * k / t / 1e12}


def attention_rows(torch, reps):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for d in (64, 128):
        heads = 2048 // d * 2  # hidden 4096
        for s in (512, 1024, 2048, 4096, 8192, 16384):
            b = max(1, 16384 // s)
            q, k, v = (torch.randn(b, heads, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            flops_fwd = 4 * b * heads * s * s * d / 2
            for backend_name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                                          ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        fwd = timed(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps)
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        g = torch.randn_like(out)

                        def fwd_bwd():
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                            o.backward(g)
                        both = timed(torch, fwd_bwd, reps)
                except RuntimeError as e:
                    yield {"kind": "attention", "backend": backend_name, "head_dim": d, "seq": s,
                           "error": str(e).splitlines()[0]}
                    continue
                yield {"kind": "attention", "backend": backend_name, "dtype": "bf16", "batch": b, "heads": heads,
                       "head_dim": d, "seq": s, "causal": True, "fwd_s": fwd, "fwd_bwd_s": both,
                       "fwd_tflops": flops_fwd / fwd / 1e12, "fwd_bwd_tflops": 3.5 * flops_fwd / both / 1e12}
            del q, k, v


# A Linear layer's three products, as autograd runs them for y = x W^T (W is out x in):
# forward x[M,K] W^T, input gradient dy[M,N] W[N,K], weight gradient dy^T x. N or K not a
# multiple of 8 (16 bytes of bf16) leaves cuBLAS without its 16-byte aligned kernels.
LINEAR_SHAPES = [
    *[(8192, n, k) for k in (768, 1600, 2048, 4096) for n in (50257, 30522, 32001, 50264, 50304)],
    (8192, 4096, 4095), (8192, 4095, 4096), (8191, 4096, 4096), (8192, 4096, 4096),
    (2048, 50257, 768), (32768, 50257, 768),
    # multiples of 4 but not of 8
    (8192, 50260, 768), (8192, 50260, 4096), (8192, 4096, 4092), (8192, 4092, 4096),
]


def linear_rows(torch, reps):
    for (m, n, k) in LINEAR_SHAPES:
        for name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32)):
            if name == "fp32" and k not in (768, 4096, 4095):
                continue
            x = torch.randn(m, k, device="cuda", dtype=dt)
            w = torch.randn(n, k, device="cuda", dtype=dt)
            dy = torch.randn(m, n, device="cuda", dtype=dt)
            products = (("forward", lambda: torch.nn.functional.linear(x, w)),
                        ("input_grad", lambda: dy @ w), ("weight_grad", lambda: dy.t() @ x))
            for prod, fn in products:
                t = timed(torch, fn, reps)
                yield {"kind": "linear", "dtype": name, "product": prod, "m": m, "n": n, "k": k,
                       "time_s": t, "tflops": 2 * m * n * k / t / 1e12}
            del x, w, dy


def elementwise_rows(torch, reps):
    """Bandwidth of PyTorch's unfused element-wise kernels at activation sizes, bytes read + written."""
    f32, b16 = torch.float32, torch.bfloat16
    for (m, n) in ((8192, 768), (8192, 3072), (8192, 50257), (4096, 8192)):
        a32, c32 = torch.randn(m, n, device="cuda"), torch.randn(m, n, device="cuda")
        a16, c16 = a32.to(b16), c32.to(b16)
        ops = (("add_fp32", lambda: a32 + c32, 12), ("add_bf16", lambda: a16 + c16, 6),
               ("add_fp32_bf16", lambda: a32 + c16, 10), ("cast_fp32_to_bf16", lambda: a32.to(b16), 6),
               ("cast_bf16_to_fp32", lambda: a16.to(f32), 6), ("mul_scalar_fp32", lambda: a32 * 0.5, 8),
               ("tanh_fp32", lambda: torch.tanh(a32), 8), ("gelu_bf16", lambda: torch.nn.functional.gelu(a16), 4),
               ("layer_norm_fp32", lambda: torch.nn.functional.layer_norm(a32, (n,)), 8))
        for name, fn, bytes_per_element in ops:
            t = timed(torch, fn, reps)
            yield {"kind": "elementwise", "op": name, "m": m, "n": n, "time_s": t,
                   "bytes": bytes_per_element * m * n, "gb_per_s": bytes_per_element * m * n / t / 1e9}
        del a32, c32, a16, c16


def memory_rows(torch, reps):
    for mib in (1, 16, 256, 2048):
        n = mib * 2**20 // 4
        x = torch.empty(n, device="cuda")
        y = torch.empty_like(x)
        t = timed(torch, lambda: y.copy_(x), reps)
        yield {"kind": "memory", "op": "copy", "bytes": 4 * n, "time_s": t, "gb_per_s": 2 * 4 * n / t / 1e9}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--out", required=True)
    p.add_argument("--only", choices=("gemm", "attention", "memory", "linear", "elementwise"))
    args = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("kernel_bench: no CUDA device is visible to PyTorch")
    prop = torch.cuda.get_device_properties(0)
    env = {"kind": "env", "gpu": prop.name, "sm_count": prop.multi_processor_count, "torch": torch.__version__,
           "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
           "taken_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    groups = {"gemm": gemm_rows, "attention": attention_rows, "memory": memory_rows, "linear": linear_rows,
              "elementwise": elementwise_rows}
    with open(args.out, "a", encoding="utf-8") as f:
        f.write(json.dumps(env) + "\n")
        for name, fn in groups.items():
            if args.only and args.only != name:
                continue
            for row in fn(torch, args.reps):
                f.write(json.dumps(row) + "\n")
                f.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
