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

Trainer::Trainer(const cost::DenseStack& stack, const TrainerSettings& settings, Device& device,
                 Communicator& comm, const MpiGroup& host, Communicator* tp,
                 const MpiGroup* tp_host)
    : stack_(stack),
      set_(settings),
      dev_(device),
      comm_(comm),
      host_(host),
      tp_(stack.tp > 1 ? tp : nullptr),
      tp_host_(stack.tp > 1 ? tp_host : nullptr),
      mode_(cost::runtime_mode(settings.strategy)),
      layout_(stack, comm.size()),
      buckets_(layout_.buckets(settings.bucket_cap_bytes)),
      model_(stack, device, settings.micro_batch * stack.seq_len, tp) {
  if (stack.tp > 1 && (tp_host_ == nullptr || tp_host_->size() != stack.tp)) {
    throw Error("tensor parallelism over " + std::to_string(stack.tp) +
                " ranks needs their host group");
  }
  if (set_.optimizer == Optimizer::adam8bit) {
    throw Error("optimizer adam8bit: not executed by dtplan-run (no 8-bit kernels); use adam");
  }
  if (set_.grad_accum < 1 || set_.micro_batch < 1) {
    throw Error("micro-batch and gradient accumulation must be >= 1");
  }
  const std::int64_t tokens = set_.micro_batch * stack.seq_len;
  ids_ = dev_.allocate(tokens * 4, MemoryComponent::data);
  targets_ = dev_.allocate(tokens * 4, MemoryComponent::data);
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

void Trainer::initialise_weights() {
  const int r = comm_.rank();
  for (std::size_t u = 0; u < layout_.units().size(); ++u) {
    const auto& unit = layout_.units()[u];
    const auto index = static_cast<std::int64_t>(u);
    auto values = DenseModel::initial_unit(cost::whole_of(stack_), index, set_.seed);
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
  for (std::int64_t micro = 0; micro < set_.grad_accum; ++micro)
    micro_step(index, micro, m);
  comm_.set_phase("gradient sync");
  double t = now_s();
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
  // Every rank of a tensor-parallel group computed the same loss.
  m.loss = host_.sum(loss_sum_) / tokens / static_cast<double>(stack_.tp);
  m.loss_scale = loss_scale_;
  m.collectives = comm_.records();
  if (tp_ != nullptr) {
    const auto& tp = tp_->records();
    m.collectives.insert(m.collectives.end(), tp.begin(), tp.end());
  }
  return m;
}

void Trainer::micro_step(std::int64_t step, std::int64_t micro, StepMeasurement& m) {
  const std::int64_t n = comm_.size(), mb = set_.micro_batch;
  const std::int64_t first_sample = (micro * n + comm_.rank()) * mb;
  // Tokens of the whole vocabulary (a tensor-parallel share holds a slice of it).
  const auto batch =
      make_batch(set_.seed, step, first_sample, mb, stack_.seq_len, stack_.vocab * stack_.tp);
  model_.set_samples(set_.seed, step, first_sample);  // the micro-step's dropout masks
  dev_.upload(batch.ids.data(), ids_.i(), ids_.bytes());
  dev_.upload(batch.targets.data(), targets_.i(), targets_.bytes());
  comm_.set_phase("forward");
  if (tp_ != nullptr) tp_->set_phase("tensor-parallel forward");
  double t = now_s();
  forward(m);
  dev_.synchronize();
  m.forward_s += now_s() - t;
  comm_.set_phase("backward");
  if (tp_ != nullptr) tp_->set_phase("tensor-parallel backward");
  t = now_s();
  backward(micro == set_.grad_accum - 1 || !no_sync_effective());
  dev_.synchronize();
  m.backward_s += now_s() - t;
}

void Trainer::forward(StepMeasurement&) {
  // Each rank's loss is its own tokens' mean; averaging over ranks gives the global mean.
  const auto tokens = static_cast<float>(set_.micro_batch * set_.grad_accum * stack_.seq_len);
  model_.forward_embedding(unit_params(0), ids_.i());
  release_params(0);
  for (std::int64_t l = 0; l < stack_.layers; ++l) {
    model_.forward_block(l, unit_params(l + 1));
    release_params(l + 1);
  }
  const std::int64_t head = stack_.tied ? 0 : stack_.layers + 1;
  // The head's weights stay gathered: backward starts with them.
  loss_sum_ += model_.forward_head(unit_params(head), targets_.i(), loss_scale_ / tokens);
}

void Trainer::backward(bool sync) {
  const std::int64_t head = stack_.tied ? 0 : stack_.layers + 1;
  model_.backward_head(unit_params(head), unit_grads(head));
  release_params(head);
  if (!stack_.tied) unit_done(head, sync);
  for (std::int64_t l = stack_.layers - 1; l >= 0; --l) {
    model_.backward_block(l, unit_params(l + 1), unit_grads(l + 1));
    release_params(l + 1);
    unit_done(l + 1, sync);
  }
  model_.backward_embedding(ids_.i(), unit_grads(0));
  unit_done(0, sync);
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
    if (tp_host_ != nullptr) sum_sq = tp_host_->sum(sum_sq);
    if (tp_host_ != nullptr) bad = tp_host_->max(static_cast<double>(bad)) > 0;
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
