// Ends the process when training makes no progress for `timeout_s`: a peer that died or a
// collective that never completes must end the job with a clear message, never hang it.
// mpirun then sees a rank exit with an error and stops the others.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace dtplan::runtime {

class Watchdog {
 public:
  // Exit status of a process the watchdog ends.
  static constexpr int kExitCode = 3;

  Watchdog(double timeout_s, int rank);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Progress: the timer restarts; `where` is named if it expires.
  void kick(const std::string& where);

 private:
  void run();
  double timeout_s_;
  int rank_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string where_;
  std::uint64_t kicks_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dtplan::runtime
