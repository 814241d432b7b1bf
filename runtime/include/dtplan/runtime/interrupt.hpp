// Ctrl-C and termination for the commands that run jobs under mpirun (autotune, calibrate).
// A terminal sends SIGINT to its foreground process group (dtplan; mpirun and its ranks lead
// a group of their own, launcher.cpp); a process manager sends SIGTERM to dtplan alone; a
// lost terminal sends SIGHUP. Each way dtplan passes the signal on to the job's group, stops
// it, keeps what it finished, and exits as a shell job killed by the signal would (130, 143,
// 129). The handler only records the signal and wakes whoever waits on a child (a self-pipe);
// the waiting code (launcher.cpp) stops the child and throws Interrupted.
#pragma once

#include <stdexcept>

namespace dtplan::runtime {

// Not a dtplan::Error: it must pass through code that turns errors into failed trials.
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(int signal);
  int signal_number() const { return signal_; }
  int exit_code() const { return 128 + signal_; }

 private:
  int signal_;
};

// While alive, SIGINT and SIGTERM are caught (SIGINT stays ignored when it was ignored at
// start, as in a shell's background job); the previous handlers come back at the end.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

// As if SIGINT had arrived, from any thread: a front end's Cancel button stops the workflow
// the same way Ctrl-C does (the child job is stopped, Interrupted thrown). No effect outside a
// scope.
void request_interrupt();
// The signal caught in the current scope, 0 when none.
int interrupt_signal();
// Throws Interrupted when a signal was caught.
void throw_if_interrupted();
// Readable once a signal was caught (for poll); -1 outside a scope.
int interrupt_fd();

}  // namespace dtplan::runtime
