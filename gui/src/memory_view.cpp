// Memory view: stacked bars per strategy against the GPU capacity line (see views.hpp).
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QCursor>
#include <QLineSeries>
#include <QStackedBarSeries>
#include <QToolTip>
#include <QValueAxis>

#include "dtplan/cost/layout_text.hpp"
#include "views.hpp"

namespace dtplan::gui {

namespace {

constexpr double kGiB = 1073741824.0;

const QColor kColors[] = {QColor(31, 119, 180),  QColor(174, 199, 232), QColor(255, 127, 14),
                          QColor(255, 187, 120), QColor(148, 103, 189), QColor(44, 160, 44),
                          QColor(152, 223, 138), QColor(127, 127, 127)};

// What the bars show: every data-parallel strategy, or the session's layout (its heaviest
// stage's GPU) with each sharding of its model states.
// The training-loop inputs that differ from the CLI's defaults, as ", eager layers, ...".
std::string training_loop_of(const Session& s) {
  std::string out;
  if (s.layer_kernels != "framework") out += ", " + s.layer_kernels + " layers";
  if (s.zero_grad != "set-to-none") out += ", zero_grad " + s.zero_grad;
  if (s.optimizer_impl != "framework") out += ", " + s.optimizer_impl + " optimizer";
  return out;
}

QString title_of(const Analysis& a) {
  const auto& s = a.session;
  if (a.layout) {
    return QString("Memory per GPU of the heaviest stage: %1, %2 x %3, %4")
        .arg(QString::fromStdString(s.model))
        .arg(s.gpus)
        .arg(QString::fromStdString(s.gpu))
        .arg(QString::fromStdString(cost::describe(a.layout->layout)));
  }
  return QString("Memory per GPU: %1, %2 x %3, micro-batch %4, sequence %5, %6%7")
      .arg(QString::fromStdString(s.model))
      .arg(s.gpus)
      .arg(QString::fromStdString(s.gpu))
      .arg(s.micro_batch)
      .arg(a.plan_request.seq_len)
      .arg(QString::fromStdString(s.precision))
      .arg(QString::fromStdString(training_loop_of(s)));
}

}  // namespace

MemoryView::MemoryView(QWidget* parent) : QChartView(parent) {
  setRenderHint(QPainter::Antialiasing);
  setChart(new QChart());
}

void MemoryView::show_analysis(const Analysis& a) {
  auto* chart = new QChart();
  auto* series = new QStackedBarSeries();
  drawn_.clear();
  const auto columns = memory_columns(a);
  QStringList categories;
  for (const auto& column : columns) {
    const auto name = QString::fromStdString(column.label);
    categories << (column.not_applicable.empty() ? name : name + " (n/a)");
  }
  categories_ = categories;
  const auto& names = columns.front().components;
  for (std::size_t c = 0; c < names.size(); ++c) {
    const auto& name = names[c].first;
    auto* set = new QBarSet(QString::fromStdString(name));
    set->setColor(kColors[c % std::size(kColors)]);
    for (const auto& column : columns) {
      const double gib = static_cast<double>(column.components[c].second.value) / kGiB;
      *set << gib;
      drawn_[name].push_back(gib);
    }
    QObject::connect(set, &QBarSet::hovered, set, [set, name, columns](bool on, int i) {
      if (!on) return QToolTip::hideText();
      const auto& why = columns[static_cast<std::size_t>(i)].not_applicable;
      if (!why.empty()) {
        return QToolTip::showText(QCursor::pos(),
                                  QString("not applicable: %1").arg(QString::fromStdString(why)));
      }
      const double gib = set->at(i);
      QToolTip::showText(QCursor::pos(), QString("%1: %2 GiB (%3 bytes)")
                                             .arg(QString::fromStdString(name))
                                             .arg(gib, 0, 'f', 2)
                                             .arg(static_cast<qint64>(gib * kGiB)));
    });
    series->append(set);
  }
  chart->addSeries(series);
  capacity_gib_ = a.capacity_bytes / kGiB;
  auto* capacity = new QLineSeries();
  capacity->setName(QString("%1 capacity").arg(QString::fromStdString(a.session.gpu)));
  capacity->setPen(QPen(Qt::red, 2, Qt::DashLine));
  // Spans the category axis (bars sit at 0 .. n-1) on a hidden value axis of its own.
  capacity->append(-0.5, capacity_gib_);
  capacity->append(static_cast<double>(columns.size()) - 0.5, capacity_gib_);
  chart->addSeries(capacity);
  auto* x = new QBarCategoryAxis();
  x->append(categories);
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  auto* x_line = new QValueAxis();
  x_line->setRange(-0.5, static_cast<double>(columns.size()) - 0.5);
  x_line->setVisible(false);
  chart->addAxis(x_line, Qt::AlignBottom);
  capacity->attachAxis(x_line);
  auto* y = new QValueAxis();
  double top = capacity_gib_;
  for (const auto& column : columns)
    top = std::max(top, static_cast<double>(column.total().value) / kGiB);
  y->setRange(0, top * 1.1);
  y->setTitleText("GiB per GPU");
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(y);
  capacity->attachAxis(y);
  chart->setTitle(title_of(a));
  chart->legend()->setAlignment(Qt::AlignRight);
  auto* old = this->chart();
  setChart(chart);
  delete old;
}

}  // namespace dtplan::gui
