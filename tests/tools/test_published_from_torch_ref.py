#!/usr/bin/env python3
"""Tests of tools/published_from_torch_ref.py: a torch_reference run becomes a step row and two
memory rows in dtplan's terms, every one with eager layer kernels.
Figures are worked out by hand below."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))
import published_from_torch_ref as pub  # noqa: E402


def run(strategy="ddp", precision="bf16", checkpointing=False, accum=1, optimizer="AdamW/foreach"):
    return {"model": "gpt2", "strategy": strategy, "precision": precision,
            "checkpointing": checkpointing, "micro_batch": 8, "seq_len": 1024, "accum": accum,
            "optimizer": optimizer, "attn_implementation": "sdpa", "world_size": 1,
            "memory": {"max_allocated_bytes": 3 * 2**30, "max_reserved_bytes": 2**32},
            "step_s": [0.1, 0.3, 0.2], "step_s_median": 0.2,
            "env": {"torch": "2.11.0", "transformers": "5.17.0", "gpu": "NVIDIA H100"},
            "taken_utc": "2026-11-24T20:23:55Z"}


class Rows(unittest.TestCase):
    def test_ddp_autocast_run(self):
        rows = pub.rows_of(run(accum=4), "H100-SXM", "torch-ref.jsonl, line 1")
        self.assertEqual([r["family"] for r in rows], ["step", "memory", "memory"])
        step, alloc, reserved = rows
        self.assertEqual(step["id"], "gpt2-ddp-bf16-nockpt-mb8-accum4-step")
        c = step["config"]
        self.assertEqual((c["precision"], c["strategy"], c["global-batch"], c["grad-accum"]),
                         ("amp-bf16", "ddp", 32, 4))  # 8 samples x 4 micro-steps x 1 GPU
        self.assertEqual(step["measured"], {"metric": "step_s", "value": 0.2,
                                            "unit": "s per optimizer step, median"})
        self.assertEqual(alloc["measured"]["value"], 3.0)  # 3 GiB
        self.assertEqual(reserved["measured"]["value"], 4.0)  # 2^32 bytes
        self.assertTrue(all(r["expressible"] for r in rows))

    def test_every_run_is_eager_fsdp2_bf16_without_autocast(self):
        # FSDP2's MixedPrecisionPolicy: bf16 parameters, no autocast; DDP: autocast.
        bf16 = pub.rows_of(run(strategy="fsdp2"), "H100-SXM", "x")[0]
        self.assertTrue(bf16["expressible"])
        self.assertNotIn("needs", bf16)
        self.assertEqual((bf16["config"]["precision"], bf16["config"]["layer-kernels"]),
                         ("bf16", "eager"))
        ddp = pub.rows_of(run(), "H100-SXM", "x")[0]
        self.assertEqual((ddp["config"]["precision"], ddp["config"]["layer-kernels"]),
                         ("amp-bf16", "eager"))
        fp32 = pub.rows_of(run(strategy="fsdp2", precision="fp32", checkpointing=True),
                           "H100-SXM", "x")[0]
        self.assertTrue(fp32["expressible"])
        self.assertEqual((fp32["config"]["strategy"], fp32["config"]["checkpointing"],
                          fp32["config"]["layer-kernels"]), ("fsdp-full", "full", "eager"))

    def test_optimizer_implementations(self):
        # Each as dtplan names it (a for-loop step: foreach's passes, one tensor's temporaries).
        for name, impl in (("AdamW/fused", "fused"), ("AdamW/for-loop", "for-loop")):
            row = pub.rows_of(run(optimizer=name), "H100-SXM", "x")[0]
            self.assertEqual(row["config"]["optimizer-impl"], impl)

    def test_command_line_writes_a_source(self):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "torch-ref.jsonl").write_text(json.dumps(run()) + "\n")
            out = subprocess.run([sys.executable, str(TOOLS / "published_from_torch_ref.py"), d,
                                  "--gpu", "H100-SXM", "--id", "test-src"],
                                 check=True, capture_output=True, text=True).stdout
            src = json.loads(out)
            self.assertEqual(src["source"]["id"], "test-src")
            self.assertEqual(src["source"]["year"], 2026)
            self.assertFalse(src["fitted_on"])
            self.assertEqual(len(src["rows"]), 3)
            Path(d, "torch-ref.jsonl").write_text("")
            empty = subprocess.run([sys.executable, str(TOOLS / "published_from_torch_ref.py"), d,
                                    "--gpu", "H100-SXM", "--id", "x"], capture_output=True, text=True)
            self.assertNotEqual(empty.returncode, 0)
            self.assertIn("no runs", empty.stderr)


if __name__ == "__main__":
    unittest.main()
