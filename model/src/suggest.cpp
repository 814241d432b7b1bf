// Close-name suggestions for unknown user-typed names.
#include "dtplan/model/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <numeric>

namespace dtplan {

std::string to_lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

int edit_distance(std::string_view a_in, std::string_view b_in) {
  const std::string a = to_lower(a_in);
  const std::string b = to_lower(b_in);
  std::vector<int> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> close_names(std::string_view typed, const std::vector<std::string>& all,
                                     std::size_t limit) {
  const std::string lowered = to_lower(typed);
  struct Scored {
    int score;     // edit distance, or 1 when one name contains the other
    int distance;  // plain edit distance, to break ties
    std::string name;
  };
  std::vector<Scored> scored;
  for (const auto& name : all) {
    const std::string candidate = to_lower(name);
    const int distance = edit_distance(lowered, candidate);
    const bool contains = !lowered.empty() && (candidate.find(lowered) != std::string::npos ||
                                               lowered.find(candidate) != std::string::npos);
    const int score = contains ? std::min(distance, 1) : distance;
    const int allowed = std::max(2, static_cast<int>(lowered.size()) / 3);
    if (score <= allowed) scored.push_back({score, distance, name});
  }
  std::stable_sort(scored.begin(), scored.end(), [](const Scored& x, const Scored& y) {
    return x.score != y.score ? x.score < y.score : x.distance < y.distance;
  });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < limit; ++i)
    out.push_back(scored[i].name);
  return out;
}

std::string unknown_name_message(std::string_view what, std::string_view typed,
                                 const std::vector<std::string>& all) {
  std::string message = "unknown " + std::string(what) + " '" + std::string(typed) + "'";
  const auto close = close_names(typed, all);
  if (!close.empty()) message += " (did you mean: " + join(close, ", ") + "?)";
  message += "; known: " + join(all, ", ");
  return message;
}

}  // namespace dtplan
