#!/usr/bin/env python3
"""Tests of tools/torch_profile.py's trace arithmetic (no PyTorch needed): the union of kernel
intervals, phase attribution by the profiler's annotation ranges, kernel categories by name,
and the checks on --case strings. The expected figures are worked out by hand below."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import torch_profile as tp  # noqa: E402


def kernel(name, ts, dur, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur}


class TraceSummary(unittest.TestCase):
    def test_union_of_overlapping_intervals(self):
        # [0,10) and [5,20) overlap into [0,20); [30,35) stands apart: 20 + 5.
        self.assertEqual(tp.union_us([(30, 35), (0, 10), (5, 20)]), 25)
        self.assertEqual(tp.union_us([]), 0)

    def test_phases_busy_time_launches_and_syncs(self):
        events = [
            {"ph": "X", "cat": "user_annotation", "name": "phase:forward", "ts": 0, "dur": 100},
            {"ph": "X", "cat": "user_annotation", "name": "phase:backward", "ts": 100, "dur": 200},
            kernel("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT", 10, 20),
            kernel("void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>", 25, 20),
            kernel("cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16", 150, 50),
            kernel("Memcpy DtoH (Device -> Pinned)", 210, 5, cat="gpu_memcpy"),
            kernel("cudaLaunchKernel", 5, 4, cat="cuda_runtime"),
            kernel("cudaStreamSynchronize", 205, 4, cat="cuda_runtime"),
        ]
        s = tp.summarise_trace(events)
        fwd, bwd = s["forward"], s["backward"]
        # forward: a GEMM [10,30) and an add [25,45): 40 us of kernels, busy [10,45) = 35 us
        self.assertEqual(fwd["kernel_us"], 40)
        self.assertEqual(fwd["busy_us"], 35)
        self.assertEqual(fwd["by_category_us"], {"gemm": 20, "elementwise": 20})
        self.assertEqual((fwd["launches"], fwd["launch_host_us"], fwd["wall_us"]), (1, 4, 100))
        self.assertEqual(bwd["by_category_us"], {"attention": 50, "gpu_memcpy": 5})
        self.assertEqual((bwd["syncs"], bwd["d2h_copies"], bwd["busy_us"]), (1, 1, 55))
        self.assertEqual(s["optimizer"]["wall_us"], None)  # no annotation for it
        self.assertEqual([k["name"][:5] for k in s["kernels"]], ["cudnn", "nvjet", "void ", "Memcp"])

    def test_categories_of_real_kernel_names(self):
        names = {
            "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1>": "gemm",
            "pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128>>": "attention",
            "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<TensorListMetadata<4>>":
                "optimizer",
            "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>": "norm",
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>": "softmax_loss",
            "void at::native::vectorized_elementwise_kernel<8, bfloat16_copy_kernel_cuda>": "copy_cast",
            "void at::native::vectorized_elementwise_kernel<4, tanh_kernel_cuda>": "elementwise",
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)": "collective",
            "some_new_kernel": "other",
        }
        for name, want in names.items():
            self.assertEqual(tp.category(name), want, name)

    def test_case_strings(self):
        c = tp.parse_case("model=gpt2,precision=fp32,micro_batch=8,layers=2")
        self.assertEqual((c["model"], c["precision"], c["micro_batch"], c["layers"], c["seq_len"]),
                         ("gpt2", "fp32", 8, 2, 1024))
        for bad, says in (("precision=bf16", "model= is required"), ("model=gpt2,mb=8", "unknown key 'mb'"),
                          ("model=gpt2,micro_batch=eight", "micro_batch=eight is not a int"),
                          ("model=gpt2,precision=fp8", "precision must be one of"),
                          ("model=gpt2,strategy=zero3", "strategy must be one of")):
            with self.assertRaises(SystemExit) as e:
                tp.parse_case(bad)
            self.assertIn(says, str(e.exception))

        self.assertEqual(tp.parse_case("model=gpt2")["strategy"], "none")
        self.assertEqual(tp.parse_case("model=gpt2,strategy=fsdp2")["strategy"], "fsdp2")

    def test_fsdp2_annotations_summed_by_name_and_phase(self):
        # Two pre-forward hooks of 5 and 7 us in forward, one post-backward of 11 us in backward;
        # a kernel's time is not an annotation's.
        events = [
            {"ph": "X", "cat": "user_annotation", "name": "phase:forward", "ts": 0, "dur": 100},
            {"ph": "X", "cat": "user_annotation", "name": "phase:backward", "ts": 100, "dur": 100},
            {"ph": "X", "cat": "user_annotation", "name": "FSDP::pre_forward", "ts": 10, "dur": 5},
            {"ph": "X", "cat": "user_annotation", "name": "FSDP::pre_forward", "ts": 20, "dur": 7},
            {"ph": "X", "cat": "user_annotation", "name": "FSDP::post_backward", "ts": 150, "dur": 11},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_ReduceScatter", "ts": 160, "dur": 3},
        ]
        s = tp.summarise_trace(events)
        self.assertEqual(s["forward"]["fsdp_host_us"], {"FSDP::pre_forward": [2, 12.0]})
        self.assertEqual(s["backward"]["fsdp_host_us"], {"FSDP::post_backward": [1, 11.0]})
        self.assertEqual(s["backward"]["by_category_us"], {"collective": 3})
        self.assertEqual(s["optimizer"]["fsdp_host_us"], {})


if __name__ == "__main__":
    unittest.main()
