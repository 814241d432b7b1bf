// Autotuning results file (see autotune_log.hpp).
#include "autotune_log.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "dtplan/model/error.hpp"

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

namespace {

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number()) {
    throw Error(where + ": \"" + key + "\" is missing or not a number");
  }
  return j[key].get<double>();
}

std::string text(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string()) {
    throw Error(where + ": \"" + key + "\" is missing or not a string");
  }
  return j[key].get<std::string>();
}

}  // namespace

TrialRecord trial_from_json(const nlohmann::json& j, const std::string& where) {
  TrialRecord t;
  t.key = text(j, "key", where);
  t.label = text(j, "label", where);
  t.predicted_s = number(j, "predicted_step_s", where);
  t.wall_s = number(j, "wall_s", where);
  if (!j.contains("measured_step_s")) {
    t.failure = text(j, "failure", where);
    return t;
  }
  t.measured_s = number(j, "measured_step_s", where);
  t.samples_per_s = number(j, "samples_per_s", where);
  t.peak_bytes = static_cast<std::int64_t>(number(j, "peak_bytes", where));
  t.measurement = text(j, "measurement", where);
  if (!j.contains("step_sample") || !j["step_sample"].is_object()) {
    throw Error(where + ": \"step_sample\" is missing");
  }
  const auto& s = j["step_sample"];
  t.sample = {t.label,
              number(s, "compute_s", where),
              number(s, "collectives_s", where),
              number(s, "optimizer_s", where),
              number(s, "optimizer_collectives_s", where),
              number(s, "measured_compute_s", where),
              number(s, "measured_optimizer_s", where)};
  return t;
}

namespace {

std::vector<TrialRecord> read_previous(const std::filesystem::path& path,
                                       const nlohmann::json& header) {
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
    out.push_back(trial_from_json(j, where));
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
