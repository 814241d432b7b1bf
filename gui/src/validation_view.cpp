// Validation view: predicted against measured step times (see views.hpp).
#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>

#include "views.hpp"

namespace dtplan::gui {

ValidationView::ValidationView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  hint_ = new QLabel(this);
  hint_->setWordWrap(true);
  layout->addWidget(hint_);
  auto* split = new QSplitter(Qt::Horizontal, this);
  bars_ = new QChartView(split);
  scatter_ = new QChartView(split);
  bars_->setRenderHint(QPainter::Antialiasing);
  scatter_->setRenderHint(QPainter::Antialiasing);
  split->addWidget(bars_);
  split->addWidget(scatter_);
  layout->addWidget(split, 3);
  table_ = new QTableWidget(this);
  table_->setColumnCount(5);
  table_->setHorizontalHeaderLabels(
      {"measurement", "predicted step", "measured step", "error", "peak memory error"});
  table_->horizontalHeader()->setStretchLastSection(true);
  layout->addWidget(table_, 1);
}

int ValidationView::rows() const {
  return table_->rowCount();
}

void ValidationView::show_analysis(const Analysis& a) {
  const auto& rows = a.validation;
  QString hint = rows.empty() ? "Open dtplan-run measurement files (File > Open measurement) "
                                "to compare them with the cost model."
                              : QString(
                                    "%1 measurement(s); predictions from the hardware "
                                    "profile of each one's backend and ranks")
                                    .arg(rows.size());
  for (const auto& p : a.problems) {
    if (p.rfind("validation: ", 0) == 0) hint += "\n" + QString::fromStdString(p);
  }
  hint_->setText(hint);
  auto* chart = new QChart();
  auto* predicted = new QBarSet("predicted");
  auto* measured = new QBarSet("measured");
  QStringList labels;
  double top = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    *predicted << rows[i].predicted_step_s * 1e3;
    *measured << rows[i].measured_step_s * 1e3;
    labels << QString("%1").arg(i + 1);
    top = std::max({top, rows[i].predicted_step_s * 1e3, rows[i].measured_step_s * 1e3});
  }
  auto* series = new QBarSeries();
  series->append(predicted);
  series->append(measured);
  chart->addSeries(series);
  auto* x = new QBarCategoryAxis();
  x->append(labels);
  chart->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  auto* y = new QValueAxis();
  y->setRange(0, std::max(1.0, top * 1.1));
  y->setTitleText("step time (ms)");
  chart->addAxis(y, Qt::AlignLeft);
  series->attachAxis(y);
  chart->setTitle("Step time: predicted and measured");
  auto* old = bars_->chart();
  bars_->setChart(chart);
  delete old;
  auto* sc = new QChart();
  auto* points = new QScatterSeries();
  points->setName("measurements");
  auto* diagonal = new QLineSeries();
  diagonal->setName("y = x");
  const double hi = std::max(1.0, top * 1.1);
  diagonal->append(0, 0);
  diagonal->append(hi, hi);
  for (const auto& r : rows)
    points->append(r.measured_step_s * 1e3, r.predicted_step_s * 1e3);
  sc->addSeries(diagonal);
  sc->addSeries(points);
  sc->createDefaultAxes();
  sc->axes(Qt::Horizontal).front()->setRange(0, hi);
  sc->axes(Qt::Vertical).front()->setRange(0, hi);
  sc->axes(Qt::Horizontal).front()->setTitleText("measured (ms)");
  sc->axes(Qt::Vertical).front()->setTitleText("predicted (ms)");
  sc->setTitle("Predicted against measured");
  old = scatter_->chart();
  scatter_->setChart(sc);
  delete old;
  table_->setRowCount(static_cast<int>(rows.size()));
  for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
    const auto& r = rows[static_cast<std::size_t>(i)];
    const double mem = (r.predicted_peak_bytes - r.measured_peak_bytes) / r.measured_peak_bytes;
    const QStringList cells{
        QString("%1. %2 (%3)")
            .arg(i + 1)
            .arg(QString::fromStdString(r.label), QString::fromStdString(r.file)),
        QString("%1 ms").arg(r.predicted_step_s * 1e3, 0, 'f', 2),
        QString("%1 ms").arg(r.measured_step_s * 1e3, 0, 'f', 2),
        QString("%1%").arg(r.error() * 100, 0, 'f', 1), QString("%1%").arg(mem * 100, 0, 'f', 1)};
    for (int c = 0; c < cells.size(); ++c)
      table_->setItem(i, c, new QTableWidgetItem(cells[c]));
  }
  table_->resizeColumnsToContents();
}

}  // namespace dtplan::gui
