// The autotuning results file, JSON lines: a header (what is tuned: model, scale, sequence,
// batch, ranks, backend, steps) and one line per trial, appended and flushed to disk as each
// trial finishes, so an interrupted run resumes (--resume) without redoing trials. Resuming
// checks the header against the new command and names the first field that differs.
//
// One tuner per file: the file is held under an exclusive POSIX record lock (fcntl F_SETLK)
// from opening to closing, so a second tuner on the same file (resumed twice at once, which
// appended every remaining trial twice) is refused with the holder's pid. The lock lives on
// the file's one descriptor: the file is only ever read and written through it (closing any
// other descriptor of the same file would drop a POSIX lock).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dtplan/runtime/autotune_search.hpp"

namespace dtplan::runtime {

nlohmann::json trial_json(const TrialRecord& t);
// One trial line (checked: types, unknown keys); throws naming `where` and the key.
TrialRecord trial_from_line(const std::string& line, const std::string& where);

class ResultsFile {
 public:
  // New file (refused if it exists and !resume), or an existing one to resume: its header must
  // equal `header` (same keys and values), and no trial may follow a measured one of the same
  // key (a resumed run never redoes a measured trial: such a file was written by two tuners).
  // Throws naming the file and the holder's pid when another process holds it.
  ResultsFile(const std::filesystem::path& path, const nlohmann::json& header, bool resume);
  ~ResultsFile();
  ResultsFile(const ResultsFile&) = delete;
  ResultsFile& operator=(const ResultsFile&) = delete;

  const std::vector<TrialRecord>& previous() const { return previous_; }
  // What resuming repaired, for the user ("line 5: dropped 31 bytes of a half-written trial
  // line"); empty when nothing was.
  const std::string& repair_note() const { return repair_note_; }
  // One line, flushed and synced before returning.
  void append(const TrialRecord& t);
  // Trials appended by this process.
  std::size_t appended() const { return appended_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::vector<TrialRecord> previous_;
  std::string repair_note_;
  std::size_t appended_ = 0;
};

}  // namespace dtplan::runtime
