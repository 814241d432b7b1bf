#!/usr/bin/env python3
"""Train a dtplan model file in plain PyTorch and record what PyTorch reports.

This is the ground truth dtplan's memory and step-time predictions are checked
against (issue 19): the model is built from the `hf_config` of a dtplan model
file (data/models/*.json) with Hugging Face transformers, trained for a few
steps under one strategy (plain, DDP or FSDP2 on one process), and the figures
PyTorch itself reports are written as one JSON object per run:

  bytes of parameters, gradients and optimizer state; DDP's bucket sizes;
  torch.cuda.max_memory_allocated / max_memory_reserved (on a GPU); the time of
  each step; the library versions and the device.

Usage (one run per process, so the caching allocator starts empty):
  tools/torch_reference.py --model data/models/gpt2.json --strategy ddp \
      --precision bf16 --micro-batch 8 --seq-len 1024 --steps 5 --out run.json
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

STRATEGIES = ("none", "ddp", "fsdp2")
PRECISIONS = ("fp32", "bf16")
OPTIMIZERS = ("foreach", "fused", "for-loop")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="dtplan model file (JSON with hf_config)")
    p.add_argument("--strategy", default="ddp", choices=STRATEGIES)
    p.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="fp32, or bf16 (autocast under DDP/none, MixedPrecisionPolicy under FSDP2)")
    p.add_argument("--checkpointing", action="store_true", help="full activation checkpointing per layer")
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step (no_sync under DDP)")
    p.add_argument("--steps", type=int, default=5, help="measured optimizer steps")
    p.add_argument("--warmup", type=int, default=2, help="optimizer steps before measuring")
    p.add_argument("--optimizer", default="foreach", choices=OPTIMIZERS, help="AdamW implementation")
    p.add_argument("--dropout", choices=("config", "off"), default="config",
                   help="keep the model file's dropout rates, or set them to zero")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--out", help="write the JSON object here (default: stdout)")
    args = p.parse_args(argv)
    for name in ("micro_batch", "seq_len", "accum", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: must be at least 1, got {getattr(args, name)}")
    if args.warmup < 0:
        p.error(f"--warmup: must be 0 or more, got {args.warmup}")
    return args


def load_hf_config(path, dropout):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise SystemExit(f"--model: {path}: {e}")
    cfg = doc.get("hf_config")
    if not isinstance(cfg, dict) or "model_type" not in cfg:
        raise SystemExit(f"--model: {path}: no hf_config with a model_type")
    cfg = {k: v for k, v in cfg.items() if v is not None}
    if dropout == "off":
        for k in list(cfg):
            if k.endswith("pdrop") or k.endswith("dropout"):
                cfg[k] = 0.0
    return doc.get("name", os.path.basename(path)), cfg


def build_model(torch, hf_cfg, device):
    from transformers import AutoConfig, AutoModelForCausalLM
    kind = hf_cfg.pop("model_type")
    config = AutoConfig.for_model(kind, **hf_cfg)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    return model, config


def init_process_group(torch, device):
    import torch.distributed as dist
    if dist.is_initialized():  # a second wrapped model in one process (tools/torch_profile.py)
        return dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    backend = "nccl" if device == "cuda" else "gloo"
    dist.init_process_group(backend, rank=0, world_size=1)
    return dist


def wrap(torch, model, args):
    """Apply the strategy; returns (module to call, autocast dtype or None, extra facts)."""
    bf16 = args.precision == "bf16"
    if args.strategy == "none":
        return model, (torch.bfloat16 if bf16 else None), {}
    init_process_group(torch, args.device)
    if args.strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        ids = [0] if args.device == "cuda" else None
        ddp = DDP(model, device_ids=ids)
        return ddp, (torch.bfloat16 if bf16 else None), {"bucket_cap_mb": 25}
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 \
        else MixedPrecisionPolicy()
    blocks = decoder_blocks(model)
    for block in blocks:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model, None, {"fsdp_units": len(blocks) + 1}


def decoder_blocks(model):
    base = getattr(model, "transformer", None) or getattr(model, "model", None)
    for name in ("h", "layers"):
        blocks = getattr(base, name, None)
        if blocks is not None:
            return list(blocks)
    raise SystemExit("--model: cannot find the decoder blocks (expected transformer.h or model.layers)")


def make_optimizer(torch, model, impl):
    kw = {"lr": 1e-4, "weight_decay": 0.01}
    if impl == "fused":
        kw["fused"] = True
    elif impl == "foreach":
        kw["foreach"] = True
    else:
        kw["foreach"] = False
    return torch.optim.AdamW(model.parameters(), **kw)


def tensor_bytes(t):
    if hasattr(t, "to_local"):
        t = t.to_local()
    return t.numel() * t.element_size()


def state_bytes(model, optimizer):
    params = sum(tensor_bytes(p) for p in model.parameters())
    grads = sum(tensor_bytes(p.grad) for p in model.parameters() if p.grad is not None)
    opt = 0
    for st in optimizer.state.values():
        for v in st.values():
            if hasattr(v, "numel") and hasattr(v, "element_size"):
                opt += tensor_bytes(v)
    return {"parameter_bytes": params, "gradient_bytes": grads, "optimizer_state_bytes": opt}


def ddp_buckets(module):
    get = getattr(module, "_get_ddp_logging_data", None)
    if get is None:
        return None
    data = get()
    sizes = data.get("bucket_sizes")
    if isinstance(sizes, str):
        sizes = [int(s) for s in sizes.split(",") if s.strip()]
    return {"bucket_sizes_bytes": sizes, "bucket_cap_bytes": data.get("bucket_cap_bytes")}


class Sync:
    def __init__(self, torch, device):
        self.torch, self.cuda = torch, device == "cuda"

    def __call__(self):
        if self.cuda:
            self.torch.cuda.synchronize()


def micro_step(torch, module, batch, autocast_dtype, device, accum):
    ctx = torch.autocast(device_type=device, dtype=autocast_dtype) if autocast_dtype \
        else torch.autocast(device_type=device, enabled=False)
    with ctx:
        loss = module(input_ids=batch, labels=batch).loss / accum
    loss.backward()
    return loss.detach()


def optimizer_step(torch, module, optimizer, batches, autocast_dtype, args):
    losses = []
    for i, batch in enumerate(batches):
        last = i == len(batches) - 1
        if args.strategy == "ddp" and not last:
            with module.no_sync():
                losses.append(micro_step(torch, module, batch, autocast_dtype, args.device, args.accum))
        else:
            if args.strategy == "fsdp2":
                module.set_requires_gradient_sync(last)
            losses.append(micro_step(torch, module, batch, autocast_dtype, args.device, args.accum))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(sum(l.float() for l in losses))


def memory_now(torch, device):
    if device != "cuda":
        return {}
    return {"allocated_bytes": torch.cuda.memory_allocated(), "reserved_bytes": torch.cuda.memory_reserved(),
            "max_allocated_bytes": torch.cuda.max_memory_allocated(),
            "max_reserved_bytes": torch.cuda.max_memory_reserved()}


def environment(torch, device):
    env = {"python": platform.python_version(), "torch": torch.__version__, "host": platform.node(),
           "cpu_threads": torch.get_num_threads()}
    import transformers
    env["transformers"] = transformers.__version__
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        env.update({"gpu": p.name, "gpu_memory_bytes": p.total_memory, "sm_count": p.multi_processor_count,
                    "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                    "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                    "tf32_matmul": torch.backends.cuda.matmul.allow_tf32})
    return env


def run(args):
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is visible to PyTorch")
    torch.manual_seed(args.seed)
    name, hf_cfg = load_hf_config(args.model, args.dropout)
    model, config = build_model(torch, dict(hf_cfg), args.device)
    if args.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    module, autocast_dtype, facts = wrap(torch, model, args)
    optimizer = make_optimizer(torch, model, args.optimizer)
    sync = Sync(torch, args.device)
    vocab = config.vocab_size
    gen = torch.Generator(device=args.device).manual_seed(args.seed)

    def batches():
        return [torch.randint(0, vocab, (args.micro_batch, args.seq_len), device=args.device, generator=gen)
                for _ in range(args.accum)]

    after_build = memory_now(torch, args.device)
    record = {"model": name, "model_file": args.model, "parameters": n_params, "strategy": args.strategy,
              "precision": args.precision, "checkpointing": args.checkpointing, "micro_batch": args.micro_batch,
              "seq_len": args.seq_len, "accum": args.accum, "optimizer": "AdamW/" + args.optimizer,
              "dropout": args.dropout, "attn_implementation": getattr(config, "_attn_implementation", None),
              "world_size": 1, **facts}
    step_s, losses = [], []
    for step in range(args.warmup + args.steps):
        data = batches()
        sync()
        t0 = time.perf_counter()
        losses.append(optimizer_step(torch, module, optimizer, data, autocast_dtype, args))
        sync()
        if step >= args.warmup:
            step_s.append(time.perf_counter() - t0)
        if step == 0:
            record["memory_after_first_step"] = memory_now(torch, args.device)
    record["memory_after_build"] = after_build
    record["memory"] = memory_now(torch, args.device)
    if args.device == "cuda":
        stats = torch.cuda.memory_stats()
        record["allocator"] = {k: stats.get(k) for k in ("num_alloc_retries", "num_ooms", "num_device_alloc")}
    # gradients are freed by zero_grad; one more backward to count them
    data = batches()
    micro_step(torch, module, data[0], autocast_dtype, args.device, 1)
    record["states"] = state_bytes(model, optimizer)
    if args.strategy == "ddp":
        record["ddp"] = ddp_buckets(module)
    tokens = args.micro_batch * args.seq_len * args.accum
    record.update({"step_s": step_s, "step_s_median": statistics.median(step_s),
                   "tokens_per_s": tokens / statistics.median(step_s), "losses": losses,
                   "env": environment(torch, args.device),
                   "taken_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return record


def main(argv):
    args = parse_args(argv)
    try:
        record = run(args)
    except RuntimeError as e:
        msg = str(e)
        if "out of memory" not in msg.lower():
            raise
        record = {"model_file": args.model, "strategy": args.strategy, "precision": args.precision,
                  "checkpointing": args.checkpointing, "micro_batch": args.micro_batch, "seq_len": args.seq_len,
                  "error": "out of memory", "detail": msg.splitlines()[0]}
    text = json.dumps(record)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    except ImportError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
