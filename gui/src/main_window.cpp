// dtplan-gui's window (see main_window.hpp).
#include "main_window.hpp"

#include <QApplication>
#include <QBuffer>
#include <QFileDialog>
#include <QFutureWatcher>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPainter>
#include <QSplitter>
#include <QStatusBar>
#include <QSvgGenerator>
#include <QTabWidget>
#include <QtConcurrent/QtConcurrentRun>

#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "gui_options.hpp"
#include "inputs_panel.hpp"
#include "labels.hpp"
#include "workflow_dialogs.hpp"

namespace dtplan::gui {
namespace {

Outcome compute(const Session& s) {
  try {
    return {analyse(s), {}};
  } catch (const std::exception& e) {
    return {std::nullopt, message_of(e)};
  }
}

const char* const kViews[] = {"memory", "topology", "timeline", "plan", "validation"};

}  // namespace

MainWindow::MainWindow(const Session& s) {
  setWindowTitle("dtplan-gui");
  auto* split = new QSplitter(this);
  inputs_ = new InputsPanel(split);
  tabs_ = new QTabWidget(split);
  memory_ = new MemoryView(tabs_);
  topology_ = new TopologyView(tabs_);
  timeline_ = new TimelineView(tabs_);
  plan_ = new PlanView(tabs_);
  validation_ = new ValidationView(tabs_);
  tabs_->addTab(memory_, "Memory");
  tabs_->addTab(topology_, "Topology");
  tabs_->addTab(timeline_, "Timeline");
  tabs_->addTab(plan_, "Plan");
  tabs_->addTab(validation_, "Validation");
  split->addWidget(inputs_);
  split->addWidget(tabs_);
  split->setStretchFactor(1, 1);
  setCentralWidget(split);
  status_ = new QLabel(this);
  statusBar()->addWidget(status_, 1);
  watcher_ = new QFutureWatcher<Outcome>(this);
  connect(watcher_, &QFutureWatcher<Outcome>::finished, this, [this] {
    if (running_generation_ == generation_) apply(watcher_->result());
    if (pending_) recompute();
  });
  build_menus();
  inputs_->set_session(s);
  inputs_->on_change = [this] { recompute(); };
}

void MainWindow::start() {
  recompute();
}

MainWindow::~MainWindow() {
  watcher_->waitForFinished();
}

void MainWindow::build_menus() {
  auto* file = menuBar()->addMenu("&File");
  file->addAction("&Open session...", this, [this] { open_session(); });
  file->addAction("&Save session...", this, [this] { save_session_as(); });
  file->addAction("Open &measurement...", this, [this] { open_measurement(); });
  file->addSeparator();
  file->addAction("Export view as &PNG...", this, [this] { export_view(false); });
  file->addAction("Export view as S&VG...", this, [this] { export_view(true); });
  file->addSeparator();
  file->addAction("&Quit", this, [this] { close(); });
  auto* tools = menuBar()->addMenu("&Tools");
  tools->addAction("&Calibrate this machine...", this, [this] { ask_and_calibrate(); });
  tools->addAction("&Autotune by measurement...", this, [this] { ask_and_autotune(); });
}

WorkflowResult MainWindow::calibrate(const CalibrateChoice& c, const ProgressObserver& observe) {
  auto r = run_with_progress(
      this, "Calibrating this machine",
      [c](const runtime::ProgressFn& p) { return calibrate_to_file(c, p); }, observe);
  if (r.status == WorkflowResult::Status::done) {
    auto s = inputs_->session();
    s.profile = c.out;
    inputs_->set_session(s);
    recompute();
  }
  return r;
}

WorkflowResult MainWindow::autotune(const AutotuneChoice& c, const ProgressObserver& observe) {
  const auto s = inputs_->session();
  return run_with_progress(
      this, "Autotuning by measurement",
      [s, c](const runtime::ProgressFn& p) { return autotune_session(s, c, p); }, observe);
}

void MainWindow::ask_and_calibrate() {
  if (const auto c = ask_calibrate(this)) report("Calibrate", calibrate(*c));
}

void MainWindow::ask_and_autotune() {
  if (const auto c = ask_autotune(this, inputs_->session())) report("Autotune", autotune(*c));
}

void MainWindow::report(const QString& title, const WorkflowResult& r) {
  const auto text = QString::fromStdString(r.text);
  if (r.status == WorkflowResult::Status::failed) {
    QMessageBox::warning(this, title, text);
  } else {
    QMessageBox::information(this, title, text);  // done, or cancelled with what was kept
  }
}

void MainWindow::recompute() {
  if (watcher_->isRunning()) {
    pending_ = true;  // the newest inputs are computed when this one ends
    return;
  }
  pending_ = false;
  status_->setText("computing...");
  running_generation_ = ++generation_;
  watcher_->setFuture(QtConcurrent::run(compute, inputs_->session()));
}

void MainWindow::wait_for_recompute() {
  while (watcher_->isRunning() || pending_) {
    watcher_->waitForFinished();
    if (running_generation_ == generation_) apply(watcher_->result());
    if (pending_) recompute();
  }
}

void MainWindow::apply(const Outcome& o) {
  if (!o.analysis) {
    status_->setText(QString("error: %1").arg(QString::fromStdString(o.error)));
    return;
  }
  analysis_ = o.analysis;
  const auto& a = *analysis_;
  memory_->show_analysis(a);
  topology_->show_analysis(a);
  timeline_->show_analysis(a);
  plan_->show_analysis(a);
  validation_->show_analysis(a);
  QString text = QString("%1: %2 parameters; step %3 s, %4 samples/s")
                     .arg(QString::fromStdString(a.session.model))
                     .arg(a.params)
                     .arg(step_seconds(a), 0, 'f', 3)
                     .arg(samples_per_second(a), 0, 'f', 1);
  for (const auto& p : a.problems)
    text += "; " + QString::fromStdString(p);
  status_->setText(text);
}

void MainWindow::show_now(const Session& s) {
  inputs_->set_session(s);
  watcher_->waitForFinished();
  pending_ = false;
  ++generation_;  // whatever ran before is stale now, even if its signal is still queued
  const auto o = compute(s);
  if (!o.analysis) throw Error(o.error);
  apply(o);
}

void MainWindow::set_view(const std::string& name) {
  for (int i = 0; i < static_cast<int>(std::size(kViews)); ++i) {
    if (name == kViews[i]) return tabs_->setCurrentIndex(i);
  }
  throw Error("--view " + name + ": expected memory, topology, timeline, plan or validation");
}

QWidget* MainWindow::view(const std::string& name) const {
  for (int i = 0; i < static_cast<int>(std::size(kViews)); ++i) {
    if (name == kViews[i]) return tabs_->widget(i);
  }
  throw Error("view " + name + ": expected memory, topology, timeline, plan or validation");
}

// Pictures are encoded in memory and then written as every other dtplan file (atomically).
void MainWindow::save_png(QWidget* w, const QString& path) {
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  if (!w->grab().save(&buffer, "PNG")) throw Error(path.toStdString() + ": cannot encode the PNG");
  write_file_atomically(path.toStdString(), std::string_view(bytes.constData(), bytes.size()),
                        "PNG");
}

void MainWindow::save_svg(QWidget* w, const QString& path) {
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  QSvgGenerator svg;
  svg.setOutputDevice(&buffer);
  svg.setSize(w->size());
  svg.setViewBox(w->rect());
  svg.setTitle("dtplan-gui");
  QPainter painter;
  if (!painter.begin(&svg)) throw Error(path.toStdString() + ": cannot write the SVG");
  w->render(&painter);
  painter.end();
  write_file_atomically(path.toStdString(), std::string_view(bytes.constData(), bytes.size()),
                        "SVG");
}

void MainWindow::open_session() {
  const auto f = QFileDialog::getOpenFileName(this, "Open session", {}, "JSON (*.json)");
  if (f.isEmpty()) return;
  try {
    inputs_->set_session(load_session(f.toStdString()));
    recompute();
  } catch (const std::exception& e) {
    QMessageBox::warning(this, "Open session", QString::fromStdString(message_of(e)));
  }
}

void MainWindow::save_session_as() {
  const auto f =
      QFileDialog::getSaveFileName(this, "Save session", "session.json", "JSON (*.json)");
  if (f.isEmpty()) return;
  try {
    save_session(inputs_->session(), f.toStdString());
  } catch (const std::exception& e) {
    QMessageBox::warning(this, "Save session", QString::fromStdString(message_of(e)));
  }
}

void MainWindow::open_measurement() {
  const auto files =
      QFileDialog::getOpenFileNames(this, "dtplan-run measurements", {}, "JSON (*.json)");
  if (files.isEmpty()) return;
  auto s = inputs_->session();
  for (const auto& f : files)
    s.measurements.push_back(f.toStdString());
  inputs_->set_session(s);
  recompute();
  tabs_->setCurrentWidget(validation_);
}

void MainWindow::export_view(bool svg) {
  const auto f = QFileDialog::getSaveFileName(this, svg ? "Export view as SVG" : "Export as PNG",
                                              svg ? "view.svg" : "view.png",
                                              svg ? "SVG (*.svg)" : "PNG (*.png)");
  if (f.isEmpty()) return;
  try {
    svg ? save_svg(tabs_->currentWidget(), f) : save_png(tabs_->currentWidget(), f);
  } catch (const std::exception& e) {
    QMessageBox::warning(this, "Export view", QString::fromStdString(message_of(e)));
  }
}

int render_screenshot(MainWindow& window, const GuiOptions& o) {
  window.show_now(o.session);
  // The view alone, at the size asked for: taken out of the window for the shot.
  auto* w = window.view(o.view);
  w->setParent(nullptr);
  w->resize(o.width, o.height);
  w->show();
  QApplication::processEvents();
  window.show_now(o.session);  // scenes fit themselves to the laid-out view
  QApplication::processEvents();
  const auto path = QString::fromStdString(o.screenshot);
  path.endsWith(".svg", Qt::CaseInsensitive) ? MainWindow::save_svg(w, path)
                                             : MainWindow::save_png(w, path);
  std::printf("dtplan-gui: wrote %s (%s view, %d x %d)\n", o.screenshot.c_str(), o.view.c_str(),
              w->width(), w->height());
  w->hide();
  delete w;  // the window's tab no longer owns it
  return 0;
}

}  // namespace dtplan::gui
