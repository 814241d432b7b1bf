// The layout search's memory pricing over several threads (see memory_batches.hpp).
#include "memory_batches.hpp"

#include <algorithm>
#include <exception>
#include <thread>

#include "dtplan/model/error.hpp"

namespace dtplan::planner::detail {

std::int64_t threads_for(std::int64_t requested) {
  if (requested < 0) {
    throw Error("threads: " + std::to_string(requested) +
                " (must be 0 for the host's hardware threads, or 1 or more)");
  }
  if (requested > 0) return requested;
  const auto host = static_cast<std::int64_t>(std::thread::hardware_concurrency());
  return std::clamp<std::int64_t>(host, 1, kMostThreads);
}

MemoryBatches::MemoryBatches(const ModelDesc& m, const cost::OverheadConstants& k,
                             std::int64_t threads)
    : m_(m), k_(k) {
  for (std::int64_t i = 0; i < threads_for(threads); ++i)
    caches_.push_back(std::make_unique<cost::StageMemoryCache>());
}

MemoryBatches::~MemoryBatches() = default;

MemoryBatches::Priced MemoryBatches::price_slice(const std::vector<cost::Layout3D>& layouts,
                                                 std::size_t begin, std::size_t end,
                                                 std::size_t thread,
                                                 std::vector<cost::Memory3D>& figures) {
  for (std::size_t i = begin; i < end; ++i) {
    try {
      figures[i] = cost::memory_3d(m_, layouts[i], k_, *caches_[thread]);
    } catch (...) {
      return {i, std::current_exception()};
    }
  }
  return {end, nullptr};
}

MemoryBatches::Priced MemoryBatches::price(const std::vector<cost::Layout3D>& layouts,
                                           std::vector<cost::Memory3D>& figures) {
  figures.resize(layouts.size());
  const std::size_t n = layouts.size();
  // A thread per slice of at least this many layouts: fewer are not worth a thread.
  constexpr std::size_t kSmallest = 64;
  const std::size_t threads = std::min(caches_.size(), std::max<std::size_t>(1, n / kSmallest));
  if (threads <= 1) return price_slice(layouts, 0, n, 0, figures);
  std::vector<Priced> slices(threads);
  auto run = [&](std::size_t t) {
    slices[t] = price_slice(layouts, n * t / threads, n * (t + 1) / threads, t, figures);
  };
  {
    std::vector<std::jthread> others;
    others.reserve(threads - 1);
    for (std::size_t t = 1; t < threads; ++t)
      others.emplace_back(run, t);
    run(0);
  }  // joined here
  // The earliest error: every slice before the first that failed was priced whole.
  for (auto& slice : slices) {
    if (slice.error) return slice;
  }
  return {n, nullptr};
}

}  // namespace dtplan::planner::detail
