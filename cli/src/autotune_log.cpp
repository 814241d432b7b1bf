// Autotuning results file (see autotune_log.hpp).
#include "autotune_log.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"

namespace dtplan::cli {

nlohmann::json trial_json(const TrialRecord& t) {
  nlohmann::json j{{"type", "trial"},
                   {"key", t.key},
                   {"label", t.label},
                   {"predicted_step_s", t.predicted_s},
                   {"wall_s", t.wall_s}};
  if (t.measured_s) {
    j["measured_step_s"] = *t.measured_s;
    j["error"] = t.error();
    j["samples_per_s"] = t.samples_per_s;
    j["peak_bytes"] = t.peak_bytes;
    j["measurement"] = t.measurement;
    const auto& s = t.sample;
    j["step_sample"] = {{"compute_s", s.compute_s},
                        {"collectives_s", s.collectives_s},
                        {"optimizer_s", s.optimizer_s},
                        {"optimizer_collectives_s", s.optimizer_collectives_s},
                        {"measured_compute_s", s.measured_compute_s},
                        {"measured_optimizer_s", s.measured_optimizer_s}};
  } else {
    j["failure"] = t.failure;
  }
  return j;
}

TrialRecord trial_from_line(const std::string& line, const std::string& where) {
  const auto r = ObjectReader::root(parse_json(line, where));
  if (r.string("type") != "trial") r.fail("type", "expected \"trial\"");
  TrialRecord t;
  t.key = r.string("key");
  t.label = r.string("label");
  t.predicted_s = r.number("predicted_step_s");
  t.wall_s = r.number("wall_s");
  if (!r.has("measured_step_s")) {
    t.failure = r.string("failure");
    r.reject_unknown_keys();
    return t;
  }
  t.measured_s = r.number("measured_step_s");
  (void)r.number("error");  // derived from the two times
  t.samples_per_s = r.number("samples_per_s");
  t.peak_bytes = r.integer("peak_bytes");
  t.measurement = r.string("measurement");
  const auto s = r.object("step_sample");
  t.sample = {t.label,
              s.number("compute_s"),
              s.number("collectives_s"),
              s.number("optimizer_s"),
              s.number("optimizer_collectives_s"),
              s.number("measured_compute_s"),
              s.number("measured_optimizer_s")};
  s.reject_unknown_keys();
  r.reject_unknown_keys();
  return t;
}

namespace {

std::vector<TrialRecord> read_previous(const std::filesystem::path& path,
                                       const nlohmann::json& header) {
  if (std::filesystem::is_directory(path)) {
    throw Error("--results " + path.string() + ": is a directory, not a results file");
  }
  std::ifstream in(path);
  if (!in) throw Error("--results " + path.string() + ": cannot read it to resume");
  std::vector<TrialRecord> out;
  std::string line;
  int number = 0;
  std::streamoff good_end = 0;  // just past the last complete line
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const std::string where = path.string() + ":" + std::to_string(number);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error&) {
      // A line cut short by an interruption: cut it off, the trial runs again.
      if (in.peek() == EOF && number > 1) {
        in.close();
        std::filesystem::resize_file(path, static_cast<std::uintmax_t>(good_end));
        break;
      }
      throw Error(where + ": not a JSON line");
    }
    good_end = in.tellg();
    if (good_end < 0) good_end = static_cast<std::streamoff>(std::filesystem::file_size(path));
    if (number == 1) {
      for (const auto& [key, value] : header.items()) {
        if (key == "created") continue;
        if (!j.contains(key) || j[key] != value) {
          throw Error("--resume: " + path.string() + " tuned a different job: its \"" + key +
                      "\" is " + (j.contains(key) ? j[key].dump() : "missing") + ", this run's " +
                      value.dump() + " (use another --results file)");
        }
      }
      continue;
    }
    out.push_back(trial_from_line(line, where));
  }
  if (number == 0) throw Error("--resume: " + path.string() + " is empty");
  return out;
}

}  // namespace

ResultsFile::ResultsFile(const std::filesystem::path& path, const nlohmann::json& header,
                         bool resume)
    : path_(path) {
  const bool exists = std::filesystem::exists(path);
  if (exists && !resume) {
    throw Error("--results " + path.string() +
                " exists: pass --resume to continue it, or choose another file");
  }
  if (exists) previous_ = read_previous(path, header);
  file_ = std::fopen(path.c_str(), exists ? "a" : "w");
  if (!file_) {
    throw Error("--results " + path.string() + ": cannot open (" + std::strerror(errno) + ")");
  }
  if (exists && std::filesystem::file_size(path) > 0) {
    std::ifstream tail(path, std::ios::binary);
    tail.seekg(-1, std::ios::end);
    if (tail.get() != '\n') std::fputs("\n", file_);  // the last trial line was complete
  }
  if (!exists) {
    const auto line = header.dump() + "\n";
    std::fputs(line.c_str(), file_);
    std::fflush(file_);
  }
}

ResultsFile::~ResultsFile() {
  if (file_) std::fclose(file_);
}

void ResultsFile::append(const TrialRecord& t) {
  const auto line = trial_json(t).dump() + "\n";
  if (std::fputs(line.c_str(), file_) < 0 || std::fflush(file_) != 0 || fsync(fileno(file_)) != 0) {
    throw Error("--results " + path_.string() + ": cannot append (" + std::strerror(errno) + ")");
  }
}

}  // namespace dtplan::cli
