// Progress bar (see progress.hpp).
#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace dtplan::cli {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

ProgressBar::ProgressBar(std::ostream& out, bool terminal)
    : out_(out), terminal_(terminal), start_s_(now_s()) {}

ProgressBar::~ProgressBar() {
  finish();
}

bool ProgressBar::stderr_is_terminal() {
  return isatty(STDERR_FILENO) != 0;
}

std::string ProgressBar::duration(double seconds) {
  const auto s = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  }
  return buf;
}

void ProgressBar::update(double done, double total, const std::string& what, double eta_s) {
  const double f = total > 0 ? std::clamp(done / total, 0.0, 1.0) : 0.0;
  const std::string eta = eta_s < 0 ? "?" : duration(eta_s);
  char count[64];
  std::snprintf(count, sizeof count, "%g/%g", done, total);
  const std::string tail = std::string(count) + "  " + what + "  elapsed " +
                           duration(now_s() - start_s_) + ", left ~" + eta;
  if (!terminal_) {
    out_ << "  " << tail << "\n" << std::flush;
    return;
  }
  constexpr int width = 30;
  const int filled = static_cast<int>(std::lround(f * width));
  out_ << "\r\033[K[" << std::string(static_cast<std::size_t>(filled), '#')
       << std::string(static_cast<std::size_t>(width - filled), '.') << "] " << tail << std::flush;
  open_ = true;
}

void ProgressBar::finish() {
  if (open_) out_ << "\n" << std::flush;
  open_ = false;
}

}  // namespace dtplan::cli
