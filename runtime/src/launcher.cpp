// Child processes for dtplan-run (see launcher.hpp).
#include "dtplan/runtime/launcher.hpp"

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <optional>

#include "dtplan/model/error.hpp"
#include "dtplan/runtime/interrupt.hpp"

extern char** environ;

namespace dtplan::runtime {

std::string dtplan_run_path() {
  if (const char* given = std::getenv("DTPLAN_RUN"); given != nullptr && *given != '\0') {
    if (!std::filesystem::is_regular_file(given)) {
      throw Error(std::string("DTPLAN_RUN=") + given + ": no such file (the dtplan-run to start)");
    }
    return given;
  }
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto beside = self.parent_path() / "dtplan-run";
  if (ec || !std::filesystem::exists(beside)) {
    throw Error("cannot find dtplan-run beside " + self.string() +
                " (build it: tools/setup.sh, or name it in DTPLAN_RUN)");
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
  // The child leads a process group of its own, so that stopping it reaches what it started
  // too: mpirun's ranks would outlive a SIGKILL sent to mpirun alone, holding the output pipe.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw Error("cannot start " + argv[0] + " (" + std::strerror(rc) +
                "; install openmpi-bin for mpirun)");
  }
  return pid;
}

// The child's output until it closes it. Once the user interrupts (interrupt.hpp) the child's
// process group (the child and what it started, spawn()) gets the signal, and whatever of it
// is still there after kKillAfter is killed. Returns whether it was interrupted.
bool read_until_done(pid_t pid, int fd, const std::function<void(const std::string&)>& line) {
  using Clock = std::chrono::steady_clock;
  // mpirun needs a few hundred milliseconds to stop its ranks; the user was promised 2 s.
  constexpr auto kKillAfter = std::chrono::milliseconds(1200);
  // Ranks killed with mpirun may keep the pipe open: stop reading soon after.
  constexpr auto kGiveUpAfter = std::chrono::milliseconds(1600);
  pollfd fds[2] = {{fd, POLLIN, 0}, {interrupt_fd(), POLLIN, 0}};
  std::optional<Clock::time_point> stopping;
  bool killed = false;
  std::string pending;
  char buf[4096];
  for (;;) {
    if (!stopping && interrupt_signal() != 0) {
      stopping = Clock::now();
      kill(-pid, interrupt_signal());
    }
    int timeout_ms = -1;
    if (stopping) {
      const auto since = Clock::now() - *stopping;
      if (since >= kKillAfter && !killed) {
        kill(-pid, SIGKILL);
        killed = true;
      }
      if (since >= kGiveUpAfter) break;
      const auto next = killed ? kGiveUpAfter : kKillAfter;
      timeout_ms = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(next - since).count() + 1);
    }
    const nfds_t watched = (stopping || fds[1].fd < 0) ? 1 : 2;
    if (poll(fds, watched, timeout_ms) < 0 && errno != EINTR) break;
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<std::size_t>(n));
    for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
      line(pending.substr(0, nl));
      pending.erase(0, nl + 1);
    }
  }
  if (!pending.empty()) line(pending);
  return stopping.has_value();
}

}  // namespace

ChildResult run_child(const std::vector<std::string>& argv,
                      const std::function<void(const std::string&)>& on_line) {
  throw_if_interrupted();
  const auto start = std::chrono::steady_clock::now();
  Pipe out;
  const pid_t pid = spawn(argv, out);
  out.close_write();
  ChildResult result;
  std::deque<std::string> tail;
  std::exception_ptr failed;  // from on_line: the child is still reaped before rethrowing
  const bool interrupted = read_until_done(pid, out.read_end(), [&](std::string line) {
    if (!failed) {
      try {
        on_line(line);
      } catch (...) {
        failed = std::current_exception();
      }
    }
    tail.push_back(std::move(line));
    if (tail.size() > 20) tail.pop_front();
  });
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (interrupted) throw Interrupted(interrupt_signal());
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

}  // namespace dtplan::runtime
