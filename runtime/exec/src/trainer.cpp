// The training loop of one rank under DDP, DP or ZeRO-1/2/3 (see trainer.hpp).
#include "dtplan/runtime/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "dtplan/cost/profile_step.hpp"
#include "dtplan/cost/strategy_traits.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/runtime/batch.hpp"

namespace dtplan::runtime {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool is_adam(Optimizer o) {
  return o == Optimizer::adam || o == Optimizer::adamw;
}

}  // namespace

namespace {

// Micro-batches a stage keeps in flight under one-forward-one-backward: pp - stage, at most all.
std::int64_t in_flight(const cost::DenseStack& s, std::int64_t micro_batches) {
  return std::min(s.pp - s.stage, micro_batches);
}

}  // namespace

Trainer::Trainer(const cost::DenseStack& stack, const TrainerSettings& settings, Device& device,
                 Communicator& comm, const MpiGroup& host, const ModelParallel& mp)
    : stack_(stack),
      set_(settings),
      dev_(device),
      comm_(comm),
      host_(host),
      tp_(stack.tp > 1 ? mp.tp : nullptr),
      pp_(stack.pp > 1 ? mp.pp : nullptr),
      emb_(stack.pp > 1 && stack.tied ? mp.embedding : nullptr),
      mp_host_(stack.tp > 1 || stack.pp > 1 ? mp.host : nullptr),
      mode_(cost::runtime_mode(settings.strategy)),
      layout_(stack, comm.size()),
      buckets_(layout_.buckets(settings.bucket_cap_bytes)) {
  const std::int64_t replica = stack.tp * stack.pp;
  if (replica > 1 && (mp_host_ == nullptr || mp_host_->size() != replica)) {
    throw Error("model parallelism over " + std::to_string(replica) +
                " ranks needs their host group");
  }
  if (stack.pp > 1 && (pp_ == nullptr || pp_->size() != stack.pp || pp_->rank() != stack.stage)) {
    throw Error("pipeline stage " + std::to_string(stack.stage) + " of " +
                std::to_string(stack.pp) + " needs its pipeline, in stage order");
  }
  const bool tied_stages = stack.pp > 1 && stack.tied;
  if (tied_stages && (mode_ == Mode::zero2 || mode_ == Mode::zero3)) {
    throw Error(std::string(name_of(settings.strategy)) +
                " with tied embeddings across pipeline stages: the stages' embedding gradients "
                "are summed whole, which sharded gradients do not allow (use ddp or zero1)");
  }
  if (tied_stages && (stack.has_embedding() || stack.has_head()) && emb_ == nullptr) {
    throw Error("tied embeddings across pipeline stages need the embedding group");
  }
  if (set_.optimizer == Optimizer::adam8bit) {
    throw Error("optimizer adam8bit: not executed by dtplan-run (no 8-bit kernels); use adam");
  }
  if (set_.grad_accum < 1 || set_.micro_batch < 1) {
    throw Error("micro-batch and gradient accumulation must be >= 1");
  }
  const std::int64_t tokens = set_.micro_batch * stack.seq_len;
  for (std::int64_t i = 0; i < in_flight(stack, set_.grad_accum); ++i) {
    models_.push_back(std::make_unique<DenseModel>(stack_, device, tokens, tp_));
    ids_.push_back(dev_.allocate(tokens * 4, MemoryComponent::data));
    targets_.push_back(dev_.allocate(tokens * 4, MemoryComponent::data));
  }
  allocate_states();
  initialise_weights();
  loss_scale_ = set_.loss_scaling ? set_.initial_loss_scale : 1.0f;
}

bool Trainer::no_sync_effective() const {
  return cost::runtime_no_sync(set_.strategy, set_.no_sync);
}

void Trainer::allocate_states() {
  const auto W = MemoryComponent::weights, G = MemoryComponent::gradients,
             O = MemoryComponent::optimizer_states;
  const std::int64_t flat = layout_.flat_elements(), shard = layout_.shard_elements();
  weights_ = dev_.allocate_floats(mode_ == Mode::zero3 ? shard : flat, W);
  const bool sharded_grads = mode_ == Mode::zero2 || mode_ == Mode::zero3;
  grads_ = dev_.allocate_floats(sharded_grads ? shard : flat, G);
  std::int64_t states = mode_ == Mode::ddp ? flat : shard;
  if (mode_ == Mode::dp) states = comm_.rank() == 0 ? flat : 0;
  const int moments = is_adam(set_.optimizer) ? 2 : (set_.optimizer == Optimizer::sgd ? 0 : 1);
  if (moments >= 1) moment1_ = dev_.allocate_floats(states, O);
  if (moments >= 2) moment2_ = dev_.allocate_floats(states, O);
  if (mode_ != Mode::ddp && mode_ != Mode::dp) {
    slice_tmp_ = dev_.allocate_floats(layout_.largest_slice(), MemoryComponent::buffers);
  }
}

std::int64_t Trainer::head_unit() const {
  return stack_.tied && stack_.pp == 1 ? 0 : static_cast<std::int64_t>(layout_.units().size()) - 1;
}

// Unit u as the whole model initialises it, before any tensor-parallel cut: a block is the
// whole model's block; a stage's own embedding unit drops the final norm the whole model's tied
// embedding unit carries, and the last stage's tied head takes the matrix and that norm from it.
std::vector<float> Trainer::initial_values(std::int64_t u) const {
  const auto whole = cost::whole_model_of(stack_);
  const auto kind = cost::unit_kind(stack_, u);
  if (kind == cost::UnitKind::block) {
    return DenseModel::initial_unit(whole, 1 + stack_.first_layer + u - block_unit(0), set_.seed);
  }
  if (stack_.pp == 1)
    return DenseModel::initial_unit(whole, u == 0 ? 0 : whole.layers + 1, set_.seed);
  if (kind == cost::UnitKind::head && !stack_.tied) {
    return DenseModel::initial_unit(whole, whole.layers + 1, set_.seed);
  }
  const auto embedding = DenseModel::initial_unit(whole, 0, set_.seed);
  const std::int64_t table = whole.vocab * whole.hidden, positions = whole.position_params();
  std::vector<float> v(embedding.begin(), embedding.begin() + table);
  if (kind == cost::UnitKind::embedding) {
    v.insert(v.end(), embedding.begin() + table, embedding.begin() + table + positions);
  } else {
    v.insert(v.end(), embedding.begin() + table + positions, embedding.end());
  }
  return v;
}

void Trainer::initialise_weights() {
  const int r = comm_.rank();
  for (std::size_t u = 0; u < layout_.units().size(); ++u) {
    const auto& unit = layout_.units()[u];
    const auto index = static_cast<std::int64_t>(u);
    auto values = initial_values(index);
    if (tp_ != nullptr) {
      values = cut_share(tensor_pieces(stack_, index, tp_->rank()), values.data());
    }
    values.resize(static_cast<std::size_t>(unit.padded), 0.0f);
    if (mode_ == Mode::zero3) {
      dev_.upload(values.data() + r * unit.slice, weights_.f() + unit.shard_offset, unit.slice * 4);
    } else {
      dev_.upload(values.data(), weights_.f() + unit.flat_offset, unit.padded * 4);
    }
  }
}

StepMeasurement Trainer::step(std::int64_t index) {
  StepMeasurement m;
  m.step = index;
  comm_.clear_records();
  if (tp_ != nullptr) tp_->clear_records();
  loss_sum_ = 0;
  dev_.synchronize();
  const double start = now_s();
  if (pp_ != nullptr) pp_->clear_records();
  if (emb_ != nullptr) emb_->clear_records();
  if (pp_ == nullptr) {
    for (std::int64_t micro = 0; micro < set_.grad_accum; ++micro)
      micro_step(index, micro, m);
  } else {
    pipeline_step(index, m);
  }
  comm_.set_phase("gradient sync");
  double t = now_s();
  tie_embedding_gradients();
  synchronise_gradients();
  dev_.synchronize();
  m.comm_wait_s = now_s() - t;
  comm_.set_phase("optimizer");
  t = now_s();
  optimizer_step(m);
  dev_.synchronize();
  m.optimizer_s = now_s() - t;
  m.time_s = now_s() - start;
  const double tokens =
      static_cast<double>(set_.micro_batch * set_.grad_accum * comm_.size() * stack_.seq_len);
  // Every rank of a tensor-parallel group computed the same loss (the last stage only).
  m.loss = host_.sum(loss_sum_) / tokens / static_cast<double>(stack_.tp);
  m.loss_scale = loss_scale_;
  m.collectives = comm_.records();
  for (auto* c : {tp_, pp_, emb_}) {
    if (c == nullptr) continue;
    const auto& more = c->records();
    m.collectives.insert(m.collectives.end(), more.begin(), more.end());
  }
  return m;
}

void Trainer::load_batch(std::int64_t step, std::int64_t micro, std::size_t slot) {
  const std::int64_t n = comm_.size(), mb = set_.micro_batch;
  const std::int64_t first_sample = (micro * n + comm_.rank()) * mb;
  // Tokens of the whole vocabulary (a tensor-parallel share holds a slice of it).
  const auto batch =
      make_batch(set_.seed, step, first_sample, mb, stack_.seq_len, stack_.vocab * stack_.tp);
  models_[slot]->set_samples(set_.seed, step, first_sample);  // the micro-step's dropout masks
  dev_.upload(batch.ids.data(), ids_[slot].i(), ids_[slot].bytes());
  dev_.upload(batch.targets.data(), targets_[slot].i(), targets_[slot].bytes());
}

void Trainer::micro_step(std::int64_t step, std::int64_t micro, StepMeasurement& m) {
  load_batch(step, micro, 0);
  comm_.set_phase("forward");
  if (tp_ != nullptr) tp_->set_phase("tensor-parallel forward");
  double t = now_s();
  forward(0);
  dev_.synchronize();
  m.forward_s += now_s() - t;
  comm_.set_phase("backward");
  if (tp_ != nullptr) tp_->set_phase("tensor-parallel backward");
  t = now_s();
  backward(0, micro == set_.grad_accum - 1 || !no_sync_effective());
  dev_.synchronize();
  m.backward_s += now_s() - t;
}

// Megatron-LM's one-forward-one-backward schedule (trainer.hpp). Each exchange sends to one
// neighbour and receives from one at once; its time counts to the phase that waits on it:
// forward for an activation, backward for a gradient.
void Trainer::pipeline_step(std::int64_t step, StepMeasurement& m) {
  const std::int64_t M = set_.grad_accum, last = stack_.pp - 1, s = stack_.stage;
  const std::int64_t warmup = std::min(last - s, M), steady = M - warmup;
  const int prev = s > 0 ? static_cast<int>(s - 1) : -1;
  const int next = s < last ? static_cast<int>(s + 1) : -1;
  const auto k = static_cast<std::int64_t>(models_.size());
  auto model = [&](std::int64_t i) -> DenseModel& {
    return *models_[static_cast<std::size_t>(i % k)];
  };
  const std::int64_t n = model(0).activation_elements();
  auto exchange = [&](double& into, const float* send, int to, float* recv, int from) {
    if (to < 0 && from < 0) return;
    pp_->set_phase(&into == &m.forward_s ? "pipeline forward" : "pipeline backward");
    const double t = now_s();
    pp_->wait(pp_->send_recv(send, n, to, recv, n, from));
    into += now_s() - t;
  };
  auto run = [&](double& into, auto&& body) {
    const double t = now_s();
    body();
    dev_.synchronize();
    into += now_s() - t;
  };
  auto fwd = [&](std::int64_t i) {
    load_batch(step, i, static_cast<std::size_t>(i % k));
    comm_.set_phase("forward");
    if (tp_ != nullptr) tp_->set_phase("tensor-parallel forward");
    run(m.forward_s, [&] { forward(static_cast<std::size_t>(i % k)); });
  };
  auto bwd = [&](std::int64_t i) {
    comm_.set_phase("backward");
    if (tp_ != nullptr) tp_->set_phase("tensor-parallel backward");
    const bool sync = i == M - 1 || !no_sync_effective();
    run(m.backward_s, [&] { backward(static_cast<std::size_t>(i % k), sync); });
  };
  for (std::int64_t i = 0; i < warmup; ++i) {
    exchange(m.forward_s, nullptr, -1, model(i).input(), prev);
    fwd(i);
    exchange(m.forward_s, model(i).output(), next, nullptr, -1);
  }
  if (steady > 0) exchange(m.forward_s, nullptr, -1, model(warmup).input(), prev);
  for (std::int64_t j = 0; j < steady; ++j) {
    const std::int64_t i = warmup + j;
    fwd(i);
    exchange(m.backward_s, model(i).output(), next, model(j).output_grad(), next);
    bwd(j);
    if (j == steady - 1) {
      exchange(m.backward_s, model(j).input_grad(), prev, nullptr, -1);
    } else {
      exchange(m.forward_s, model(j).input_grad(), prev, model(i + 1).input(), prev);
    }
  }
  for (std::int64_t j = steady; j < M; ++j) {
    exchange(m.backward_s, nullptr, -1, model(j).output_grad(), next);
    bwd(j);
    exchange(m.backward_s, model(j).input_grad(), prev, nullptr, -1);
  }
}

void Trainer::forward(std::size_t slot) {
  // Each rank's loss is its own tokens' mean; averaging over ranks gives the global mean.
  const auto tokens = static_cast<float>(set_.micro_batch * set_.grad_accum * stack_.seq_len);
  auto& model = *models_[slot];
  if (stack_.has_embedding()) {
    model.forward_embedding(unit_params(0), ids_[slot].i());
    release_params(0);
  }
  for (std::int64_t l = 0; l < stack_.layers; ++l) {
    model.forward_block(l, unit_params(block_unit(l)));
    release_params(block_unit(l));
  }
  if (!stack_.has_head()) return;
  // The head's weights stay gathered: backward starts with them.
  loss_sum_ +=
      model.forward_head(unit_params(head_unit()), targets_[slot].i(), loss_scale_ / tokens);
}

void Trainer::backward(std::size_t slot, bool sync) {
  auto& model = *models_[slot];
  if (stack_.has_head()) {
    const std::int64_t head = head_unit();
    model.backward_head(unit_params(head), unit_grads(head));
    release_params(head);
    if (head != 0 || !stack_.has_embedding()) unit_done(head, sync);
  }
  for (std::int64_t l = stack_.layers - 1; l >= 0; --l) {
    model.backward_block(l, unit_params(block_unit(l)), unit_grads(block_unit(l)));
    release_params(block_unit(l));
    unit_done(block_unit(l), sync);
  }
  if (stack_.has_embedding()) {
    model.backward_embedding(ids_[slot].i(), unit_grads(0));
    unit_done(0, sync);
  }
  if (mode_ == Mode::ddp && sync) {
    // Buckets still in flight finish here, before the next micro-step touches gradients.
    for (auto h : in_flight_)
      comm_.wait(h);
    for (const auto& b : buckets_)
      average(grads_.f() + b.flat_offset, b.elements);
    in_flight_.clear();
  }
  if (mode_ == Mode::dp && sync) {
    // Rank 0 accumulates the sum over ranks; the others have handed theirs over.
    comm_.wait(comm_.reduce(grads_.f(), layout_.flat_elements(), 0));
    if (comm_.rank() != 0) zero_gradients();
  }
}

const float* Trainer::unit_params(std::int64_t u) {
  const auto& unit = layout_.units()[static_cast<std::size_t>(u)];
  if (mode_ != Mode::zero3) return weights_.f() + unit.flat_offset;
  auto it = gathered_.find(u);
  if (it == gathered_.end()) {
    auto buf = dev_.allocate_floats(unit.padded, MemoryComponent::buffers);
    comm_.wait(comm_.all_gather(weights_.f() + unit.shard_offset, buf.f(), unit.slice));
    it = gathered_.emplace(u, std::move(buf)).first;
  }
  return it->second.f();
}

void Trainer::release_params(std::int64_t u) {
  gathered_.erase(u);
}

float* Trainer::unit_grads(std::int64_t u) {
  const auto& unit = layout_.units()[static_cast<std::size_t>(u)];
  if (mode_ != Mode::zero2 && mode_ != Mode::zero3) return grads_.f() + unit.flat_offset;
  auto it = unit_grad_.find(u);
  if (it == unit_grad_.end()) {
    it = unit_grad_.emplace(u, dev_.allocate_floats(unit.padded, MemoryComponent::buffers)).first;
  }
  return it->second.f();
}

void Trainer::unit_done(std::int64_t u, bool sync) {
  if (mode_ == Mode::ddp && sync) {
    for (const auto& b : buckets_) {
      if (b.first_unit == u)
        in_flight_.push_back(comm_.all_reduce(grads_.f() + b.flat_offset, b.elements));
    }
    comm_.progress();
  }
  if (mode_ != Mode::zero2 && mode_ != Mode::zero3) return;
  // The unit's gradient goes to its owners now; this rank keeps its averaged slice.
  const auto& unit = layout_.units()[static_cast<std::size_t>(u)];
  comm_.wait(comm_.reduce_scatter(unit_grads(u), slice_tmp_.f(), unit.slice));
  dev_.axpy(1.0f / static_cast<float>(comm_.size()), slice_tmp_.f(), grads_.f() + unit.shard_offset,
            unit.slice);
  unit_grad_.erase(u);
}

void Trainer::average(float* data, std::int64_t n) {
  dev_.scale(data, 1.0f / static_cast<float>(comm_.size()), n);
}

// The last stage's copy of a tied embedding matrix and the first stage's learn from the sum of
// their gradients (Megatron-LM's embedding group), before the strategy synchronises them.
void Trainer::tie_embedding_gradients() {
  if (emb_ == nullptr || !(stack_.has_embedding() || stack_.has_head())) return;
  const std::int64_t u = stack_.has_embedding() ? 0 : head_unit();
  const auto& unit = layout_.units()[static_cast<std::size_t>(u)];
  emb_->set_phase("gradient sync");
  emb_->wait(emb_->all_reduce(grads_.f() + unit.flat_offset, stack_.vocab * stack_.hidden));
}

std::int64_t Trainer::shared_table(std::int64_t u) const {
  const bool copy =
      stack_.pp > 1 && stack_.tied && cost::unit_kind(stack_, u) == cost::UnitKind::head;
  return copy ? stack_.vocab * stack_.hidden : 0;
}

void Trainer::synchronise_gradients() {
  const int r = comm_.rank();
  if (mode_ == Mode::dp) {
    if (r == 0) average(grads_.f(), layout_.flat_elements());
  } else if (mode_ == Mode::zero1) {
    // Reduce-scatter unit by unit; the averaged slice lands in this rank's part of the
    // full gradient buffer, where the optimizer reads it.
    for (const auto& u : layout_.units()) {
      comm_.wait(comm_.reduce_scatter(grads_.f() + u.flat_offset, slice_tmp_.f(), u.slice));
      dev_.copy(slice_tmp_.f(), grads_.f() + u.flat_offset + r * u.slice, u.slice);
      average(grads_.f() + u.flat_offset + r * u.slice, u.slice);
    }
  }
}

namespace {

struct Region {
  float* w;
  float* g;
  std::int64_t state_offset;
  std::int64_t n;
};

}  // namespace

void Trainer::optimizer_step(StepMeasurement& m) {
  const int r = comm_.rank();
  std::vector<Region> regions;
  if (mode_ == Mode::ddp || (mode_ == Mode::dp && r == 0)) {
    regions.push_back({weights_.f(), grads_.f(), 0, layout_.flat_elements()});
  } else if (mode_ != Mode::dp) {
    for (const auto& u : layout_.units()) {
      float* w = mode_ == Mode::zero3 ? weights_.f() + u.shard_offset
                                      : weights_.f() + u.flat_offset + r * u.slice;
      float* g = mode_ == Mode::zero1 ? grads_.f() + u.flat_offset + r * u.slice
                                      : grads_.f() + u.shard_offset;
      regions.push_back({w, g, u.shard_offset, u.slice});
    }
  }
  // Replicated DDP gradients are identical on every data-parallel rank: the norm sums over
  // the tensor-parallel group only.
  bool bad = false;
  for (const auto& g : regions)
    bad = bad || dev_.any_non_finite(g.g, g.n);
  double sum_sq = local_sum_squares();
  if (mode_ == Mode::ddp) {
    if (mp_host_ != nullptr) sum_sq = mp_host_->sum(sum_sq);
    if (mp_host_ != nullptr) bad = mp_host_->max(static_cast<double>(bad)) > 0;
  } else {
    bad = host_.max(static_cast<double>(bad)) > 0;
    sum_sq = host_.sum(sum_sq);
  }
  if (set_.loss_scaling && bad) {
    m.skipped = true;
    loss_scale_ /= 2;
    zero_gradients();
    return;
  }
  // Unscale, then clip by the global norm (torch.nn.utils.clip_grad_norm_).
  m.grad_norm = std::sqrt(sum_sq) / loss_scale_;
  double factor = 1.0 / loss_scale_;
  if (set_.max_grad_norm > 0 && m.grad_norm > set_.max_grad_norm) {
    factor *= set_.max_grad_norm / (m.grad_norm + 1e-6);
  }
  ++adam_steps_;
  for (const auto& g : regions) {
    if (factor != 1.0) dev_.scale(g.g, static_cast<float>(factor), g.n);
    update_region(g.w, g.g, g.state_offset, g.n);
  }
  if (mode_ == Mode::zero1 || mode_ == Mode::zero2) {
    for (const auto& u : layout_.units()) {
      float* full = weights_.f() + u.flat_offset;
      comm_.wait(comm_.all_gather(full + r * u.slice, full, u.slice));
    }
  } else if (mode_ == Mode::dp) {
    comm_.wait(comm_.broadcast(weights_.f(), layout_.flat_elements(), 0));
  }
  zero_gradients();
}

double Trainer::local_sum_squares() {
  const int r = comm_.rank();
  const bool whole_units = mode_ == Mode::ddp || mode_ == Mode::dp;
  if (mode_ == Mode::dp && r != 0) return 0;
  double sum = 0;
  for (std::size_t i = 0; i < layout_.units().size(); ++i) {
    const auto& u = layout_.units()[i];
    // The unit's elements [begin, begin + n) this rank holds the gradient of, at g.
    const std::int64_t begin = whole_units ? 0 : r * u.slice;
    const std::int64_t n = whole_units ? u.params : u.slice;
    const float* g = mode_ == Mode::zero2 || mode_ == Mode::zero3
                         ? grads_.f() + u.shard_offset
                         : grads_.f() + u.flat_offset + begin;
    sum += dev_.sum_squares(g, n);
    // The last stage's copy of a tied embedding matrix is the first stage's: counted there.
    const std::int64_t copy_end = std::min(begin + n, shared_table(static_cast<std::int64_t>(i)));
    if (copy_end > begin) sum -= dev_.sum_squares(g, copy_end - begin);
    if (tp_ == nullptr || tp_->rank() == 0) continue;
    for (const auto& p : tensor_pieces(stack_, static_cast<std::int64_t>(i), tp_->rank())) {
      const std::int64_t a = std::max(begin, p.local_at);
      const std::int64_t b = std::min(begin + n, p.local_at + p.elements());
      if (p.replicated && a < b) sum -= dev_.sum_squares(g + (a - begin), b - a);
    }
  }
  return sum;
}

void Trainer::update_region(float* w, float* g, std::int64_t state_offset, std::int64_t n) {
  float* m1 = moment1_.empty() ? nullptr : moment1_.f() + state_offset;
  switch (set_.optimizer) {
    case Optimizer::adam:
    case Optimizer::adamw: {
      const float wd = set_.optimizer == Optimizer::adamw ? 0.01f : 0.0f;
      dev_.adam(w, g, m1, moment2_.f() + state_offset, n, set_.lr, 0.9f, 0.999f, 1e-8f, wd,
                adam_steps_);
      break;
    }
    case Optimizer::sgd:
      dev_.sgd(w, g, nullptr, n, set_.lr, 0.0f);
      break;
    case Optimizer::sgd_momentum:
      dev_.sgd(w, g, m1, n, set_.lr, 0.9f);
      break;
    case Optimizer::adam8bit:
      throw Error("adam8bit is not executed by dtplan-run");
  }
}

void Trainer::zero_gradients() {
  dev_.fill(grads_.f(), 0.0f, grads_.floats());
}

std::vector<float> Trainer::gather_parameters() {
  std::vector<float> out;
  for (const auto& u : layout_.units()) {
    std::vector<float> unit(static_cast<std::size_t>(u.padded));
    if (mode_ == Mode::zero3) {
      auto buf = dev_.allocate_floats(u.padded, MemoryComponent::buffers);
      comm_.wait(comm_.all_gather(weights_.f() + u.shard_offset, buf.f(), u.slice));
      dev_.download(buf.f(), unit.data(), u.padded * 4);
    } else {
      dev_.download(weights_.f() + u.flat_offset, unit.data(), u.padded * 4);
    }
    unit.resize(static_cast<std::size_t>(u.params));
    const auto whole = whole_unit(static_cast<std::int64_t>(&u - layout_.units().data()), unit);
    out.insert(out.end(), whole.begin(), whole.end());
  }
  return pp_ == nullptr ? out : join_stages(out);
}

// Every stage's parameters (each stage's ranks broadcast theirs over the pipeline), in the
// whole model's order: the embedding (with the last stage's final norm when tied), the blocks
// stage by stage, the untied head.
std::vector<float> Trainer::join_stages(const std::vector<float>& mine) {
  const auto tp_whole = cost::whole_of(stack_);
  const auto whole = cost::pipeline_whole_of(tp_whole);
  std::vector<std::vector<float>> stages;
  for (std::int64_t q = 0; q < stack_.pp; ++q) {
    const auto n = cost::params_of(cost::pipeline_stage(whole, stack_.pp, q));
    auto buf = dev_.allocate_floats(n, MemoryComponent::buffers);
    if (q == stack_.stage) dev_.upload(mine.data(), buf.f(), n * 4);
    pp_->wait(pp_->broadcast(buf.f(), n, static_cast<int>(q)));
    stages.emplace_back(static_cast<std::size_t>(n));
    dev_.download(buf.f(), stages.back().data(), n * 4);
  }
  const std::int64_t table = whole.vocab * whole.hidden, positions = whole.position_params();
  const std::int64_t block = cost::units_of(whole)[1].params;
  const auto& first = stages.front();
  const auto& last = stages.back();
  const std::int64_t final_norm = whole.final_norm ? whole.norm_params() : 0;
  const auto head_begin = last.end() - (table + final_norm);  // the last stage's head unit
  std::vector<float> out(first.begin(), first.begin() + table + positions);
  if (whole.tied) out.insert(out.end(), head_begin + table, last.end());  // the final norm
  for (std::int64_t q = 0; q < stack_.pp; ++q) {
    const auto& v = stages[static_cast<std::size_t>(q)];
    const auto from = v.begin() + (q == 0 ? table + positions : 0);
    out.insert(out.end(), from, from + block * stack_.layers);
  }
  if (!whole.tied) out.insert(out.end(), head_begin, last.end());
  return out;
}

std::vector<float> Trainer::whole_unit(std::int64_t u, const std::vector<float>& share) {
  if (tp_ == nullptr) return share;
  const auto n = static_cast<std::int64_t>(share.size());
  auto mine = dev_.allocate_floats(n, MemoryComponent::buffers);
  auto all = dev_.allocate_floats(n * stack_.tp, MemoryComponent::buffers);
  dev_.upload(share.data(), mine.f(), n * 4);
  tp_->wait(tp_->all_gather(mine.f(), all.f(), n));
  std::vector<float> shares(static_cast<std::size_t>(n * stack_.tp));
  dev_.download(all.f(), shares.data(), n * stack_.tp * 4);
  const auto whole = cost::whole_of(stack_);
  std::vector<float> out(
      static_cast<std::size_t>(cost::units_of(whole)[static_cast<std::size_t>(u)].params));
  for (std::int64_t q = 0; q < stack_.tp; ++q)
    place_share(tensor_pieces(stack_, u, q), shares.data() + q * n, out.data());
  return out;
}

}  // namespace dtplan::runtime
