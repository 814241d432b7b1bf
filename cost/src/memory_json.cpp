// JSON form of a memory estimate (bytes as integers).
#include "dtplan/cost/memory.hpp"

namespace dtplan::cost {

namespace {

nlohmann::json components_json(const MemoryComponents& c) {
  return {{"weights", c.weights.value},           {"master_weights", c.master_weights.value},
          {"gradients", c.gradients.value},       {"optimizer_states", c.optimizer_states.value},
          {"grad_buckets", c.grad_buckets.value}, {"model_states", c.model_states().value},
          {"activations", c.activations.value},   {"buffers", c.buffers.value},
          {"overhead", c.overhead.value},         {"total", c.total().value}};
}

}  // namespace

nlohmann::json terms_json(const std::vector<NamedBytes>& terms) {
  auto out = nlohmann::json::array();
  for (const auto& t : terms)
    out.push_back({{"name", t.name}, {"bytes", t.bytes.value}});
  return out;
}

nlohmann::json to_json(const MemoryEstimate& e) {
  nlohmann::json j;
  j["strategy"] = std::string(name_of(e.strategy));
  j["params"] = e.params;
  j["shard_degree"] = e.shard_degree;
  j["recipe"] = e.recipe;
  j["per_gpu"] = components_json(e.gpu);
  // As PyTorch would report the peak (torch.cuda.max_memory_reserved / _allocated).
  j["per_gpu"]["torch_reserved"] = e.gpu.torch_reserved().value;
  j["per_gpu"]["torch_allocated"] = e.gpu.torch_allocated().value;
  j["per_cpu"] = components_json(e.cpu);
  j["cpu_per_node"] = e.cpu_per_node.value;
  j["activations_modelled"] = e.activations_modelled;
  j["details"] = {{"activations", terms_json(e.activation_terms)},
                  {"buffers", terms_json(e.buffer_terms)},
                  {"overhead", terms_json(e.overhead_terms)}};
  nlohmann::json explain = nlohmann::json::object();
  for (const auto& [component, text] : e.explain)
    explain[component] = text;
  j["explain"] = explain;
  j["notes"] = e.notes;
  if (e.fit) {
    j["gpu"] = e.fit->gpu;
    j["capacity"] = e.fit->capacity.value;
    j["fits"] = e.fit->fits;
    j["margin"] = e.fit->margin.value;
    j["gpu_fits"] = e.fit->gpu_fits;
    j["host_capacity"] =
        e.fit->host_capacity ? nlohmann::json(e.fit->host_capacity->value) : nlohmann::json();
    j["host_fits"] = e.fit->host_fits;
    j["host_margin"] =
        e.fit->host_capacity ? nlohmann::json(e.fit->host_margin.value) : nlohmann::json();
  } else {
    j["gpu"] = nullptr;
    j["capacity"] = nullptr;
    j["fits"] = nullptr;
    j["margin"] = nullptr;
  }
  return j;
}

}  // namespace dtplan::cost
