// Plain-text table layout.
#include "table.hpp"

#include <algorithm>
#include <iomanip>

namespace dtplan::cli {

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
  auto print_row = [&](const std::vector<std::string>& cells) {
    std::string line = indent;
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      const std::string pad(width[i] - cell.size(), ' ');
      line += (i ? "  " : "") + (is_left(i) ? cell + pad : pad + cell);
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    out << line << '\n';
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
