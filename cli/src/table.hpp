// A plain-text table with right-aligned numeric columns, for terminal reports.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace dtplan::cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void add_rule() { rows_.emplace_back(); }
  // Right-align the first column too (numbers first, as nccl-tests prints sizes).
  void align_first_right() { first_left_ = false; }
  // Word-wrap the last column at `max_chars` (continuation lines start under it), so that a long
  // explanation does not stretch the rules to its full length.
  void wrap_last_column(std::size_t max_chars) { wrap_last_chars_ = max_chars; }
  // Column 0 is left-aligned, the others right-aligned unless listed in `left_columns`.
  void print(std::ostream& out, const std::vector<std::size_t>& left_columns = {},
             const std::string& indent = "  ") const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
  bool first_left_ = true;
  std::size_t wrap_last_chars_ = 0;
};

}  // namespace dtplan::cli
