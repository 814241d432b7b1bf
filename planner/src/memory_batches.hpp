// The layout search's memory pricing, a batch of layouts at a time over several threads
// (search3d.cpp). Each thread keeps its own stage cache; memory_3d's figures do not depend on
// what a cache holds, so the result is the same on any number of threads.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "dtplan/cost/overheads.hpp"
#include "dtplan/cost/parallel3d.hpp"
#include "dtplan/model/model_desc.hpp"

namespace dtplan::planner::detail {

// Threads for `requested` (0: the host's hardware threads, at most kMostThreads).
inline constexpr std::int64_t kMostThreads = 8;
std::int64_t threads_for(std::int64_t requested);

class MemoryBatches {
 public:
  MemoryBatches(const ModelDesc& m, const cost::OverheadConstants& k, std::int64_t threads);
  ~MemoryBatches();
  MemoryBatches(const MemoryBatches&) = delete;
  MemoryBatches& operator=(const MemoryBatches&) = delete;

  // The first `count` layouts priced; `error`, if any, is memory_3d's for layout `count`.
  struct Priced {
    std::size_t count = 0;
    std::exception_ptr error;
  };
  // figures[i] = memory_3d(m, layouts[i], k, cache) for i < count, as one thread pricing
  // them in order would have got up to its first error. Each thread takes a contiguous slice
  // (neighbouring layouts share stages, which its cache keeps).
  Priced price(const std::vector<cost::Layout3D>& layouts, std::vector<cost::Memory3D>& figures);

 private:
  Priced price_slice(const std::vector<cost::Layout3D>& layouts, std::size_t begin, std::size_t end,
                     std::size_t thread, std::vector<cost::Memory3D>& figures);

  const ModelDesc& m_;
  const cost::OverheadConstants& k_;
  std::vector<std::unique_ptr<cost::StageMemoryCache>> caches_;  // one per thread
};

}  // namespace dtplan::planner::detail
