// The autotuning results file, JSON lines: a header (what is tuned: model, scale, sequence,
// batch, ranks, backend, steps) and one line per trial, appended and flushed to disk as each
// trial finishes, so an interrupted run resumes (--resume) without redoing trials. Resuming
// checks the header against the new command and names the first field that differs.
#pragma once

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "autotune_search.hpp"

namespace dtplan::cli {

nlohmann::json trial_json(const TrialRecord& t);
// One trial line (checked: types, unknown keys); throws naming `where` and the key.
TrialRecord trial_from_line(const std::string& line, const std::string& where);

class ResultsFile {
 public:
  // New file (refused if it exists and !resume), or an existing one to resume: its header must
  // equal `header` (same keys and values).
  ResultsFile(const std::filesystem::path& path, const nlohmann::json& header, bool resume);
  ~ResultsFile();
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  const std::vector<TrialRecord>& previous() const { return previous_; }
  // One line, flushed and synced before returning.
  void append(const TrialRecord& t);

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::vector<TrialRecord> previous_;
};

}  // namespace dtplan::cli
