#!/usr/bin/env python3
"""Replay a dtplan-run job in PyTorch and compare the weights it ends with.

dtplan-run --dump DIR writes the workload (the decoder blocks dtplan-run executes,
cost/dense_stack.hpp), its settings, the weights before the first step, every
rank's batches, the loss of each step and the weights after the last step
(runtime/exec/include/dtplan/runtime/replay_dump.hpp). This script builds the same
blocks from PyTorch's own modules and functions (torch.nn.functional.layer_norm,
linear, softmax, gelu, silu, cross_entropy), starts one process per rank, wraps
the model in DistributedDataParallel over gloo, and trains it on the same batches
with the same optimizer (torch.optim.AdamW / Adam / SGD), gradient accumulation
(no_sync where dtplan-run used it) and torch.nn.utils.clip_grad_norm_. Every
data-parallel strategy dtplan-run executes (DDP, DataParallel's reduce and
broadcast, ZeRO-1/2/3) applies the same update to the same weights; they differ
in what they communicate and keep, so PyTorch's DDP is the reference for all.

It then compares, step by step and at the end:
  loss: |loss_dtplan - loss_torch| / loss_torch for every step;
  weights: ||w_dtplan - w_torch|| / ||w_torch - w_initial||, the disagreement
    relative to how far training moved the weights, and the largest element
    difference.

bf16 dumps (a mixed-precision plan: dtplan-run rounds where torch.autocast does,
cost/dense_stack.hpp) are replayed under torch.autocast("cpu", bfloat16), with
layer_norm, softmax and cross_entropy in fp32 as CUDA autocast runs them and
GELU/SiLU computed in fp32 and rounded once (PyTorch >= 2 and CUDA do; 1.13's
CPU kernels round every intermediate). Two bf16 programs that round at the same
points still disagree in the last bit wherever their fp32 sums run in a
different order, and bf16 carries those flips forward, so bf16 is compared
through one SGD step without clipping, where the weights move by exactly the
gradient: at least 90% of dtplan-run's gradient elements must agree with
PyTorch's bf16 gradient to 0.1% (BF16_AGREEING_SHARE, ELEMENT_AGREEMENT).
A bf16 matrix product sums in fp32 and rounds once, as cuBLAS and oneDNN do. Some
PyTorch CPU builds do otherwise: PyTorch 1.13 on a CPU without AVX-512 sums in bf16
(94% of a 64 x 768 x 256 product's elements more than 0.1% off on an AMD EPYC with
AVX2). A probe finds out (fp32_summed_bf16_products); where it fails, the replay
computes each bf16 product as the fp32 product of the bf16 values, rounded to bf16,
and says so.

Usage:
  mpirun -np 2 build/bin/dtplan-run --plan plan.json --backend cpu --scale 0.05 \\
      --steps 3 --dump replay/
  /usr/bin/python3 tools/torch_replay.py replay/ [--json result.json]

Exit status 0 when both figures are within their tolerances, 1 when not, 2 on bad input.
"""

import argparse
import json
import math
import os
import sys
import tempfile

# fp32 throughout on both sides, with operations in different orders (Eigen's blocked
# GEMMs, dtplan's double-precision norm statistics and loss sums vs PyTorch's kernels): the
# rounding differences are a few units in the 7th digit per operation. A mistake in a
# formula, a layout or an update moves the figures by orders of magnitude more.
LOSS_TOLERANCE = 1e-5     # relative, every step
WEIGHT_TOLERANCE = 1e-3   # ||w_dtplan - w_torch|| / ||w_torch - w_initial||

# bf16: the share of gradient elements (one SGD step) within ELEMENT_AGREEMENT (relative) of
# PyTorch's bf16 gradient. A bf16 rounding that lands the other way moves a value by 2^-8
# (relative), so within 1e-3 an element agrees unless a rounding flip reached it. Flips come
# from fp32 sums taken in another order (Eigen's GEMMs against oneDNN's) and spread through
# later roundings, more in some sequences than others. Measured on one-block GPT-2 and Llama 3.2
# shapes at scale 0.05 (tests/runtime/torch_replay.sh): dtplan-run agrees on 98.1% and 94.4%
# of elements (85% on another 8 Llama sequences, one of which spreads its flips widely); in a
# Python emulation of dtplan-run's rounding points, leaving out any one of them (the Linear
# outputs, the probabilities before p v, the logits, SiLU's output, rotary's) drops agreement
# with PyTorch to 60-74%, and PyTorch's own fp32 gradient agrees on 16-41%. The loss of that
# step (forward only) must agree within bf16's unit roundoff.
ELEMENT_AGREEMENT = 1e-3
BF16_AGREEING_SHARE = 0.9
BF16_LOSS_TOLERANCE = 2.0 ** -9


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dump", help="directory written by dtplan-run --dump")
    p.add_argument("--json", help="write the comparison as JSON here")
    return p.parse_args(argv)


def fail_input(message):
    print(f"torch_replay: {message}", file=sys.stderr)
    sys.exit(2)


def load_dump(directory):
    path = os.path.join(directory, "replay.json")
    try:
        with open(path) as f:
            r = json.load(f)
    except OSError as e:
        fail_input(f"{path}: cannot be read ({e.strerror}); write it with dtplan-run --dump")
    except json.JSONDecodeError as e:
        fail_input(f"{path}: not JSON ({e})")
    for key in ("workload", "units", "ranks", "optimizer", "lr", "max_grad_norm",
                "micro_batch", "grad_accum", "no_sync", "steps", "losses", "files"):
        if key not in r:
            fail_input(f"{path}: missing key '{key}'")
    # Dumps written before dtplan-run executed dropout ran without it.
    r["workload"].setdefault("dropout", {"attention": 0, "hidden": 0, "embedding": 0})
    if "seed" not in r and any(v > 0 for v in r["workload"]["dropout"].values()):
        fail_input(f"{path}: missing key 'seed' (the dropout masks are drawn from it)")
    if r["workload"].get("attention") != "causal":
        fail_input(f"{path}: /workload/attention is {r['workload'].get('attention')!r}; "
                   "only dumps of the causal workload can be replayed")
    compute = r["workload"].get("compute", "fp32")
    if compute not in ("fp32", "bf16"):
        fail_input(f"{path}: /workload/compute is {compute!r}; PyTorch's CPU autocast replays "
                   "fp32 and bf16 runs only")
    if compute == "bf16" and (r["optimizer"] != "sgd" or r["steps"] != 1
                              or r["max_grad_norm"] > 0):
        fail_input(f"{path}: a bf16 run is compared through its gradient: dump one SGD step "
                   "without clipping (dtplan plan --optimizer sgd; dtplan-run --steps 1 "
                   "--warmup 0 --max-grad-norm 0)")
    return r


def read_raw(directory, name, dtype, count):
    import torch
    path = os.path.join(directory, name)
    size = os.path.getsize(path) if os.path.exists(path) else -1
    if size != count * 4:
        fail_input(f"{path}: {size} bytes, expected {count * 4} ({count} values)")
    return torch.from_file(path, shared=False, size=count, dtype=dtype)


class Layout:
    """Shapes of each unit's tensors in dtplan-run's order (runtime/exec/.../dense_model.hpp)."""

    def __init__(self, w):
        self.w = w
        h, d = w["hidden"], w["head_dim"]
        self.h, self.d = h, d
        self.heads, self.kv = w["heads"], w["kv_heads"]
        self.q = self.heads * d
        self.qkv = self.q + 2 * self.kv * d
        self.f, self.vocab = w["ffn"], w["vocab"]
        self.layernorm = w["norm"] == "layernorm"
        self.learned = w["positions"] == "learned"
        self.tp = 1  # set from the dump (build_model)

    def norm(self, name):
        shapes = [(f"{name}.weight", (self.h,))]
        if self.layernorm:
            shapes.append((f"{name}.bias", (self.h,)))
        return shapes

    def linear(self, name, out, inp, bias):
        shapes = [(f"{name}.weight", (out, inp))]
        if bias:
            shapes.append((f"{name}.bias", (out,)))
        return shapes

    def embedding_unit(self):
        s = [("tok", (self.vocab, self.h))]
        if self.learned:
            s.append(("pos", (self.w["max_positions"], self.h)))
        if self.w["tied"] and self.w["final_norm"]:
            s += self.norm("final_norm")
        return s

    def block_unit(self, l):
        w, p = self.w, f"blocks.{l}."
        s = self.norm(p + "norm1")
        s += self.linear(p + "qkv", self.qkv, self.h, w["qkv_bias"])
        s += self.linear(p + "out", self.h, self.q, w["out_bias"])
        s += self.norm(p + "norm2")
        if w["gated"]:
            s += self.linear(p + "gate", self.f, self.h, w["mlp_bias"])
        s += self.linear(p + "up", self.f, self.h, w["mlp_bias"])
        s += self.linear(p + "down", self.h, self.f, w["mlp_bias"])
        return s

    def head_unit(self):
        s = [("head", (self.vocab, self.h))]
        if self.w["final_norm"]:
            s += self.norm("final_norm")
        return s

    def units(self):
        u = [self.embedding_unit()] + [self.block_unit(l) for l in range(self.w["layers"])]
        if not self.w["tied"]:
            u.append(self.head_unit())
        return u


def fp32_summed_bf16_products():
    """Whether this PyTorch's CPU bf16 matrix product is the fp32 product of its inputs rounded
    once: every element within one bf16 step (2^-7 of its magnitude) of it."""
    import torch
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 768, generator=g).bfloat16()
    b = torch.randn(768, 256, generator=g).bfloat16()
    exact = (a.float() @ b.float()).bfloat16().float()
    return bool(((a @ b).float() - exact).abs().le(exact.abs() * 2.0**-7 + 1e-30).all())


def gemm16(torch, F, exact):
    """F.linear and einsum as a 16-bit product runs them: PyTorch's own where its CPU sums in
    fp32 (`exact`), else the fp32 product of the 16-bit values, rounded to 16 bits (autograd's
    backward then rounds the input gradients the same way)."""
    def linear(x, w, b=None):
        if exact or not torch.is_autocast_cpu_enabled():
            return F.linear(x, w, b)
        t = torch.get_autocast_cpu_dtype()
        with torch.autocast("cpu", enabled=False):
            y = F.linear(x.to(t).float(), w.to(t).float(), None if b is None else b.to(t).float())
        return y.to(t)

    def einsum(spec, a, b):
        if exact or a.dtype == torch.float32:
            return torch.einsum(spec, a, b)
        return torch.einsum(spec, a.float(), b.float()).to(a.dtype)

    return linear, einsum


def build_model(r):
    import torch
    import torch.nn.functional as F
    linear16, einsum16 = gemm16(torch, F, fp32_summed_bf16_products())

    class Blocks(torch.nn.Module):
        """The decoder blocks dtplan-run executes, from PyTorch's functions."""

        def __init__(self, layout):
            super().__init__()
            self.layout = layout
            self.names = []
            for unit in layout.units():
                for name, shape in unit:
                    self.register_parameter(name.replace(".", "_"),
                                            torch.nn.Parameter(torch.zeros(shape)))
                    self.names.append((name, shape))

        def p(self, name):
            return getattr(self, name.replace(".", "_"), None)

        def load_flat(self, flat, units):
            at = 0
            for unit, spec in zip(self.layout.units(), units):
                n = sum(math.prod(shape) for _, shape in unit)
                if n != spec["params"]:
                    fail_input(f"unit {spec['name']}: {spec['params']} parameters in the dump, "
                               f"{n} in this layout")
                for name, shape in unit:
                    count = math.prod(shape)
                    self.p(name).data.copy_(flat[at:at + count].view(shape))
                    at += count
            return at

        def flat(self):
            return torch.cat([self.p(name).detach().reshape(-1)
                              for unit in self.layout.units() for name, _ in unit])

        def norm(self, x, name):
            x = x.float()  # fp32 under autocast, as CUDA's autocast runs layer_norm
            eps = self.layout.w["norm_eps"]
            if self.layout.layernorm:
                return F.layer_norm(x, (x.shape[-1],), self.p(name + ".weight"),
                                    self.p(name + ".bias"), eps)
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * self.p(name + ".weight")

        def linear(self, x, name):
            return linear16(x, self.p(name + ".weight"), self.p(name + ".bias"))

        # A dump of a tensor-parallel run (its "tensor_parallel" ranks) is replayed with each
        # split Linear computed as Megatron-LM's ranks compute it, from the same weights: a
        # column-parallel one as one GEMM per rank over the rank's output rows (`segments`: the
        # widths the rows split within, as QKV's queries, keys and values), so that backward's
        # input gradient is the sum of the ranks' rounded partial products (autograd adds them);
        # a row-parallel one as the sum of the ranks' partial products over their input columns,
        # each rounded under autocast, the bias added after. In fp32 only the order of the sums
        # moves; under bf16 these are the roundings a 16-bit tensor-parallel run makes.
        def split_rows(self, x, weight, bias, segments):
            tp = self.layout.tp
            if tp == 1:
                return linear16(x, weight, bias)
            shards = [[] for _ in range(tp)]
            at = 0
            for width in segments:
                part = width // tp
                for r in range(tp):
                    shards[r].append((at + r * part, part))
                at += width
            outs = []
            for r in range(tp):
                rows = torch.cat([torch.arange(a, a + n) for a, n in shards[r]])
                outs.append(linear16(x, weight[rows], None if bias is None else bias[rows]))
            # Each rank's outputs back in the whole model's order, segment by segment.
            pieces = []
            for s in range(len(segments)):
                for r in range(tp):
                    start = sum(n for _, n in shards[r][:s])
                    pieces.append(outs[r][..., start:start + shards[r][s][1]])
            return torch.cat(pieces, dim=-1)

        def shared_input(self, x):
            """Under tensor parallelism and autocast, a column-parallel Linear's input as the one
            16-bit tensor every rank reads, so that autograd sums the ranks' input gradients in
            16 bits, as a 16-bit all-reduce does (autocast alone would cast it once per rank and
            sum in fp32)."""
            if self.layout.tp > 1 and torch.is_autocast_cpu_enabled():
                return x.to(torch.get_autocast_cpu_dtype())
            return x

        def column_linear(self, x, name, segments):
            return self.split_rows(x, self.p(name + ".weight"), self.p(name + ".bias"), segments)

        def row_linear(self, x, name):
            tp = self.layout.tp
            weight, bias = self.p(name + ".weight"), self.p(name + ".bias")
            if tp == 1:
                return linear16(x, weight, bias)
            part = x.shape[-1] // tp
            y = None
            for r in range(tp):
                partial = linear16(x[..., r * part:(r + 1) * part], weight[:, r * part:(r + 1) * part])
                y = partial if y is None else y + partial
            # The bias joins the summed output in its type (a bf16 add under autocast, as the
            # rank adds it to its 16-bit all-reduced output).
            return y if bias is None else y + bias.to(y.dtype)

        def rotary(self, x, seq):
            # Pair i with i + d/2 (Llama's rotate_half), angle position x theta^(-2i/d).
            d = self.layout.d
            half = d // 2
            i = torch.arange(half, dtype=torch.float64)
            inv = self.layout.w["rope_theta"] ** (-2.0 * i / d)
            angle = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None, :]
            cos = angle.cos().float()[None, :, None, :]
            sin = angle.sin().float()[None, :, None, :]
            lo, hi, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
            return torch.cat([lo * cos - hi * sin, hi * cos + lo * sin, rest], dim=-1)

        def dropout(self, x, masks, key, p):
            """x * noise, noise the kept elements' 1 / (1 - p) in x's type (nn.Dropout's form)."""
            if masks is None or key not in masks:
                return x
            noise = masks[key].to(x.dtype)
            noise.div_(1 - p)
            return x * noise

        def attention(self, x, prefix, batch, seq, masks=None, layer=0):
            L = self.layout
            x = self.shared_input(x)
            qkv = self.column_linear(x, prefix + "qkv", [L.q, L.kv * L.d, L.kv * L.d])
            q = qkv[..., :L.q].view(batch, seq, L.heads, L.d)
            k = qkv[..., L.q:L.q + L.kv * L.d].view(batch, seq, L.kv, L.d)
            v = qkv[..., L.q + L.kv * L.d:].view(batch, seq, L.kv, L.d)
            if not L.learned:  # in fp32, the result rounded to the type of q and k
                q, k = self.rotary(q.float(), seq).to(q.dtype), self.rotary(k.float(), seq).to(k.dtype)
            group = L.heads // L.kv
            k = k.repeat_interleave(group, dim=2)
            v = v.repeat_interleave(group, dim=2)
            # Scores and softmax in fp32; under bf16 the probabilities enter p v rounded and the
            # product is a bf16 GEMM (fp32 accumulation, bf16 result).
            with torch.autocast("cpu", enabled=False):
                scores = torch.einsum("bihd,bjhd->bhij", q.float(), k.float()) / math.sqrt(L.d)
                mask = torch.ones(seq, seq, dtype=torch.bool).triu(1)
                probs = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
                dropped = self.dropout(probs.to(v.dtype), masks, (layer, SITE_ATTENTION),
                                       L.w["dropout"]["attention"])
                out = einsum16("bhij,bjhd->bihd", dropped, v)
            out = out.reshape(batch, seq, L.q)
            return self.row_linear(out, prefix + "out")

        def mlp(self, x, prefix):
            # The activation in fp32, rounded once to its input's type.
            f = [self.layout.f]
            x = self.shared_input(x)
            if self.layout.w["gated"]:
                g = self.column_linear(x, prefix + "gate", f)
                a = F.silu(g.float()).to(g.dtype) * self.column_linear(x, prefix + "up", f)
            else:
                up = self.column_linear(x, prefix + "up", f)
                a = F.gelu(up.float(), approximate="tanh").to(up.dtype)
            return self.row_linear(a, prefix + "down")

        def forward(self, ids, targets, masks=None):
            L = self.layout
            p = L.w["dropout"]
            batch, seq = ids.shape
            x = F.embedding(ids, self.p("tok"))
            if L.learned:
                x = x + self.p("pos")[:seq][None]
            x = self.dropout(x, masks, (0, SITE_EMBEDDING), p["embedding"])
            for l in range(L.w["layers"]):
                prefix = f"blocks.{l}."
                a = self.attention(self.norm(x, prefix + "norm1"), prefix, batch, seq, masks, l)
                x = x + self.dropout(a, masks, (l, SITE_ATTENTION_OUTPUT), p["hidden"])
                m = self.mlp(self.norm(x, prefix + "norm2"), prefix)
                x = x + self.dropout(m, masks, (l, SITE_MLP_OUTPUT), p["hidden"])
            if L.w["final_norm"]:
                x = self.norm(x, "final_norm")
            head = self.p("tok") if L.w["tied"] else self.p("head")
            x = self.shared_input(x)
            logits = self.split_rows(x, head, None, [L.vocab]).float()  # the loss in fp32
            return F.cross_entropy(logits.reshape(-1, L.vocab), targets.reshape(-1),
                                   reduction="sum")

    layout = Layout(r["workload"])
    layout.tp = r.get("tensor_parallel", 1)
    return Blocks(layout)


# dtplan-run's dropout masks, rebuilt (runtime/exec/include/dtplan/runtime/dropout.hpp): element
# i of sample g's tensor at (layer, site) of step t is kept when
#   mix(mix(mix(mix(seed ^ t) + g) + ((4 layer + site + 1) << 32)) + i) >> 40 >= round(p 2^24)
# with mix splitmix64's finaliser; the attention probabilities' squares are not drawn above the
# diagonal.
SITE_EMBEDDING, SITE_ATTENTION, SITE_ATTENTION_OUTPUT, SITE_MLP_OUTPUT = 0, 1, 2, 3
U64 = (1 << 64) - 1


def mix(x):
    """splitmix64's finaliser of a Python int or a numpy uint64 array (wrapping)."""
    import numpy as np
    if isinstance(x, int):
        x = (x + 0x9e3779b97f4a7c15) & U64
        x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & U64
        x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & U64
        return x ^ (x >> 31)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9e3779b97f4a7c15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        return x ^ (x >> np.uint64(31))


def keep_mask(seed, step, sample, layer, site, count, p):
    import numpy as np
    stream = mix((mix(mix(seed ^ step) + sample) + ((4 * layer + site + 1) << 32)) & U64)
    threshold = int(math.floor(p * 2 ** 24 + 0.5))
    with np.errstate(over="ignore"):
        drawn = mix(np.uint64(stream) + np.arange(count, dtype=np.uint64))
    return (drawn >> np.uint64(40)) >= np.uint64(threshold)


def dropout_masks(r, step, first_sample):
    """The masks of one micro-step, keyed (layer, site): bool tensors shaped as the values."""
    import numpy as np
    import torch
    w = r["workload"]
    p = w["dropout"]
    S, h, heads, mb = w["seq_len"], w["hidden"], w["heads"], r["micro_batch"]
    samples = range(first_sample, first_sample + mb)
    seed = r["seed"]

    def stacked(layer, site, count, shape):
        m = [keep_mask(seed, step, g, layer, site, count, p_of[site]) for g in samples]
        return torch.from_numpy(np.stack(m).reshape((mb,) + shape))

    p_of = {SITE_EMBEDDING: p["embedding"], SITE_ATTENTION: p["attention"],
            SITE_ATTENTION_OUTPUT: p["hidden"], SITE_MLP_OUTPUT: p["hidden"]}
    masks = {}
    if p["embedding"] > 0:
        masks[(0, SITE_EMBEDDING)] = stacked(0, SITE_EMBEDDING, S * h, (S, h))
    causal = torch.ones(S, S, dtype=torch.bool).tril()
    for l in range(w["layers"]):
        if p["attention"] > 0:
            masks[(l, SITE_ATTENTION)] = stacked(l, SITE_ATTENTION, heads * S * S,
                                                 (heads, S, S)) & causal
        if p["hidden"] > 0:
            for site in (SITE_ATTENTION_OUTPUT, SITE_MLP_OUTPUT):
                masks[(l, site)] = stacked(l, site, S * h, (S, h))
    return masks


def make_optimizer(r, params):
    import torch
    name = r["optimizer"]
    if name in ("adamw", "adam"):
        cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
        return cls(params, lr=r["lr"], betas=tuple(r["betas"]), eps=r["eps"],
                   weight_decay=r["weight_decay"], foreach=False)
    if name == "sgd":
        return torch.optim.SGD(params, lr=r["lr"], momentum=r["momentum"], foreach=False)
    fail_input(f"optimizer {name!r} cannot be replayed")


def batches_of(r, directory):
    import torch
    w = r["workload"]
    tokens = r["micro_batch"] * w["seq_len"]
    per_step = r["grad_accum"] * r["ranks"] * 2 * tokens
    flat = read_raw(directory, r["files"]["batches"], torch.int32, r["steps"] * per_step)
    return flat.long().view(r["steps"], r["grad_accum"], r["ranks"], 2, r["micro_batch"],
                            w["seq_len"])


def static_bytes(model, opt):
    """What PyTorch holds for the model states of one replica, in bytes."""
    import torch
    size = lambda t: t.numel() * t.element_size()  # noqa: E731
    params = list(model.parameters())
    states = [(key, t) for state in opt.state.values() for key, t in state.items()
              if torch.is_tensor(t)]
    return {"weights": sum(size(p) for p in params),
            "gradients": sum(size(p.grad) for p in params if p.grad is not None),
            "optimizer_states": sum(size(t) for key, t in states if key != "step"),
            "optimizer_step_counters": sum(size(t) for key, t in states if key == "step")}


def static_memory(r, torch_bytes):
    """dtplan-run's weights, gradients and optimizer states on rank 0 against PyTorch's.

    PyTorch's DDP replica holds every tensor whole. dtplan-run pads each unit to a multiple of
    the ranks (every rank owns an equal slice) and shards as its strategy runs: ZeRO-1 the
    optimizer states, ZeRO-2 the gradients too, ZeRO-3 the weights too (DP keeps the states on
    rank 0, which is the rank measured). torch.optim keeps a step counter per tensor (a
    float32 scalar in PyTorch 1.x) where dtplan-run keeps one per run; it is reported apart.
    """
    ranks = r["ranks"]
    padded = sum(-(-u["params"] // ranks) * ranks for u in r["units"])
    total = sum(u["params"] for u in r["units"])
    mode = r.get("runtime_mode", "ddp")
    shards = {"weights": mode == "zero3", "gradients": mode in ("zero2", "zero3"),
              "optimizer_states": mode in ("zero1", "zero2", "zero3")}
    rows = {}
    for name, sharded in shards.items():
        ours = r["memory"][name]
        theirs = torch_bytes[name]
        # PyTorch's bytes per parameter, over dtplan-run's padded elements and shard.
        per_param = theirs / total if total else 0
        expected = per_param * padded / (ranks if sharded else 1)
        rows[name] = {"dtplan": ours, "torch": theirs, "expected": expected,
                      "agree": abs(ours - expected) < 0.5}
    rows["torch_step_counters"] = torch_bytes["optimizer_step_counters"]
    return rows


def train(rank, r, directory, init_file, out_path, compute):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    world = r["ranks"]
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    model = build_model(r)
    total = sum(u["params"] for u in r["units"])
    model.load_flat(read_raw(directory, r["files"]["initial"], torch.float32, total), r["units"])
    ddp = DDP(model)
    opt = make_optimizer(r, ddp.parameters())
    data = batches_of(r, directory)
    accum = r["grad_accum"]
    global_tokens = r["micro_batch"] * accum * world * r["workload"]["seq_len"]
    losses = []

    def forward(ids, targets, masks):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=compute == "bf16"):
            return ddp(ids, targets, masks)

    for step in range(r["steps"]):
        summed = torch.zeros(1, dtype=torch.float64)
        for micro in range(accum):
            ids, targets = data[step, micro, rank, 0], data[step, micro, rank, 1]
            # Trainer::micro_step's sample numbering.
            masks = dropout_masks(r, step, (micro * world + rank) * r["micro_batch"])
            last = micro == accum - 1
            # Each rank's loss is its tokens' mean over the step; DDP averages over ranks.
            scale = r["micro_batch"] * accum * r["workload"]["seq_len"]
            if r["no_sync"] and not last:
                with ddp.no_sync():
                    loss = forward(ids, targets, masks)
                    (loss / scale).backward()
            else:
                loss = forward(ids, targets, masks)
                (loss / scale).backward()
            summed += loss.detach().double()
        dist.all_reduce(summed)
        losses.append(summed.item() / global_tokens)
        if r["max_grad_norm"] > 0:
            torch.nn.utils.clip_grad_norm_(ddp.parameters(), r["max_grad_norm"])
        opt.step()
        opt.zero_grad(set_to_none=False)
    if rank == 0:
        torch.save({"final": model.flat(), "losses": losses, "memory": static_bytes(model, opt)},
                   out_path)
    # DDP's reducer holds the process group: release it first (destroying the group under a
    # live reducer can leave a rank waiting forever at exit).
    del opt, ddp
    dist.barrier()
    dist.destroy_process_group()


def relative(a, b):
    return (a - b).norm().item() / b.norm().item() if b.norm().item() > 0 else float("inf")


def compare(r, directory, result, fp32_result=None):
    import torch
    total = sum(u["params"] for u in r["units"])
    initial = read_raw(directory, r["files"]["initial"], torch.float32, total).double()
    ours = read_raw(directory, r["files"]["final"], torch.float32, total).double()
    theirs = result["final"].double()
    moved = (theirs - initial).norm().item()
    weight_error = (ours - theirs).norm().item() / moved if moved > 0 else float("inf")
    loss_errors = [abs(a - b) / abs(b) for a, b in zip(r["losses"], result["losses"])]
    bf16 = fp32_result is not None
    report = {
        "workload": r["workload"],
        "strategy": r["strategy"],
        "ranks": r["ranks"],
        "steps": r["steps"],
        "parameters": total,
        "torch": torch.__version__,
        "compute": r["workload"].get("compute", "fp32"),
        "fp32_summed_bf16_products": fp32_summed_bf16_products(),
        "losses": {"dtplan": r["losses"], "torch": result["losses"],
                   "max_relative_error": max(loss_errors),
                   "tolerance": BF16_LOSS_TOLERANCE if bf16 else LOSS_TOLERANCE},
        "weights": {"relative_error": weight_error, "tolerance": WEIGHT_TOLERANCE,
                    "max_abs_difference": (ours - theirs).abs().max().item(),
                    "moved_norm": moved},
    }
    if "memory" in r:
        report["static_memory"] = static_memory(r, result["memory"])
    if bf16:
        # One SGD step at learning rate lr: each run's gradient is (initial - final) / lr.
        lr = r["lr"]
        g_ours, g_bf16 = (initial - ours) / lr, (initial - theirs) / lr
        g_fp32 = (initial - fp32_result["final"].double()) / lr
        def agreeing(g):
            return ((g - g_bf16).abs() <= ELEMENT_AGREEMENT * g_bf16.abs()).double().mean().item()

        report["gradients"] = {"agreeing_share": agreeing(g_ours),
                               "torch_fp32_agreeing_share": agreeing(g_fp32),
                               "element_tolerance": ELEMENT_AGREEMENT,
                               "required_share": BF16_AGREEING_SHARE,
                               "dtplan_vs_torch_bf16": relative(g_ours, g_bf16),
                               "torch_fp32_vs_torch_bf16": relative(g_fp32, g_bf16)}
        report["losses"]["torch_fp32"] = fp32_result["losses"]
    return report


def within_tolerance(report):
    loss_ok = report["losses"]["max_relative_error"] <= report["losses"]["tolerance"]
    memory = report.get("static_memory", {})
    loss_ok = loss_ok and all(row["agree"] for row in memory.values() if isinstance(row, dict))
    if "gradients" in report:
        return loss_ok and report["gradients"]["agreeing_share"] >= BF16_AGREEING_SHARE
    return loss_ok and report["weights"]["relative_error"] <= WEIGHT_TOLERANCE


def run_torch(r, directory, tmp, compute):
    import torch
    import torch.multiprocessing as mp
    out = os.path.join(tmp, f"result-{compute}.pt")
    mp.spawn(train, args=(r, directory, os.path.join(tmp, f"rendezvous-{compute}"), out, compute),
             nprocs=r["ranks"], join=True)
    return torch.load(out)


def print_report(r, report):
    import torch
    print(f"torch_replay: {r['strategy']} on {r['ranks']} ranks, {r['steps']} steps, "
          f"{report['parameters']} parameters, {report['compute']}, PyTorch {torch.__version__} "
          "(DDP over gloo)")
    split = []
    if r.get("tensor_parallel", 1) > 1:
        split.append(f"each block over {r['tensor_parallel']} tensor-parallel ranks")
    if r.get("pipeline_stages", 1) > 1:
        split.append(f"the blocks over {r['pipeline_stages']} pipeline stages")
    if split:
        print(f"  dtplan-run split {' and '.join(split)}; PyTorch trains the whole model "
              "(static memory: rank 0's part, not compared)")
    if report["compute"] == "bf16" and not report["fp32_summed_bf16_products"]:
        print("  this PyTorch's CPU bf16 matrix products do not sum in fp32: the replay computes "
              "them as fp32 products of the bf16 values, rounded once (as cuBLAS does)")
    for i, (a, b) in enumerate(zip(report["losses"]["dtplan"], report["losses"]["torch"])):
        print(f"  step {i}: loss dtplan {a:.7f}, torch {b:.7f}")
    print(f"  loss: largest relative difference {report['losses']['max_relative_error']:.2e} "
          f"(tolerance {report['losses']['tolerance']:.0e})")
    w = report["weights"]
    if "gradients" in report:
        g = report["gradients"]
        print(f"  gradient: {100 * g['agreeing_share']:.1f}% of elements within "
              f"{ELEMENT_AGREEMENT:.0e} of PyTorch's bf16 gradient (at least "
              f"{100 * BF16_AGREEING_SHARE:.0f}% required; PyTorch's own fp32 gradient: "
              f"{100 * g['torch_fp32_agreeing_share']:.1f}%); ||dtplan - torch bf16|| / ||torch "
              f"bf16|| = {g['dtplan_vs_torch_bf16']:.2e}, fp32 vs bf16 "
              f"{g['torch_fp32_vs_torch_bf16']:.2e}")
    else:
        print(f"  weights: ||dtplan - torch|| / ||torch - initial|| = {w['relative_error']:.2e} "
              f"(tolerance {WEIGHT_TOLERANCE:.0e}); largest element difference "
              f"{w['max_abs_difference']:.2e}")
    memory = report.get("static_memory")
    if memory:
        parts = []
        for name in ("weights", "gradients", "optimizer_states"):
            row = memory[name]
            parts.append(f"{name} {row['dtplan']} B (PyTorch {row['torch']} B, expected "
                         f"{row['expected']:.0f}{'' if row['agree'] else ' MISMATCH'})")
        print("  static memory, rank 0: " + "; ".join(parts) + f"; PyTorch's per-tensor step "
              f"counters {memory['torch_step_counters']} B apart")
    print("  " + ("agree" if report["within_tolerance"] else "DISAGREE"))


def main(argv):
    args = parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        fail_input(f"{sys.executable} cannot import torch (install Debian's python3-torch and "
                   "run this with /usr/bin/python3)")
    r = load_dump(args.dump)
    compute = r["workload"].get("compute", "fp32")
    with tempfile.TemporaryDirectory(prefix="torch-replay-") as tmp:
        result = run_torch(r, args.dump, tmp, compute)
        fp32_result = run_torch(r, args.dump, tmp, "fp32") if compute == "bf16" else None
        report = compare(r, args.dump, result, fp32_result)
    report["within_tolerance"] = within_tolerance(report)
    print_report(r, report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0 if report["within_tolerance"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
