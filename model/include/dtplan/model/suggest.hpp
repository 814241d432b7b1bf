// "Did you mean" support for names typed by users (presets, GPUs, enum values).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dtplan {

// Case-insensitive Levenshtein distance.
int edit_distance(std::string_view a, std::string_view b);

// Up to `limit` candidates close to `typed` (small edit distance, or one contains the other),
// closest first.
std::vector<std::string> close_names(std::string_view typed, const std::vector<std::string>& all,
                                     std::size_t limit = 4);

// "unknown <what> 'x' (did you mean: a, b?) (known: ...)" as one line.
std::string unknown_name_message(std::string_view what, std::string_view typed,
                                 const std::vector<std::string>& all);

std::string to_lower(std::string_view s);
std::string join(const std::vector<std::string>& items, std::string_view separator);

}  // namespace dtplan
