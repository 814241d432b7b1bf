// Autotuning results file (see autotune_log.hpp).
#include "dtplan/runtime/autotune_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "dtplan/model/error.hpp"
#include "dtplan/model/json_reader.hpp"
#include "dtplan/model/number_range.hpp"

namespace dtplan::runtime {

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
  t.predicted_s = r.number("predicted_step_s", kSeconds);
  t.wall_s = r.number("wall_s", kSeconds);
  if (!r.has("measured_step_s")) {
    t.failure = r.string("failure");
    r.reject_unknown_keys();
    return t;
  }
  t.measured_s = r.number("measured_step_s", kPositiveSeconds);
  (void)r.number("error");  // derived from the two times
  t.samples_per_s = r.number("samples_per_s", NumberRange::non_negative(1e12));
  t.peak_bytes = r.integer("peak_bytes", 0, std::int64_t{1} << 50);  // a PiB: past any device
  t.measurement = r.string("measurement");
  const auto s = r.object("step_sample");
  t.sample = {t.label,
              s.number("compute_s", kSeconds),
              s.number("collectives_s", kSeconds),
              s.number("optimizer_s", kSeconds),
              s.number("optimizer_collectives_s", kSeconds),
              s.number("measured_compute_s", kSeconds),
              s.number("measured_optimizer_s", kSeconds)};
  s.reject_unknown_keys();
  r.reject_unknown_keys();
  return t;
}

namespace {

[[noreturn]] void fail_io(const std::filesystem::path& path, const std::string& what) {
  throw FieldError("results",
                   path.string() + ": cannot " + what + " (" + std::strerror(errno) + ")");
}

// An exclusive lock on the whole file, or an error naming the process that holds it.
void lock_or_refuse(int fd, const std::filesystem::path& path) {
  struct flock want {};
  want.l_type = F_WRLCK;
  want.l_whence = SEEK_SET;  // l_start 0, l_len 0: the whole file, however long it grows
  if (fcntl(fd, F_SETLK, &want) == 0) return;
  if (errno != EACCES && errno != EAGAIN) fail_io(path, "lock it");
  struct flock holder = want;
  std::string who = "another process";
  if (fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK) {
    who = "process " + std::to_string(holder.l_pid);
  }
  throw FieldError("results", path.string() + ": in use by " + who +
                                  " (another dtplan autotune on the same file); wait for it to "
                                  "finish, or choose another {results} file");
}

std::string read_all(int fd, const std::filesystem::path& path) {
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = pread(fd, buf, sizeof buf, static_cast<off_t>(text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io(path, "read it to resume");
    if (n == 0) return text;
    text.append(buf, static_cast<std::size_t>(n));
  }
}

void write_all(int fd, const std::string& text, const std::filesystem::path& path) {
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io(path, "append");
    done += static_cast<std::size_t>(n);
  }
}

void check_header(const nlohmann::json& j, const nlohmann::json& header,
                  const std::filesystem::path& path) {
  for (const auto& [key, value] : header.items()) {
    if (key == "created") continue;
    if (!j.contains(key) || j[key] != value) {
      throw FieldError("resume", path.string() + " tuned a different job: its \"" + key + "\" is " +
                                     (j.contains(key) ? j[key].dump() : "missing") +
                                     ", this run's " + value.dump() +
                                     " (use another {results} file)");
    }
  }
}

struct Previous {
  std::vector<TrialRecord> trials;
  std::size_t good_end = 0;  // just past the last complete line
  std::string note;          // what was dropped, if anything
};

Previous parse_previous(const std::string& text, const std::filesystem::path& path,
                        const nlohmann::json& header) {
  Previous out;
  std::map<std::string, int> measured_on;  // trial key -> line number
  int number = 0;
  for (std::size_t at = 0; at < text.size();) {
    const auto nl = text.find('\n', at);
    const std::size_t next = nl == std::string::npos ? text.size() : nl + 1;
    const std::string line = text.substr(at, next - at - (nl == std::string::npos ? 0 : 1));
    const std::string where = path.string() + ":" + std::to_string(++number);
    if (line.empty()) {
      at = out.good_end = next;
      continue;
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error&) {
      // A line cut short by an interruption: cut it off, the trial runs again.
      if (next == text.size() && number > 1) {
        out.note = where + ": dropped " + std::to_string(text.size() - at) +
                   " bytes of a half-written trial line (an interrupted run); that trial runs "
                   "again";
        return out;
      }
      throw Error(where + ": not a JSON line");
    }
    at = out.good_end = next;
    if (number == 1) {
      check_header(j, header, path);
      continue;
    }
    auto t = trial_from_line(line, where);
    // A measured trial is never run again by a resume: a second line for it means two tuners
    // appended to this file at once.
    if (const auto seen = measured_on.find(t.key); seen != measured_on.end()) {
      throw Error(where + ": trial \"" + t.key + "\" was already measured on line " +
                  std::to_string(seen->second) +
                  " (two tuners wrote this file at once?); keep one of the two lines, or start "
                  "a new results file");
    }
    if (t.measured_s) measured_on[t.key] = number;
    out.trials.push_back(std::move(t));
  }
  if (number == 0) throw FieldError("resume", path.string() + " is empty");
  return out;
}

}  // namespace

ResultsFile::ResultsFile(const std::filesystem::path& path, const nlohmann::json& header,
                         bool resume)
    : path_(path) {
  if (std::filesystem::is_directory(path)) {
    throw FieldError("results", path.string() + ": is a directory, not a results file");
  }
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const bool created = fd_ >= 0;
  if (!created) {
    if (errno != EEXIST) fail_io(path, "create it");
    if (!resume) {
      throw FieldError(
          "results",
          path.string() + " exists: pass {resume} to continue it, or choose another file");
    }
    fd_ = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd_ < 0) fail_io(path, "open it");
  }
  try {
    lock_or_refuse(fd_, path);
    if (created) {
      write_all(fd_, header.dump() + "\n", path);
      return;
    }
    const auto text = read_all(fd_, path);
    auto prev = parse_previous(text, path, header);
    if (prev.good_end < text.size() && ftruncate(fd_, static_cast<off_t>(prev.good_end)) != 0) {
      fail_io(path, "cut off its half-written last line");
    }
    if (lseek(fd_, 0, SEEK_END) < 0) fail_io(path, "append");
    // The last complete line may lack its newline.
    if (prev.good_end > 0 && text[prev.good_end - 1] != '\n') write_all(fd_, "\n", path);
    previous_ = std::move(prev.trials);
    repair_note_ = std::move(prev.note);
  } catch (...) {
    close(fd_);
    throw;
  }
}

ResultsFile::~ResultsFile() {
  if (fd_ >= 0) close(fd_);  // releases the lock
}

void ResultsFile::append(const TrialRecord& t) {
  write_all(fd_, trial_json(t).dump() + "\n", path_);
  if (fsync(fd_) != 0) fail_io(path_, "sync");
  ++appended_;
}

}  // namespace dtplan::runtime
