// The memory/objective Pareto front of a set of entries: fewest bytes first, each with a better
// (lower) objective than every entry that uses less memory. Shared by the data-parallel search,
// the layout search and the plan that merges them.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

namespace dtplan::planner::detail {

template <class Items, class Memory, class Objective>
auto pareto_front(const Items& items, Memory memory, Objective objective) {
  using T = typename Items::value_type;
  std::vector<const T*> by_memory;
  by_memory.reserve(items.size());
  for (const auto& c : items)
    by_memory.push_back(&c);
  std::stable_sort(by_memory.begin(), by_memory.end(), [&](const T* a, const T* b) {
    if (memory(*a) != memory(*b)) return memory(*a) < memory(*b);
    return objective(*a) < objective(*b);
  });
  std::vector<const T*> front;
  double best = std::numeric_limits<double>::infinity();
  for (const auto* c : by_memory) {
    if (objective(*c) < best) {
      front.push_back(c);
      best = objective(*c);
    }
  }
  return front;
}

}  // namespace dtplan::planner::detail
