// Calibration and accuracy configurations (see trial_sets.hpp).
#include "dtplan/runtime/trial_sets.hpp"

namespace dtplan::runtime {
namespace {

RuntimeConfig config(const char* model, double scale, std::int64_t seq, Strategy s,
                     std::int64_t micro, std::int64_t accum, bool no_sync = true,
                     Optimizer o = Optimizer::adamw) {
  RuntimeConfig c;
  c.model = model;
  c.scale = scale;
  c.seq_len = seq;
  c.strategy = s;
  c.micro_batch = micro;
  c.grad_accum = accum;
  c.no_sync = no_sync;
  c.optimizer = o;
  return c;
}

bool cuda(const std::string& backend) {
  return backend == "cuda";
}

}  // namespace

std::vector<RuntimeConfig> calibration_set(const std::string& backend) {
  if (cuda(backend)) {
    return {config("gpt2", 1.0, 1024, Strategy::ddp, 4, 1),
            config("gpt2", 1.0, 512, Strategy::zero3, 4, 2),
            config("llama-2-7b", 0.25, 512, Strategy::zero1, 2, 1)};
  }
  return {config("gpt2", 0.05, 128, Strategy::ddp, 4, 1),
          config("gpt2", 0.05, 128, Strategy::zero3, 2, 2),
          config("llama-2-7b", 0.02, 64, Strategy::zero1, 4, 1)};
}

std::vector<RuntimeConfig> accuracy_set(const std::string& backend) {
  if (cuda(backend)) {
    return {config("gpt2", 1.0, 1024, Strategy::fsdp_grad_op, 8, 1),
            config("gpt2", 1.0, 1024, Strategy::ddp, 2, 4, true),
            config("gpt2-medium", 1.0, 512, Strategy::zero1, 4, 1),
            config("llama-2-7b", 0.25, 512, Strategy::zero3, 2, 2),
            config("mistral-7b", 0.25, 512, Strategy::ddp, 4, 1, true, Optimizer::sgd),
            config("gpt2-large", 0.5, 512, Strategy::dp, 2, 1)};
  }
  return {config("gpt2", 0.05, 128, Strategy::fsdp_grad_op, 8, 1),
          config("gpt2", 0.05, 128, Strategy::ddp, 2, 4, true),
          config("gpt2-medium", 0.04, 128, Strategy::zero1, 4, 1),
          config("llama-2-7b", 0.02, 64, Strategy::zero3, 2, 2),
          config("mistral-7b", 0.02, 64, Strategy::ddp, 4, 1, true, Optimizer::sgd),
          config("gpt2-large", 0.03, 128, Strategy::dp, 2, 1)};
}

}  // namespace dtplan::runtime
