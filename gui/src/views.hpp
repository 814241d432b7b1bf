// The views of dtplan-gui. Each shows one part of an Analysis (analysis.hpp) and keeps the
// numbers it drew, so tests can compare them with the library.
#pragma once

#include <QChartView>
#include <QGraphicsView>
#include <QRectF>
#include <QStringList>
#include <QWidget>
#include <map>
#include <string>
#include <vector>

#include "analysis.hpp"

class QStandardItemModel;
class QTableView;
class QTableWidget;
class QLabel;

namespace dtplan::gui {

// Stacked bars (components in GiB) against the GPU's capacity: one per data-parallel strategy,
// or, for a layout session, the heaviest stage's GPU under each sharding of model states
// (memory_columns in analysis.hpp).
class MemoryView : public QChartView {
 public:
  explicit MemoryView(QWidget* parent = nullptr);
  void show_analysis(const Analysis& a);
  // GiB drawn per component (rows) and column (memory_columns' order).
  const std::map<std::string, std::vector<double>>& drawn_gib() const { return drawn_; }
  double capacity_gib() const { return capacity_gib_; }
  // The column labels, in memory_columns' order; "<label> (n/a)" where it cannot run.
  const QStringList& categories() const { return categories_; }

 private:
  std::map<std::string, std::vector<double>> drawn_;
  double capacity_gib_ = 0;
  QStringList categories_;
};

// The interconnect graph: devices by kind and node, links coloured by bandwidth, the first
// ring traced over the GPUs, the bottleneck link in red, per-link ring load.
class TopologyView : public QGraphicsView {
 public:
  explicit TopologyView(QWidget* parent = nullptr);
  void show_analysis(const Analysis& a);
  std::size_t drawn_links() const { return drawn_links_; }

 private:
  std::size_t drawn_links_ = 0;
};

// One training step as a Gantt chart, one lane per stream in the order the streams first
// appear: compute and communication for a data-parallel strategy; compute, tensor parallel,
// context parallel, pipeline and data parallel for a layout (cost::timeline_3d).
class TimelineView : public QGraphicsView {
 public:
  explicit TimelineView(QWidget* parent = nullptr);
  void show_analysis(const Analysis& a);
  std::size_t drawn_events() const { return drawn_events_; }
  const QStringList& lanes() const { return lanes_; }
  // The text above the lanes: the step's parts and the error band of runs like it.
  const QString& title() const { return title_; }

 private:
  std::size_t drawn_events_ = 0;
  QStringList lanes_;
  QString title_;
};

// The planner's ranked table (sortable), the memory/throughput Pareto scatter, the rejected
// configurations with reasons, and export buttons.
class PlanView : public QWidget {
 public:
  explicit PlanView(QWidget* parent = nullptr);
  void show_analysis(const Analysis& a);
  int ranked_rows() const;
  int rejected_rows() const;
  QString summary_text() const;  // the line above the ranking: the best and the counts
  // The planner's notes and suggestions as shown, fields named by the form's labels.
  QString notes_text() const;
  // The Pareto chart's axis ranges: x from left() to right() GiB, y from top() to bottom()
  // samples/s (top() is the smaller value, as QRectF orders them).
  QRectF pareto_axes() const { return pareto_axes_; }

 private:
  void show_pareto(const planner::UnifiedPlan& r);
  void show_rejected(const planner::UnifiedPlan& r);
  void export_deepspeed();
  void copy_launch();
  QStandardItemModel* ranked_ = nullptr;
  QTableView* table_ = nullptr;
  QChartView* pareto_ = nullptr;
  QRectF pareto_axes_;
  QTableWidget* rejected_ = nullptr;
  QLabel* summary_ = nullptr;
  QLabel* notes_ = nullptr;
  Analysis last_;
};

// Predicted against measured step times of dtplan-run measurements: bars, a scatter against
// y = x, and the errors.
class ValidationView : public QWidget {
 public:
  explicit ValidationView(QWidget* parent = nullptr);
  void show_analysis(const Analysis& a);
  int rows() const;

 private:
  QChartView* bars_ = nullptr;
  QChartView* scatter_ = nullptr;
  QTableWidget* table_ = nullptr;
  QLabel* hint_ = nullptr;
};

}  // namespace dtplan::gui
