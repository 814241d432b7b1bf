// Child processes for dtplan-run (see launcher.hpp).
#include "launcher.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>

#include "dtplan/model/error.hpp"

extern char** environ;

namespace dtplan::cli {

std::string dtplan_run_path() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto beside = self.parent_path() / "dtplan-run";
  if (ec || !std::filesystem::exists(beside)) {
    throw Error("cannot find dtplan-run beside " + self.string() + " (build it: tools/setup.sh)");
  }
  return beside.string();
}

std::vector<std::string> mpirun_argv(std::int64_t np, const std::vector<std::string>& run_args) {
  if (np == 1) {
    // One rank needs no launcher: dtplan-run starts as an MPI singleton (a machine with one
    // GPU and no mpirun installed can still calibrate and tune).
    std::vector<std::string> args{dtplan_run_path()};
    args.insert(args.end(), run_args.begin(), run_args.end());
    return args;
  }
  std::vector<std::string> args{"mpirun", "-np", std::to_string(np)};
  if (np > sysconf(_SC_NPROCESSORS_ONLN)) args.push_back("--oversubscribe");
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  args.push_back(dtplan_run_path());
  args.insert(args.end(), run_args.begin(), run_args.end());
  return args;
}

namespace {

class Pipe {
 public:
  Pipe() {
    if (pipe(fd_) != 0) throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  int read_end() const { return fd_[0]; }
  int write_end() const { return fd_[1]; }
  void close_read() {
    if (fd_[0] >= 0) close(fd_[0]);
    fd_[0] = -1;
  }
  void close_write() {
    if (fd_[1] >= 0) close(fd_[1]);
    fd_[1] = -1;
  }

 private:
  int fd_[2] = {-1, -1};
};

pid_t spawn(const std::vector<std::string>& argv, Pipe& out) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out.write_end(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.write_end(), STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, out.read_end());
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw Error("cannot start " + argv[0] + " (" + std::strerror(rc) +
                "; install openmpi-bin for mpirun)");
  }
  return pid;
}

}  // namespace

ChildResult run_child(const std::vector<std::string>& argv,
                      const std::function<void(const std::string&)>& on_line) {
  const auto start = std::chrono::steady_clock::now();
  Pipe out;
  const pid_t pid = spawn(argv, out);
  out.close_write();
  ChildResult result;
  std::deque<std::string> tail;
  std::string pending;
  char buf[4096];
  std::exception_ptr failed;  // from on_line: the child is still reaped before rethrowing
  const auto line_done = [&](std::string line) {
    if (!failed) {
      try {
        on_line(line);
      } catch (...) {
        failed = std::current_exception();
      }
    }
    tail.push_back(std::move(line));
    if (tail.size() > 20) tail.pop_front();
  };
  for (;;) {
    const ssize_t n = read(out.read_end(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<std::size_t>(n));
    for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
      line_done(pending.substr(0, nl));
      pending.erase(0, nl + 1);
    }
  }
  if (!pending.empty()) line_done(pending);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.tail.assign(tail.begin(), tail.end());
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (failed) std::rethrow_exception(failed);
  return result;
}

std::pair<int, int> progress_of(const std::string& line) {
  const auto open = line.find('[');
  const auto slash = line.find('/', open);
  const auto close = line.find(']', open);
  if (open == std::string::npos || slash == std::string::npos || close == std::string::npos ||
      !(open < slash && slash < close)) {
    return {0, 0};
  }
  try {
    return {std::stoi(line.substr(open + 1, slash - open - 1)),
            std::stoi(line.substr(slash + 1, close - slash - 1))};
  } catch (const std::exception&) {
    return {0, 0};
  }
}

}  // namespace dtplan::cli
