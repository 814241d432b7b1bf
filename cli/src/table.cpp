// Plain-text table layout.
#include "table.hpp"

#include <algorithm>
#include <iomanip>

namespace dtplan::cli {

namespace {

// Greedy word wrap: lines of at most `max_chars` where the words allow (a longer word keeps a
// line of its own).
std::vector<std::string> wrap_words(const std::string& text, std::size_t max_chars) {
  std::vector<std::string> lines;
  std::string line;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t space = text.find(' ', at);
    const std::size_t end = space == std::string::npos ? text.size() : space;
    const std::string word = text.substr(at, end - at);
    at = end + 1;
    if (word.empty()) continue;
    if (!line.empty() && line.size() + 1 + word.size() > max_chars) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty() || lines.empty()) lines.push_back(line);
  return lines;
}

}  // namespace

void TextTable::print(std::ostream& out, const std::vector<std::size_t>& left_columns,
                      const std::string& indent) const {
  std::vector<std::size_t> width(header_.size(), 0);
  auto widen = [&width](const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], cells[i].size());
    }
  };
  widen(header_);
  for (const auto& row : rows_)
    widen(row);
  auto is_left = [&](std::size_t i) {
    return (i == 0 && first_left_) ||
           std::find(left_columns.begin(), left_columns.end(), i) != left_columns.end();
  };
  const std::size_t last = width.empty() ? 0 : width.size() - 1;
  if (wrap_last_chars_ > 0 && !width.empty()) {
    width[last] = std::min(width[last], std::max(wrap_last_chars_, header_[last].size()));
  }
  auto print_line = [&](const std::vector<std::string>& cells) {
    std::string line = indent;
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      const std::string pad(width[i] > cell.size() ? width[i] - cell.size() : 0, ' ');
      line += (i ? "  " : "") + (is_left(i) ? cell + pad : pad + cell);
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    out << line << '\n';
  };
  auto print_row = [&](const std::vector<std::string>& cells) {
    if (wrap_last_chars_ == 0 || cells.size() < width.size() || cells[last].size() <= width[last]) {
      print_line(cells);
      return;
    }
    std::vector<std::string> piece(cells);
    for (const auto& text : wrap_words(cells[last], width[last])) {
      piece[last] = text;
      print_line(piece);
      std::fill(piece.begin(), piece.end() - 1, std::string());
    }
  };
  print_row(header_);
  std::size_t total = 0;
  for (const auto w : width)
    total += w + 2;
  for (const auto& row : rows_) {
    if (row.empty()) {
      out << indent << std::string(total > 2 ? total - 2 : 0, '-') << '\n';
    } else {
      print_row(row);
    }
  }
}

}  // namespace dtplan::cli
