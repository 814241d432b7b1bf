// Tests for model/src/file_output.cpp: atomic replacement, links followed, special files
// written directly, a failed write leaving the previous file intact.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"

using namespace dtplan;
namespace fs = std::filesystem;

namespace {

// A fresh, empty directory for one test case.
fs::path scratch(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("dtplan-file-output-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t entries(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), {}));
}

// Limits the size of files this process may write, as a full disk would; restores it after.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG
    rlimit lim = saved_;
    lim.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace

TEST_CASE("a new file gets the content and no temporary file is left beside it") {
  const auto dir = scratch("new");
  write_file_atomically(dir / "a.json", "{\"x\": 1}\n");
  CHECK(read(dir / "a.json") == "{\"x\": 1}\n");
  CHECK(entries(dir) == 1);
}

TEST_CASE("replacing a file keeps its permissions") {
  const auto dir = scratch("mode");
  const auto f = dir / "plan.json";
  std::ofstream(f) << "old";
  fs::permissions(f, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  write_file_atomically(f, "new");
  CHECK(read(f) == "new");
  CHECK(fs::status(f).permissions() ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
}

TEST_CASE("a write that fails half-way (full disk) leaves the previous file intact") {
  const auto dir = scratch("full");
  const auto f = dir / "measurement.json";
  std::ofstream(f) << "previous measurement";
  {
    FileSizeLimit limit(4096);
    CHECK_THROWS_WITH(write_file_atomically(f, std::string(100000, 'x'), "--out"),
                      Catch::StartsWith("--out " + f.string() + ": File too large"));
  }
  CHECK(read(f) == "previous measurement");
  CHECK(entries(dir) == 1);  // the temporary was removed
}

TEST_CASE("files written together: one that cannot be written stops all of them") {
  const auto dir = scratch("together");
  const auto good = dir / "ds.json";
  CHECK_THROWS_WITH(
      write_files_together({{good, "{}", "--export-deepspeed"},
                            {dir / "missing" / "a.yaml", "x", "--export-accelerate"}}),
      Catch::Contains("--export-accelerate " + (dir / "missing/a.yaml").string() +
                      ": the directory " + (dir / "missing").string() + " does not exist"));
  CHECK(entries(dir) == 0);
  write_files_together({{good, "{}", "--export-deepspeed"}, {dir / "b.yaml", "y", ""}});
  CHECK(read(good) == "{}");
  CHECK(read(dir / "b.yaml") == "y");
}

TEST_CASE("a symbolic link stays a link, its target (through a chain) is replaced") {
  const auto dir = scratch("link");
  fs::create_directories(dir / "real");
  std::ofstream(dir / "real" / "plan.json") << "old";
  fs::create_symlink("real/plan.json", dir / "hop.json");  // relative to the link's directory
  fs::create_symlink(dir / "hop.json", dir / "link.json");
  write_file_atomically(dir / "link.json", "new");
  CHECK(fs::is_symlink(fs::symlink_status(dir / "link.json")));
  CHECK(fs::is_symlink(fs::symlink_status(dir / "hop.json")));
  CHECK(read(dir / "real" / "plan.json") == "new");
  // A dangling link creates its target.
  fs::create_symlink("made.json", dir / "dangling.json");
  write_file_atomically(dir / "dangling.json", "made");
  CHECK(read(dir / "made.json") == "made");
  CHECK(fs::is_symlink(fs::symlink_status(dir / "dangling.json")));
}

TEST_CASE("a link loop, a directory and a missing directory are errors naming the path") {
  const auto dir = scratch("errors");
  fs::create_symlink("b", dir / "a");
  fs::create_symlink("a", dir / "b");
  CHECK_THROWS_WITH(write_file_atomically(dir / "a", "x", "--dot"),
                    Catch::Contains("--dot " + (dir / "a").string() + ": too many levels"));
  CHECK_THROWS_WITH(write_file_atomically(dir, "x", "--out"),
                    Catch::Equals("--out " + dir.string() + ": is a directory"));
  CHECK_THROWS_AS(check_output_path(dir / "no" / "x.json"), Error);
  CHECK_NOTHROW(check_output_path(dir / "x.json"));
}

TEST_CASE("a FIFO is written into, not replaced by a regular file") {
  const auto dir = scratch("fifo");
  const auto fifo = dir / "plan.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string received;
  std::thread reader([&] { received = read(fifo); });
  write_file_atomically(fifo, "through the pipe\n");
  reader.join();
  CHECK(received == "through the pipe\n");
  CHECK(fs::is_fifo(fs::status(fifo)));
  CHECK(entries(dir) == 1);
}

TEST_CASE("a character device is written directly and its error reported: /dev/full") {
  CHECK_THROWS_WITH(write_file_atomically("/dev/full", "x", "--save-plan"),
                    Catch::Equals("--save-plan /dev/full: No space left on device"));
  CHECK(fs::is_character_file(fs::status("/dev/full")));
}
