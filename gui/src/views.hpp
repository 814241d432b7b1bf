// The views of dtplan-gui. Each shows one part of an Analysis (analysis.hpp) and keeps the
// numbers it drew, so tests can compare them with the library.
#pragma once

#include <QChartView>
#include <QGraphicsView>
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

// Stacked bars per strategy (components in GiB) against the GPU's capacity.
class MemoryView : public QChartView {
 public:
  explicit MemoryView(QWidget* parent = nullptr);
  void show_analysis(const Analysis& a);
  // GiB drawn per component (rows) and strategy (columns, the analysis' order).
  const std::map<std::string, std::vector<double>>& drawn_gib() const { return drawn_; }
  double capacity_gib() const { return capacity_gib_; }
  // The category labels, in the analysis' order; "<strategy> (n/a)" where it cannot run.
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

// One training step as a Gantt chart per stream (compute, communication).
class TimelineView : public QGraphicsView {
 public:
  explicit TimelineView(QWidget* parent = nullptr);
  void show_analysis(const Analysis& a);
  std::size_t drawn_events() const { return drawn_events_; }

 private:
  std::size_t drawn_events_ = 0;
};

// The planner's ranked table (sortable), the memory/throughput Pareto scatter, the rejected
// configurations with reasons, and export buttons.
class PlanView : public QWidget {
 public:
  explicit PlanView(QWidget* parent = nullptr);
  void show_analysis(const Analysis& a);
  int ranked_rows() const;
  int rejected_rows() const;

 private:
  void show_pareto(const planner::UnifiedPlan& r);
  void show_rejected(const planner::UnifiedPlan& r);
  void export_deepspeed();
  void copy_launch();
  QStandardItemModel* ranked_ = nullptr;
  QTableView* table_ = nullptr;
  QChartView* pareto_ = nullptr;
  QTableWidget* rejected_ = nullptr;
  QLabel* summary_ = nullptr;
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
