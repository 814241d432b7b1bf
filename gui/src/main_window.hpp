// dtplan-gui's window: the inputs on the left, the views in tabs; recomputation off the UI
// thread (QtConcurrent) on every input change, stale results dropped; File menu for sessions,
// measurements and exporting the current view as PNG or SVG; Tools menu for calibration and
// autotuning through the runtime library (workflows.hpp).
#pragma once

#include <QMainWindow>
#include <optional>
#include <string>

#include "analysis.hpp"
#include "views.hpp"
#include "workflows.hpp"

class QTabWidget;
class QLabel;
template <class T>
class QFutureWatcher;

namespace dtplan::gui {

class InputsPanel;

struct Outcome {
  std::optional<Analysis> analysis;
  std::string error;
};

class MainWindow : public QMainWindow {
 public:
  explicit MainWindow(const Session& s);
  ~MainWindow() override;

  // Interactive: the first computation, in the background.
  void start();
  // Synchronous: computes and shows (headless screenshots, tests). Throws on bad input.
  void show_now(const Session& s);
  void set_view(const std::string& name);  // memory, topology, timeline, plan, validation
  QWidget* view(const std::string& name) const;
  const std::optional<Analysis>& analysis() const { return analysis_; }
  InputsPanel* inputs() const { return inputs_; }
  // Waits for the background computation in flight, if any, and shows its result.
  void wait_for_recompute();

  // The Tools menu's workflows, under a progress dialog (public for tests). A profile that
  // calibration wrote becomes the session's, and the views are computed again with it.
  WorkflowResult calibrate(const CalibrateChoice& c, const ProgressObserver& observe = {});
  WorkflowResult autotune(const AutotuneChoice& c, const ProgressObserver& observe = {});

  static void save_png(QWidget* w, const QString& path);
  static void save_svg(QWidget* w, const QString& path);

 private:
  void build_menus();
  void recompute();
  void apply(const Outcome& o);
  void open_session();
  void save_session_as();
  void open_measurement();
  void export_view(bool svg);
  void ask_and_calibrate();
  void ask_and_autotune();
  void report(const QString& title, const WorkflowResult& r);

  InputsPanel* inputs_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  QLabel* status_ = nullptr;
  MemoryView* memory_ = nullptr;
  TopologyView* topology_ = nullptr;
  TimelineView* timeline_ = nullptr;
  PlanView* plan_ = nullptr;
  ValidationView* validation_ = nullptr;
  QFutureWatcher<Outcome>* watcher_ = nullptr;
  std::optional<Analysis> analysis_;
  bool pending_ = false;  // inputs changed while a computation ran
  // Results of a computation older than the latest request (show_now) are dropped.
  std::uint64_t generation_ = 0, running_generation_ = 0;
};

struct GuiOptions;
// Computes the session, shows options.view and writes it to options.screenshot (PNG, or SVG
// for a .svg name). Returns the exit code; throws on bad input.
int render_screenshot(MainWindow& window, const GuiOptions& options);

}  // namespace dtplan::gui
