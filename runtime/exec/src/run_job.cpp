// dtplan-run's job (see run_job.hpp): plan -> workload -> training steps -> measurement.
#include "dtplan/runtime/run_job.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <optional>

#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/plan.hpp"
#include "dtplan/runtime/cpu_device.hpp"
#include "dtplan/runtime/cpu_kernels.hpp"
#include "dtplan/runtime/cuda_backend.hpp"
#include "dtplan/runtime/host_info.hpp"
#include "dtplan/runtime/measure_profile.hpp"
#include "dtplan/runtime/measurement.hpp"
#include "dtplan/runtime/parallel_groups.hpp"
#include "dtplan/runtime/replay_dump.hpp"
#include "dtplan/runtime/runtime_run.hpp"
#include "dtplan/runtime/trainer.hpp"
#include "dtplan/runtime/watchdog.hpp"

namespace dtplan::runtime {

InjectedFault parse_fault(const std::string& text) {
  InjectedFault f;
  const auto a = text.find(':'), b = text.rfind(':');
  const auto bad = [&] {
    return Error("--inject-fault " + text + ": expected kill:RANK:STEP or hang:RANK:STEP");
  };
  if (a == std::string::npos || a == b) throw bad();
  const auto kind = text.substr(0, a);
  if (kind == "kill") {
    f.kind = InjectedFault::Kind::kill;
  } else if (kind == "hang") {
    f.kind = InjectedFault::Kind::hang;
  } else {
    throw bad();
  }
  try {
    f.rank = std::stoi(text.substr(a + 1, b - a - 1));
    f.step = std::stoll(text.substr(b + 1));
  } catch (const std::exception&) {
    throw bad();
  }
  if (f.rank < 0 || f.step < 0) throw bad();
  return f;
}

namespace {

struct Job {
  Plan plan;
  cost::DenseStack stack;
  std::vector<std::string> not_executed;
  TrainerSettings settings;
};

}  // namespace

namespace {

Job prepare(const RunOptions& o, std::int64_t ranks) {
  Job j;
  j.plan = plan_from_json(o.plan_path);
  if (o.tp > 0) j.plan.tp = o.tp;
  if (o.pp > 0) j.plan.pp = o.pp;
  const auto& t = j.plan.training;
  if (const auto problem = rank_count_problem(j.plan, ranks)) {
    throw Error(o.plan_path + ": " + *problem);
  }
  if (j.plan.tp * j.plan.pp > 1 && o.backend == "cuda") {
    throw Error(o.plan_path + ": tp " + std::to_string(j.plan.tp) + " x pp " +
                std::to_string(j.plan.pp) +
                ": dtplan-run executes tensor and pipeline parallelism on the CPU backend only "
                "(--backend cpu)");
  }
  cost::RuntimeRun run;
  try {
    run = runtime_run_of(j.plan, o.scale, o.data_dir);
  } catch (const Error& e) {
    throw Error(o.plan_path + ": " + e.what());
  }
  j.stack = run.stack;
  // The CUDA kernels compute in fp32; 16-bit compute is emulated by the CPU backend.
  if (o.backend == "cuda") j.stack.compute = cost::ElementType::fp32;
  j.not_executed = run.not_executed;
  auto& s = j.settings;
  s.strategy = t.strategy;
  s.optimizer = t.optimizer;
  s.micro_batch = t.micro_batch;
  s.grad_accum = j.plan.grad_accum;
  s.no_sync = j.plan.no_sync;
  s.bucket_cap_bytes = run.bucket_cap_bytes;
  s.loss_scaling = t.precision == Precision::fp16 || t.precision == Precision::amp_fp16;
  s.lr = o.lr;
  s.max_grad_norm = o.max_grad_norm;
  s.seed = o.seed;
  return j;
}

void inject(const InjectedFault& f, int rank, std::int64_t step) {
  if (f.rank != rank || f.step != step) return;
  if (f.kind == InjectedFault::Kind::kill) std::raise(SIGKILL);
  // A rank stuck in communication that never completes: a receive nobody sends, while its
  // peers wait in the step's collectives.
  int never = 0;
  MPI_Recv(&never, 1, MPI_INT, MPI_ANY_SOURCE, 0x7fff, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

// A rank's CPU time over wall time from start() on, the lowest over the ranks: under 1 when the
// machine's other work took cores from the run (validate notes it).
class CpuShare {
 public:
  void start() {
    cpu_s_ = process_cpu_seconds();
    wall_ = std::chrono::steady_clock::now();
  }
  double lowest(const MpiGroup& world) const {
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count();
    const double mine = wall_s > 0 ? (process_cpu_seconds() - cpu_s_) / wall_s : 1.0;
    const auto all = world.all_gather(std::vector<double>{mine});
    return *std::min_element(all.begin(), all.end());
  }

 private:
  double cpu_s_ = 0;
  std::chrono::steady_clock::time_point wall_;
};

// Per measured step, the slowest rank's times (a step ends when its slowest rank does).
std::vector<StepRow> slowest_rank_steps(const std::vector<StepMeasurement>& mine,
                                        const MpiGroup& world) {
  std::vector<double> flat;
  for (const auto& m : mine) {
    flat.insert(flat.end(), {m.time_s, m.forward_s, m.backward_s, m.comm_wait_s, m.optimizer_s});
  }
  const auto all = world.all_gather(flat);
  std::vector<StepRow> rows;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    std::size_t best = i * 5;
    for (int r = 1; r < world.size(); ++r) {
      const std::size_t at = r * flat.size() + i * 5;
      if (all[at] > all[best]) best = at;
    }
    StepRow row;
    row.step = mine[i].step;
    row.time_s = all[best];
    row.forward_s = all[best + 1];
    row.backward_s = all[best + 2];
    row.comm_wait_s = all[best + 3];
    row.optimizer_s = all[best + 4];
    row.loss = mine[i].loss;
    row.grad_norm = mine[i].grad_norm;
    row.loss_scale = mine[i].loss_scale;
    row.skipped = mine[i].skipped;
    rows.push_back(row);
  }
  return rows;
}

std::vector<CollectiveSummary> summarise(const std::vector<StepMeasurement>& steps) {
  std::map<std::tuple<std::string, std::string, std::int64_t>, std::vector<double>> times;
  std::vector<CollectiveSummary> out;
  for (const auto& s : steps) {
    for (const auto& c : s.collectives) {
      times[{std::string(name_of(c.kind)), c.phase, c.bytes}].push_back(c.time_s);
    }
  }
  for (auto& [key, t] : times) {
    std::sort(t.begin(), t.end());
    CollectiveSummary c;
    std::tie(c.kind, c.phase, c.bytes) = key;
    c.count_per_step = static_cast<std::int64_t>(t.size() / steps.size());
    c.time_s = t[t.size() / 2];
    out.push_back(c);
  }
  return out;
}

std::vector<RankMemory> gather_memory(const Device& dev, const MpiGroup& world) {
  std::vector<double> mine{static_cast<double>(dev.peak_bytes()),
                           static_cast<double>(peak_rss_bytes())};
  for (auto b : dev.at_peak().bytes)
    mine.push_back(static_cast<double>(b));
  const auto all = world.all_gather(mine);
  std::vector<RankMemory> out;
  for (int r = 0; r < world.size(); ++r) {
    const double* v = all.data() + r * mine.size();
    RankMemory m;
    m.rank = r;
    m.peak_bytes = static_cast<std::int64_t>(v[0]);
    m.peak_rss_bytes = static_cast<std::int64_t>(v[1]);
    for (int c = 0; c < kMemoryComponents; ++c) {
      m.components[std::string(name_of(static_cast<MemoryComponent>(c)))] =
          static_cast<std::int64_t>(v[2 + c]);
    }
    out.push_back(m);
  }
  return out;
}

std::string workload_of(const cost::DenseStack& s, bool cuda) {
  const bool rms = s.norm == cost::StackNorm::rmsnorm;
  const bool rotary = s.positions == cost::StackPositions::rotary;
  const char* recompute = s.recompute == Checkpointing::full
                              ? "; full recomputation: each block's forward rerun in backward"
                          : s.recompute == Checkpointing::selective
                              ? "; selective recomputation: the attention core rerun in backward"
                              : "";
  return std::string(rms ? "RMSNorm" : "LayerNorm") + ", " +
         (rotary ? "rotary positions" : "learned positions") +
         ", causal softmax attention with its probabilities kept for backward (" +
         (cuda ? "direct CUDA kernels, no tensor cores" : "Eigen GEMMs per sequence and head") +
         "), " + (s.gated ? "SwiGLU" : "GELU") + " MLP" + recompute;
}

// The model's dropouts as dtplan-run executes them, or nothing when it has none.
std::optional<std::string> dropout_note(const cost::DenseStack& s) {
  std::string sites;
  for (const auto& [p, where] : {std::pair{s.attention_dropout, "the attention probabilities"},
                                 std::pair{s.hidden_dropout, "each projection's output"},
                                 std::pair{s.embedding_dropout, "the embeddings"}}) {
    if (p <= 0) continue;
    std::array<char, 32> text{};
    std::snprintf(text.data(), text.size(), "%g", p);
    sites += std::string(sites.empty() ? "" : ", ") + text.data() + " on " + where;
  }
  if (sites.empty()) return std::nullopt;
  return "dropout as torch.nn.Dropout trains: " + sites +
         "; masks of one byte an element, drawn from (seed, step, sample, layer, site) "
         "(runtime/exec/include/dtplan/runtime/dropout.hpp), not from PyTorch's generator";
}

std::string tensor_parallel_note(const cost::DenseStack& s) {
  const auto tp = std::to_string(s.tp);
  return "tensor parallel over " + tp + " ranks as Megatron-LM splits a block (no sequence " +
         "parallelism): each rank holds " + std::to_string(s.heads) + " query and " +
         std::to_string(s.kv_heads) + " key/value heads, " + std::to_string(s.ffn) +
         " MLP columns and " + std::to_string(s.vocab) + " vocabulary rows (the vocabulary " +
         "padded to a multiple of " + tp + "); all-reduces sum the embedding lookup, the " +
         "row-parallel outputs, the column-parallel input gradients and the vocab-parallel loss; " +
         std::to_string(cost::params_of(s)) + " parameters on rank 0";
}

std::string pipeline_note(const cost::DenseStack& s, std::int64_t micro_batches) {
  const auto blocks = std::to_string(s.layers);
  std::string n = "pipeline of " + std::to_string(s.pp) + " stages of " + blocks +
                  " blocks under Megatron-LM's one-forward-one-backward schedule over the " +
                  std::to_string(micro_batches) + " micro-batches: neighbours exchange each " +
                  "micro-batch's activations and their gradients (send_recv); rank 0 runs the " +
                  "embedding and blocks 0-" + std::to_string(s.layers - 1) + " and keeps " +
                  std::to_string(std::min(s.pp, micro_batches)) +
                  " micro-batches' activations; its memory and times are predicted for that " +
                  "stage, the other stages' compute entering as its wait";
  if (s.tied) {
    n += "; the last stage keeps a copy of the tied embedding matrix, the two stages' gradients "
         "summed before the optimizer";
  }
  return n;
}

std::vector<std::string> notes_for(const Job& j, const Trainer& t, const RunOptions& o, bool cuda) {
  std::vector<std::string> n{
      "workload: the plan's decoder blocks (cost/dense_stack.hpp): " + workload_of(j.stack, cuda),
      "scale " + std::to_string(o.scale) + ": head dimension, MLP width and vocabulary x scale; " +
          std::to_string(cost::params_of(cost::whole_model_of(j.stack))) +
          " parameters executed for the plan's " + std::to_string(j.plan.params)};
  if (j.stack.tp > 1) n.push_back(tensor_parallel_note(j.stack));
  if (j.stack.pp > 1) n.push_back(pipeline_note(j.stack, j.settings.grad_accum));
  for (const auto& what : j.not_executed)
    n.push_back("not executed: " + what);
  if (const auto d = dropout_note(j.stack)) n.push_back(*d);
  if (is_mixed(j.plan.training.precision)) {
    const std::string precision(name_of(j.plan.training.precision));
    const std::string scaling =
        std::string("; loss scaling ") + (j.settings.loss_scaling ? "is applied" : "is not needed");
    if (cuda) {
      n.push_back("the plan's " + precision +
                  " is computed in fp32 (the CUDA backend runs fp32 GEMMs, no tensor cores)" +
                  scaling);
    } else {
      const std::string type(cost::name_of(j.stack.compute));
      n.push_back("the plan's " + precision + " as torch.autocast computes it: Linear layers and " +
                  "attention products read " + type + " operands, accumulate in fp32 and round " +
                  "their results to " + type + " (values held in fp32 buffers); norms, softmax, " +
                  "loss and the residual stream in fp32; fp32 weights, gradients and optimizer " +
                  "states" + scaling);
    }
  }
  if (j.plan.no_sync && !t.no_sync_effective()) {
    n.push_back(std::string(name_of(j.settings.strategy)) +
                " synchronises gradients every micro-step (no_sync does not apply)");
  }
  return n;
}

}  // namespace

namespace {

void check_backend(const RunOptions& o) {
  if (o.backend != "cuda" && o.backend != "cpu") {
    throw Error("--backend " + o.backend + ": expected cpu or cuda");
  }
}

std::unique_ptr<Device> make_device(const RunOptions& o, const MpiGroup& world) {
  return o.backend == "cuda" ? make_cuda_device(world.local_rank(), o.memory_limit_bytes)
                             : make_cpu_device(o.memory_limit_bytes, world.local_size());
}

std::unique_ptr<Communicator> make_comm(const RunOptions& o, const MpiGroup& world, Device& d) {
  return o.backend == "cuda" ? make_nccl_communicator(world, d, o.timeout_s)
                             : world.make_communicator();
}

}  // namespace

nlohmann::json run_profile(const RunOptions& o, const MpiGroup& world) {
  check_backend(o);
  auto device = make_device(o, world);
  Watchdog watchdog(o.timeout_s, world.rank());
  watchdog.kick("profile microbenchmarks");
  const auto factory = [&](const MpiGroup& g) { return make_comm(o, g, *device); };
  ProfileOptions po;
  po.quick = o.quick_profile;
  auto p = measure_profile(*device, factory, world, po, [&](int i, int n, const std::string& what) {
    watchdog.kick(what);
    // "[i/n]" is what dtplan calibrate reads to draw its progress bar.
    if (world.rank() == 0)
      std::fprintf(stderr, "dtplan-run: [%d/%d] measuring %s\n", i, n, what.c_str());
  });
  if (world.rank() != 0) return nullptr;
  p.hardware += ", " + std::to_string(world.size()) + " ranks on " + world.host_name();
  p.versions["mpi"] = MpiSession::library_version();
  if (o.backend == "cuda") p.versions["cuda"] = cuda_versions();
  return cost::to_json(p);
}

namespace {

void check_flags(const RunOptions& o) {
  if (o.steps < 1) throw Error("--steps " + std::to_string(o.steps) + ": must be >= 1");
  if (o.warmup < 0) throw Error("--warmup " + std::to_string(o.warmup) + ": must be >= 0");
  check_backend(o);
}

}  // namespace

void check_job(const RunOptions& o) {
  check_flags(o);
  (void)prepare(o, o.check_ranks);
}

nlohmann::json run_job(const RunOptions& o, const MpiGroup& world) {
  check_flags(o);
  const bool cuda = o.backend == "cuda";
  const Job job = prepare(o, world.size());
  auto device = make_device(o, world);
  // Data parallelism alone: the world's communicator (NCCL on CUDA). With tensor or pipeline
  // parallelism (CPU only): Megatron-LM's groups, each rank running its stage.
  const int tp = static_cast<int>(job.plan.tp), pp = static_cast<int>(job.plan.pp);
  std::unique_ptr<Communicator> world_comm;
  std::optional<ParallelGroups> groups;
  auto stack = job.stack;
  if (tp * pp == 1) {
    world_comm = make_comm(o, world, *device);
  } else {
    groups.emplace(world, tp, pp, stack.tied,
                   [&](const MpiGroup& g) { return make_comm(o, g, *device); });
    if (pp > 1) stack = cost::pipeline_stage(cost::pipeline_whole_of(stack), pp, groups->stage());
  }
  Communicator& comm = groups ? groups->data_parallel() : *world_comm;
  Watchdog watchdog(o.timeout_s, world.rank());
  watchdog.kick("setting up");
  Trainer trainer(stack, job.settings, *device, comm, world,
                  groups ? groups->model_parallel() : ModelParallel{});
  // The replay is of the whole model over the data-parallel ranks (the same arithmetic).
  ReplayRecord replay{cost::whole_model_of(stack),
                      job.settings,
                      comm.size(),
                      o.warmup + o.steps,
                      {},
                      {},
                      {},
                      {},
                      job.stack.tp,
                      job.stack.pp};
  if (!o.dump_dir.empty()) replay.initial = trainer.gather_parameters();
  std::vector<StepMeasurement> measured;
  CpuShare share;
  for (std::int64_t i = 0; i < o.warmup + o.steps; ++i) {
    watchdog.kick("step " + std::to_string(i));
    if (o.fault) inject(*o.fault, world.rank(), i);
    if (i == o.warmup) share.start();
    auto m = trainer.step(i);
    replay.losses.push_back(m.loss);
    if (i >= o.warmup) measured.push_back(std::move(m));
  }
  if (!o.dump_dir.empty()) {
    watchdog.kick("writing the replay dump");
    replay.final = trainer.gather_parameters();
    replay.memory = device->at_peak();
    if (world.rank() == 0) write_replay(o.dump_dir, replay);
  }
  watchdog.kick("gathering the measurement");
  Measurement out;
  out.steps = slowest_rank_steps(measured, world);
  const double lowest_share = share.lowest(world);
  if (!cuda) out.cpu_share = lowest_share;
  out.memory = gather_memory(*device, world);
  if (world.rank() != 0) return nullptr;
  out.version = DTPLAN_VERSION;
  out.created = utc_timestamp();
  out.command = o.command_line;
  out.plan_file = o.plan_path;
  out.plan = job.plan;
  out.backend = o.backend;
  out.world_size = world.size();
  out.host = world.host_name();
  out.device = device->description();
  out.cpu = cpu_model_name();
  out.cores = cpu_cores();
  out.host_memory_bytes = host_memory_bytes();
  out.device_capacity_bytes = device->capacity_bytes();
  out.versions = {{"mpi", MpiSession::library_version()},
                  {"eigen", eigen_version()},
                  {"communicator", comm.description()}};
  if (cuda) out.versions["cuda"] = cuda_versions();
  if (!cuda) out.versions["cpu_kernels"] = cpu_kernels().name;  // the instruction-set build
  out.scale = o.scale;
  out.workload = job.stack;
  auto& e = out.executed;
  e.strategy = job.settings.strategy;
  e.optimizer = job.settings.optimizer;
  e.loss_scaling = job.settings.loss_scaling;
  e.micro_batch = job.settings.micro_batch;
  e.grad_accum = job.settings.grad_accum;
  e.no_sync = trainer.no_sync_effective();
  e.bucket_cap_bytes = job.settings.bucket_cap_bytes;
  e.buckets = trainer.buckets();
  e.lr = job.settings.lr;
  e.max_grad_norm = job.settings.max_grad_norm;
  e.seed = static_cast<std::int64_t>(job.settings.seed);
  out.warmup = o.warmup;
  out.collectives = summarise(measured);
  out.notes = notes_for(job, trainer, o, cuda);
  return to_json(out);
}

}  // namespace dtplan::runtime
