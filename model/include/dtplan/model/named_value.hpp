// Enumerations with names: a table of (value, name, description) rows, and the lookups every
// name_of / parse_* function is written with (unknown names get close-name suggestions).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "dtplan/model/error.hpp"
#include "dtplan/model/suggest.hpp"

namespace dtplan {

template <class E>
struct NamedValue {
  E value;
  std::string_view name;
  std::string_view description;
};

// The name of `v` in `table` ("?" when missing).
template <class E, std::size_t N>
std::string_view name_in(const std::array<NamedValue<E>, N>& table, E v) {
  for (const auto& row : table) {
    if (row.value == v) return row.name;
  }
  return "?";
}

// The value named `text` (case-insensitive); throws dtplan::Error naming `what`, the close
// names and all the known ones.
template <class E, std::size_t N>
E value_in(const std::array<NamedValue<E>, N>& table, std::string_view text,
           std::string_view what) {
  const std::string lowered = to_lower(text);
  std::vector<std::string> names;
  for (const auto& row : table) {
    if (row.name == lowered) return row.value;
    names.emplace_back(row.name);
  }
  throw Error(unknown_name_message(what, text, names));
}

}  // namespace dtplan
