// dtplan-run --dump: the files a reference framework replays (replay_dump.hpp).
#include "dtplan/runtime/replay_dump.hpp"

#include <array>
#include <nlohmann/json.hpp>

#include "dtplan/cost/profile_step.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/runtime/batch.hpp"

namespace dtplan::runtime {
namespace {

template <typename T>
OutputFile raw_file(const std::filesystem::path& file, const std::vector<T>& values) {
  const auto* bytes = reinterpret_cast<const char*>(values.data());
  return {file, std::string(bytes, bytes + values.size() * sizeof(T)), "--dump"};
}

// The batches in the order the replay consumes them: step, micro-step, rank.
std::vector<std::int32_t> all_batches(const ReplayRecord& r) {
  const auto& s = r.settings;
  std::vector<std::int32_t> out;
  for (std::int64_t step = 0; step < r.steps; ++step) {
    for (std::int64_t micro = 0; micro < s.grad_accum; ++micro) {
      for (std::int64_t rank = 0; rank < r.ranks; ++rank) {
        // The sample numbering of Trainer::micro_step.
        const auto b = make_batch(s.seed, step, (micro * r.ranks + rank) * s.micro_batch,
                                  s.micro_batch, r.stack.seq_len, r.stack.vocab);
        out.insert(out.end(), b.ids.begin(), b.ids.end());
        out.insert(out.end(), b.targets.begin(), b.targets.end());
      }
    }
  }
  return out;
}

nlohmann::json optimizer_json(const TrainerSettings& s) {
  switch (s.optimizer) {
    case Optimizer::adam:
    case Optimizer::adamw:
      // Trainer::update_region's constants.
      return {{"optimizer", s.optimizer == Optimizer::adamw ? "adamw" : "adam"},
              {"betas", {0.9, 0.999}},
              {"eps", 1e-8},
              {"weight_decay", s.optimizer == Optimizer::adamw ? 0.01 : 0.0}};
    case Optimizer::sgd:
      return {{"optimizer", "sgd"}, {"momentum", 0.0}};
    case Optimizer::sgd_momentum:
      return {{"optimizer", "sgd"}, {"momentum", 0.9}};
    case Optimizer::adam8bit:
      break;
  }
  throw Error("--dump: the optimizer is not executed by dtplan-run");
}

}  // namespace

void check_replay_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("--dump " + dir.string() + ": cannot be created (" + ec.message() + ")");
  check_output_path(dir / "replay.json", "--dump");
}

void write_replay(const std::filesystem::path& dir, const ReplayRecord& r) {
  check_replay_dir(dir);
  nlohmann::json units = nlohmann::json::array();
  for (const auto& u : cost::units_of(r.stack))
    units.push_back({{"name", u.name}, {"params", u.params}});
  auto j = optimizer_json(r.settings);
  j["workload"] = cost::to_json(r.stack);
  j["units"] = units;
  j["strategy"] = std::string(name_of(r.settings.strategy));
  // How the strategy runs (cost::runtime_mode): what each rank keeps of the model states.
  constexpr std::array<const char*, 5> kModes = {"ddp", "dp", "zero1", "zero2", "zero3"};
  j["runtime_mode"] = kModes.at(static_cast<std::size_t>(cost::runtime_mode(r.settings.strategy)));
  j["ranks"] = r.ranks;
  j["lr"] = r.settings.lr;
  j["max_grad_norm"] = r.settings.max_grad_norm;
  j["micro_batch"] = r.settings.micro_batch;
  j["grad_accum"] = r.settings.grad_accum;
  j["no_sync"] = r.settings.no_sync;
  j["steps"] = r.steps;
  j["seed"] = r.settings.seed;  // the batches' and the dropout masks' (dropout.hpp)
  j["losses"] = r.losses;
  j["files"] = {{"initial", "initial.f32"}, {"final", "final.f32"}, {"batches", "batches.i32"}};
  if (r.tp > 1) j["tensor_parallel"] = r.tp;
  if (r.pp > 1) j["pipeline_stages"] = r.pp;
  if (r.tp * r.pp == 1) {
    nlohmann::json memory = nlohmann::json::object();
    for (int c = 0; c < kMemoryComponents; ++c) {
      const auto comp = static_cast<MemoryComponent>(c);
      memory[std::string(name_of(comp))] = r.memory[comp];
    }
    j["memory"] = memory;
  }
  // Together or not at all: a replay never reads weights of one run with batches of another.
  write_files_together({raw_file(dir / "initial.f32", r.initial),
                        raw_file(dir / "final.f32", r.final),
                        raw_file(dir / "batches.i32", all_batches(r)),
                        {dir / "replay.json", j.dump(2) + "\n", "--dump"}});
}

}  // namespace dtplan::runtime
