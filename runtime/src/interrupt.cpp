// SIGINT / SIGTERM for job-running commands (see interrupt.hpp).
#include "dtplan/runtime/interrupt.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>

#include "dtplan/model/error.hpp"

namespace dtplan::runtime {
namespace {

// Atomic, not only volatile: a GUI's Cancel (request_interrupt) sets it on one thread while
// the workflow reads it on another. A lock-free atomic is safe in a signal handler.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
int g_wake[2] = {-1, -1};  // the self-pipe: the handler writes, poll() reads
struct sigaction g_old_int {};
struct sigaction g_old_term {};
struct sigaction g_old_hup {};
bool g_int_caught = false;
bool g_hup_caught = false;

extern "C" void on_signal(int sig) {
  const int saved = errno;  // the interrupted code may be about to read errno
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);  // the first signal wins
  const char byte = 1;
  if (g_wake[1] >= 0) (void)!write(g_wake[1], &byte, 1);  // non-blocking: a full pipe is fine
  errno = saved;
}

}  // namespace

Interrupted::Interrupted(int signal)
    : std::runtime_error(std::string("interrupted by ") + (signal == SIGINT   ? "SIGINT"
                                                           : signal == SIGHUP ? "SIGHUP"
                                                                              : "SIGTERM")),
      signal_(signal) {}

InterruptScope::InterruptScope() {
  if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(std::string("cannot create a pipe for signals: ") + std::strerror(errno));
  }
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read or wait returns EINTR
  sigaction(SIGINT, nullptr, &g_old_int);
  g_int_caught = g_old_int.sa_handler != SIG_IGN;
  if (g_int_caught) sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, &g_old_term);
  // A hang-up (the terminal or ssh session gone) stops the job too, unless ignored (nohup):
  // the job's mpirun leads its own process group, which only dtplan can stop.
  sigaction(SIGHUP, nullptr, &g_old_hup);
  g_hup_caught = g_old_hup.sa_handler != SIG_IGN;
  if (g_hup_caught) sigaction(SIGHUP, &sa, nullptr);
}

InterruptScope::~InterruptScope() {
  if (g_int_caught) sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  if (g_hup_caught) sigaction(SIGHUP, &g_old_hup, nullptr);
  for (int& fd : g_wake) {
    close(fd);
    fd = -1;
  }
  g_signal = 0;
}

void request_interrupt() {
  if (g_wake[1] >= 0) on_signal(SIGINT);
}

int interrupt_signal() {
  return g_signal;
}

void throw_if_interrupted() {
  if (const int sig = g_signal.load(); sig != 0) throw Interrupted(sig);
}

int interrupt_fd() {
  return g_wake[0];
}

}  // namespace dtplan::runtime
