// Atomic file output: stage beside the target, fsync, rename; follow links; write special
// files directly. See file_output.hpp for the contract.
#include "dtplan/model/file_output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <utility>

#include "dtplan/model/error.hpp"

namespace dtplan {
namespace {

namespace fs = std::filesystem;

std::string label(const OutputFile& f) {
  const std::string path = f.path.string();
  return f.what.empty() ? path : f.what + " " + path;
}

[[noreturn]] void fail(const OutputFile& f, const std::string& problem) {
  throw Error(label(f) + ": " + problem);
}

std::string system_reason(int error) {
  return std::strerror(error);
}

// Closes a descriptor on every path out of a scope.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and reports close's error (NFS and some file systems report write errors here).
  int close_checked() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// Writes all of `content`, retrying short writes and interrupted calls; 0 or the errno.
int write_all(int fd, std::string_view content) {
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

enum class Kind { absent, regular, special };

struct Target {
  fs::path path;  // after following links
  Kind kind = Kind::absent;
  mode_t mode = 0;  // permissions of an existing regular file
};

Target classify(const OutputFile& f) {
  Target t;
  try {
    t.path = resolve_output_path(f.path);
  } catch (const Error& e) {
    fail(f, e.what());
  }
  struct stat st {};
  if (::stat(t.path.c_str(), &st) != 0) {
    if (errno != ENOENT) fail(f, system_reason(errno));
    const fs::path dir = t.path.has_parent_path() ? t.path.parent_path() : fs::path(".");
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) fail(f, "the directory " + dir.string() + " does not exist");
    return t;
  }
  if (S_ISDIR(st.st_mode)) fail(f, "is a directory");
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    t.kind = Kind::special;
  } else if (S_ISREG(st.st_mode)) {
    t.kind = Kind::regular;
    t.mode = st.st_mode & 07777;
  } else {
    fail(f, "is neither a regular file, a FIFO nor a character device; not writing to it");
  }
  return t;
}

// A name beside the target no other writer (of this or another process) uses.
fs::path temporary_beside(const fs::path& target) {
  static std::atomic<unsigned> counter{0};
  const std::string name = "." + target.filename().string() + ".dtplan-" +
                           std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".tmp";
  return target.has_parent_path() ? target.parent_path() / name : fs::path(name);
}

void fsync_directory(const fs::path& file) {
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  Descriptor d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() >= 0) ::fsync(d.get());  // best effort: some file systems refuse directory fsync
}

// A regular file's content on disk under a temporary name; removed again unless committed.
class Staged {
 public:
  Staged(const OutputFile& f, const Target& t) : file_(f), target_(t) {
    temp_ = temporary_beside(t.path);
    // 0666 lets the umask decide, as for any new file; an existing file keeps its mode.
    Descriptor d(::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
    if (d.get() < 0) fail(f, "cannot create a temporary file beside it: " + system_reason(errno));
    created_ = true;
    if (t.kind == Kind::regular && ::fchmod(d.get(), t.mode) != 0) abort_with(errno);
    if (const int e = write_all(d.get(), f.content)) abort_with(e);
    if (::fsync(d.get()) != 0) abort_with(errno);
    if (const int e = d.close_checked()) abort_with(e);
  }
  Staged(const Staged&) = delete;
  Staged& operator=(const Staged&) = delete;
  Staged(Staged&& o) noexcept
      : file_(o.file_), target_(std::move(o.target_)), temp_(std::move(o.temp_)) {
    created_ = std::exchange(o.created_, false);
  }
  ~Staged() { discard(); }

  void commit() {
    if (::rename(temp_.c_str(), target_.path.c_str()) != 0) abort_with(errno);
    created_ = false;
    fsync_directory(target_.path);
  }

 private:
  [[noreturn]] void abort_with(int error) {
    discard();
    fail(file_, system_reason(error));
  }
  void discard() {
    if (created_) ::unlink(temp_.c_str());
    created_ = false;
  }
  const OutputFile& file_;
  Target target_;
  fs::path temp_;
  bool created_ = false;
};

// A FIFO or character device: opened for writing (a FIFO waits for its reader) and written.
void write_special(const OutputFile& f, const Target& t) {
  Descriptor d(::open(t.path.c_str(), O_WRONLY | O_CLOEXEC));
  if (d.get() < 0) fail(f, system_reason(errno));
  if (const int e = write_all(d.get(), f.content)) fail(f, system_reason(e));
  if (const int e = d.close_checked()) fail(f, system_reason(e));
}

}  // namespace

fs::path resolve_output_path(const fs::path& path) {
  constexpr int max_links = 40;  // as the kernel's own limit (ELOOP)
  fs::path current = path;
  for (int i = 0; i < max_links; ++i) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(current, ec))) return current;
    fs::path next = fs::read_symlink(current, ec);
    if (ec) throw Error("cannot read the symbolic link " + current.string() + ": " + ec.message());
    current = next.is_absolute() ? next : current.parent_path() / next;
  }
  throw Error("too many levels of symbolic links (a loop?) from " + path.string());
}

void check_output_path(const fs::path& path, std::string_view what) {
  const OutputFile f{path, {}, std::string(what)};
  const Target t = classify(f);
  if (t.kind == Kind::special) return;
  const fs::path dir = t.path.has_parent_path() ? t.path.parent_path() : fs::path(".");
  if (::access(dir.c_str(), W_OK) != 0) {
    fail(f, "cannot write in the directory " + dir.string() + ": " + system_reason(errno));
  }
}

void write_files_together(const std::vector<OutputFile>& files) {
  std::vector<std::pair<const OutputFile*, Target>> specials;
  std::vector<Staged> staged;
  staged.reserve(files.size());
  for (const auto& f : files) {
    Target t = classify(f);
    if (t.kind == Kind::special) {
      specials.emplace_back(&f, std::move(t));
    } else {
      staged.emplace_back(f, t);
    }
  }
  for (const auto& [f, t] : specials)
    write_special(*f, t);
  for (auto& s : staged)
    s.commit();
}

void write_file_atomically(const fs::path& path, std::string_view content, std::string_view what) {
  write_files_together({OutputFile{path, std::string(content), std::string(what)}});
}

std::string standard_output_error() {
  errno = 0;
  std::cout.flush();
  const int cxx_errno = errno;
  const bool cxx_failed = !std::cout;
  errno = 0;
  const bool c_failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  const int c_errno = errno;
  if (!cxx_failed && !c_failed) return {};
  const int reason = c_errno != 0 ? c_errno : cxx_errno;
  return reason != 0 ? system_reason(reason) : std::string("the write failed");
}

}  // namespace dtplan
