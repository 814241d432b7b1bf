// The no-progress watchdog (see watchdog.hpp).
#include "dtplan/runtime/watchdog.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace dtplan::runtime {

Watchdog::Watchdog(double timeout_s, int rank) : timeout_s_(timeout_s), rank_(rank) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::kick(const std::string& where) {
  std::lock_guard lock(mutex_);
  where_ = where;
  ++kicks_;
}

void Watchdog::run() {
  const auto timeout = std::chrono::duration<double>(timeout_s_);
  std::unique_lock lock(mutex_);
  while (!stop_) {
    const auto seen = kicks_;
    if (wake_.wait_for(lock, timeout, [&] { return stop_ || kicks_ != seen; })) continue;
    std::fprintf(stderr,
                 "dtplan-run: rank %d: no progress for %.0f s in %s: a rank died or a collective "
                 "hangs; ending the job (raise --timeout if steps are this slow)\n",
                 rank_, timeout_s_, where_.c_str());
    std::fflush(stderr);
    std::_Exit(kExitCode);
  }
}

}  // namespace dtplan::runtime
