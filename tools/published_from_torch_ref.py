#!/usr/bin/env python3
"""Write the training runs of tools/torch_reference.py as a measured source for
`dtplan accuracy --published`: one step row (median step time) and two memory rows (PyTorch's
peak allocated and reserved bytes) per run.

    tools/published_from_torch_ref.py data/measurements/h100-torch \
        --gpu H100-SXM --id dtplan-h100-torch > data/published/measured-dtplan-h100-torch.json

The folder holds torch-ref.jsonl, env.txt and the README that says how the runs were taken.
With --profile FILE (repeatable) the runs are instead tools/torch_profile.py's cases
(profile.jsonl, relative to the folder), written the same way; --fitted-on marks a source a
constant of data/compute.json was fitted on (accuracy then keeps its rows out of the held-out
figures):

    tools/published_from_torch_ref.py data/measurements/h200-cuda --gpu H200 \
        --id dtplan-h200-cuda --fitted-on --profile call1/profile/profile.jsonl \
        --profile call2/bare-fsdp2/profile.jsonl --profile call3/bare-fsdp2/profile.jsonl
Every run is a Hugging Face model in eager mode, so every row says "layer-kernels": "eager":
under autocast (DDP with bf16) an fp32 residual stream; under FSDP2 with bf16 its
MixedPrecisionPolicy makes the parameters bf16 and every tensor is bf16; fp32 is fp32
throughout.
"""
import argparse
import json
import sys
from pathlib import Path

OPTIMIZER_IMPL = {"AdamW/foreach": "foreach", "AdamW/fused": "fused", "AdamW/for-loop": "for-loop"}


def run_id(r):
    parts = [r["model"], r["strategy"], r["precision"], "ckpt" if r["checkpointing"] else "nockpt",
             f"mb{r['micro_batch']}"]
    if r["accum"] != 1:
        parts.append(f"accum{r['accum']}")
    impl = r["optimizer"].split("/")[-1]
    if impl != "foreach":
        parts.append(impl)
    return "-".join(parts)


def config_of(r, gpu):
    bf16 = r["precision"] == "bf16"
    c = {
        "model": r["model"],
        "seq-len": r["seq_len"],
        "global-batch": r["micro_batch"] * r["accum"] * r["world_size"],
        "micro-batch": r["micro_batch"],
        "grad-accum": r["accum"],
        "gpus": r["world_size"],
        "nodes": 1,
        "gpu": gpu,
        "topology": "dgx-h100",
        "strategy": "fsdp-full" if r["strategy"] == "fsdp2" else "ddp",
        "precision": ("bf16" if r["strategy"] == "fsdp2" else "amp-bf16") if bf16 else "fp32",
        "checkpointing": "full" if r["checkpointing"] else "none",
        "attention": "flash",
        "optimizer": "adamw",
        "optimizer-impl": OPTIMIZER_IMPL[r["optimizer"]],
        "layer-kernels": "eager",
    }
    return c


def expressibility(r):
    if r["attn_implementation"] != "sdpa":
        return False, ["attention:" + r["attn_implementation"]]
    return True, []


def notes_of(r):
    how = {
        "ddp": "DistributedDataParallel over one process",
        "none": "the bare module, no wrapper (written as ddp on one GPU: no gradient traffic)",
        "fsdp2": "FSDP2 fully_shard over one process",
    }[r["strategy"]]
    prec = ("fp32" if r["precision"] == "fp32" else
            "bf16 torch.autocast" if r["strategy"] != "fsdp2" else
            "bf16 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)")
    return (f"Hugging Face transformers {r['env'].get('transformers', '?')} model in eager mode, "
            f"attn_implementation {r['attn_implementation']}, {how}, {prec}, "
            f"{r['optimizer']}, dropout as the model config has it; torch "
            f"{r['env'].get('torch', '?')}. Step: the median of {len(r['step_s'])} timed steps "
            f"after warm-up.")


def rows_of(r, gpu, where):
    ok, needs = expressibility(r)
    base = {
        "where": where,
        "hardware": {"gpu": gpu, "gpus": r["world_size"], "gpus_per_node": 8,
                     "topology": "one GPU of an 8-GPU NVLink host", "network": "n/a (one GPU)"},
        "config": config_of(r, gpu),
        "expressible": ok,
    }
    if needs:
        base["needs"] = needs
    rid = run_id(r)
    step = dict(base, id=rid + "-step", family="step",
                measured={"metric": "step_s", "value": round(r["step_s_median"], 6),
                          "unit": "s per optimizer step, median"},
                notes=notes_of(r))
    out = [step]
    mem = r["memory"]
    for metric, key in (("peak_allocated_GiB", "max_allocated_bytes"),
                        ("peak_reserved_GiB", "max_reserved_bytes")):
        out.append(dict(base, id=f"{rid}-{metric.split('_')[1]}", family="memory",
                        measured={"metric": metric, "value": round(mem[key] / 2**30, 3),
                                  "unit": f"GiB, torch.cuda.memory_stats {key} over the run"},
                        notes=notes_of(r)))
    return out


def run_of_profile_case(r):
    """A torch_profile.py record in the shape of a torch_reference.py run (one GPU, no
    accumulation; `none` is the bare module)."""
    c = r["case"]
    if c.get("layers"):
        raise ValueError(f"{c['model']}: cut to {c['layers']} layers, not the model file's")
    return {
        "model": c["model"], "strategy": c["strategy"], "precision": c["precision"],
        "checkpointing": bool(c["checkpointing"]), "micro_batch": c["micro_batch"],
        "seq_len": c["seq_len"], "accum": 1, "optimizer": "AdamW/" + c["optimizer"],
        "attn_implementation": r["attn_implementation"], "world_size": 1,
        "step_s": [ms / 1e3 for ms in r["step_ms"]], "step_s_median": r["step_ms_median"] / 1e3,
        "memory": r["memory"], "env": r["env"], "taken_utc": r["taken_utc"],
    }


def read_runs(folder, profiles):
    """[(run, where)] from torch-ref.jsonl, or from the profile.jsonl files named."""
    paths = [folder / p for p in profiles] if profiles else [folder / "torch-ref.jsonl"]
    runs = []
    for path in paths:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        for i, line in enumerate(lines, 1):
            r = json.loads(line)
            runs.append((run_of_profile_case(r) if profiles else r, f"{path.as_posix()}, line {i}"))
    if not runs:
        sys.exit(f"{', '.join(p.as_posix() for p in paths)}: no runs")
    return runs


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a data/measurements folder with torch-ref.jsonl")
    ap.add_argument("--gpu", required=True, help="dtplan's name of the GPU the runs used")
    ap.add_argument("--id", required=True, help="the source id")
    ap.add_argument("--profile", action="append", default=[],
                    help="a tools/torch_profile.py profile.jsonl in the folder (repeatable)")
    ap.add_argument("--fitted-on", action="store_true",
                    help="a constant of data/compute.json was fitted on these runs")
    args = ap.parse_args(argv)
    runs = read_runs(args.folder, args.profile)
    rows = []
    seen = {}
    for r, where in runs:
        for row in rows_of(r, args.gpu, where):
            # A case repeated in a later call keeps its id apart: "-2", "-3", ...
            n = seen[row["id"]] = seen.get(row["id"], 0) + 1
            if n > 1:
                row["id"] += f"-{n}"
            rows.append(row)
    env = runs[0][0]["env"]
    out = {
        "schema_version": 1,
        "source": {
            "id": args.id,
            "title": f"dtplan's own PyTorch reference runs on one {env.get('gpu', args.gpu)} "
                     f"({args.folder.as_posix()}/README.md)",
            "authors": "dtplan",
            "year": int(runs[0][0]["taken_utc"][:4]),
            "url": f"{args.folder.as_posix()}/README.md",
            "kind": "measurement",
        },
        "fitted_on": args.fitted_on,
        "rows": rows,
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
