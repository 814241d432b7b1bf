// The layout flags (see layout_options.hpp).
#include "layout_options.hpp"

#include <charconv>
#include <cstdint>

namespace dtplan::cli {

CLI::Validator bucket_size_check() {
  return CLI::Validator(
      [](const std::string& v) -> std::string {
        std::int64_t n = 0;
        const auto* end = v.data() + v.size();
        const auto [at, ec] = std::from_chars(v.data(), end, n);
        if (ec != std::errc() || at != end)
          return v + ": a whole number of parameters, e.g. 134217728";
        if (n < 1 || n > (std::int64_t{1} << 50)) return v + ": from 1 to 2^50 parameters";
        return {};
      },
      "PARAMETERS");
}

void add_layout_options(CLI::App& cmd, LayoutOptions& o) {
  cmd.add_option("--tp", o.tp, "tensor-parallel size (a layout: dp = GPUs / (tp x cp x pp))")
      ->capture_default_str();
  cmd.add_option("--pp", o.pp, "pipeline-parallel stages")->capture_default_str();
  cmd.add_option("--cp", o.cp,
                 "context-parallel size: ranks that share each sequence (dp = GPUs / (tp x cp "
                 "x pp))")
      ->capture_default_str();
  cmd.add_option("--ep", o.ep,
                 "expert-parallel size: ranks the routed experts are spread over (a mixture of "
                 "experts; etp x ep divides tp x cp x dp)")
      ->capture_default_str();
  cmd.add_option("--etp", o.etp,
                 "expert tensor-parallel size: ways each expert is split (default 0: --tp)")
      ->capture_default_str();
  cmd.add_option("--capacity-factor", o.capacity_factor,
                 "experts' capacity over their balanced share of the routed tokens, inputs "
                 "padded to it (Megatron-LM's --moe-expert-capacity-factor with "
                 "--moe-pad-expert-input-to-capacity); default 0: dropless, balanced routing")
      ->capture_default_str();
  cmd.add_flag("--overlap-ep-comm", o.overlap_ep_comm,
               "hide the experts' all-to-alls behind the compute of the adjacent micro-batch "
               "(Megatron-LM's --overlap-moe-expert-parallel-comm --delay-wgrad-compute; "
               "needs --ep > 1, and --interleave > 1 with --pp > 1)");
  cmd.add_flag("--deepep", o.deepep,
               "dispatch tokens with DeepEP: across nodes once per node holding a token's "
               "experts, then over NVLink (Megatron-LM's --moe-token-dispatcher-type flex "
               "--moe-flex-dispatcher-backend deepep)");
  cmd.add_flag("--overlap-grad-reduce", o.overlap_grad_reduce,
               "reduce the gradients bucket by bucket alongside the last micro-batch's backward "
               "(Megatron-LM's --overlap-grad-reduce; default: after it, as Megatron-LM does)");
  cmd.add_flag("--overlap-param-gather", o.overlap_param_gather,
               "gather the updated weights bucket by bucket alongside the next forward "
               "(Megatron-LM's --overlap-param-gather; needs the distributed optimizer, and "
               "--overlap-grad-reduce for buckets: without it one gather the forward waits on)");
  cmd.add_option("--ddp-bucket-size", o.ddp_bucket_size,
                 "parameters per overlapped gradient bucket (Megatron-LM's --ddp-bucket-size; "
                 "needs --overlap-grad-reduce; default: Megatron-LM's max(40M, 1M x dp x cp))")
      ->check(bucket_size_check());
  cmd.add_flag("--grad-reduce-in-bf16", o.grad_reduce_in_bf16,
               "keep, accumulate and reduce the main gradients in bf16 instead of fp32 "
               "(Megatron-LM's --grad-reduce-in-bf16; NeMo 1.x's grad_sync_dtype bf16)");
  cmd.add_flag("--tp-comm-overlap", o.tp_comm_overlap,
               "overlap each Linear's tensor-parallel all-gather or reduce-scatter with its "
               "own GEMM, chunk by chunk (Megatron-LM's --tp-comm-overlap: Transformer "
               "Engine's userbuffers; needs --sp)");
  cmd.add_flag("--fp8-param-gather", o.fp8_param_gather,
               "with --fp8-recipe and the distributed optimizer: keep the blocks' Linear "
               "weights as FP8 tensors only and gather them in FP8 (Megatron-LM's "
               "--fp8-param-gather)");
  cmd.add_option("--recompute-modules", o.recompute_modules,
                 "with --checkpointing selective, the parts of each block rebuilt in backward "
                 "(Megatron-LM's --recompute-modules): comma-separated from core_attn, "
                 "layernorm, mla_up_proj, mlp, moe_act, moe, shared_experts, or none (default: "
                 "core_attn)")
      // An empty value would read as "not given" (the default set): refused instead.
      ->check(CLI::Validator(
          [](const std::string& v) {
            return v.empty() ? std::string(
                                   "an empty list: name the modules (e.g. "
                                   "core_attn,mlp), or none to recompute nothing")
                             : std::string();
          },
          "MODULES"));
  cmd.add_option("--cp-comm", o.cp_comm,
                 "context-parallel K/V exchange: p2p (ring attention)|all_gather|a2a (Ulysses)")
      ->capture_default_str();
  cmd.add_option("--interleave", o.interleave, "model chunks per GPU (interleaved 1F1B)")
      ->capture_default_str();
  cmd.add_flag("--sp", o.sequence_parallel, "sequence parallelism (needs --tp > 1)");
  cmd.add_option("--pp-layers", o.pp_layers,
                 "layers of each pipeline stage, first to last, e.g. 7,8,8,7 (default: even, "
                 "or one fewer on the first and last stage as Megatron-LM splits)")
      ->delimiter(',');
  cmd.add_option("--schedule", o.schedule,
                 "pipeline schedule: 1f1b|interleaved|gpipe|zb-h1|zb-h2|zbv (default: 1f1b, "
                 "interleaved with --interleave > 1)");
  cmd.add_option("--framework", o.framework,
                 "who runs the layout: megatron (distributed optimizer, the default) or fsdp2 "
                 "(torchtitan: FSDP2 per block); also --strategy megatron|fsdp2");
  cmd.add_option(
      "--sharding", o.sharding,
      "model states sharded over dp x cp: none|optimizer|gradients|parameters "
      "(default: optimizer under megatron; parameters under fsdp2, gradients with --pp > 1 "
      "as torchtitan does)");
  cmd.add_option("--dp-shard", o.dp_shard,
                 "ranks each state is sharded over (hybrid sharding; default: all dp x cp)");
}

}  // namespace dtplan::cli
