// Plan view: ranked table, Pareto scatter, rejected configurations, exports (see views.hpp).
#include <QApplication>
#include <QClipboard>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QScatterSeries>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "dtplan/cost/layout_text.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/file_output.hpp"
#include "dtplan/planner/exports.hpp"
#include "labels.hpp"
#include "views.hpp"

namespace dtplan::gui {

namespace {

constexpr double kGiB = 1073741824.0;

QStandardItem* number(double v, int decimals) {
  auto* item = new QStandardItem(QString::number(v, 'f', decimals));
  item->setData(v, Qt::UserRole);  // sorted by value, not text
  return item;
}

QString config_text(const planner::Candidate& c) {
  if (c.micro_batch == 0) {  // a rejection of a whole family
    return QString("%1 %2 on %3 GPUs, checkpointing %4, offload %5")
        .arg(QString::fromStdString(std::string(name_of(c.strategy))))
        .arg(QString::fromStdString(std::string(name_of(c.precision))))
        .arg(c.dp)
        .arg(QString::fromStdString(std::string(name_of(c.checkpointing))))
        .arg(QString::fromStdString(std::string(name_of(c.offload))));
  }
  return QString("%1 %2 mb %3 x %4 x %5 GPUs%6")
      .arg(QString::fromStdString(std::string(name_of(c.strategy))))
      .arg(QString::fromStdString(std::string(name_of(c.precision))))
      .arg(c.micro_batch)
      .arg(c.grad_accum)
      .arg(c.dp)
      .arg(c.grad_accum > 1 ? (c.no_sync ? " no_sync" : " sync") : "");
}

QString entry_text(const planner::LayoutChoice& c) {
  if (c.data_parallel) return config_text(*c.data_parallel);
  const auto& l = c.layout->layout;
  return QString("%1 %2 %3")
      .arg(QString::fromStdString(std::string(name_of(l.framework))))
      .arg(QString::fromStdString(std::string(name_of(l.precision))))
      .arg(QString::fromStdString(cost::describe(l)));
}

QStandardItem* text_item(const std::string& text) {
  auto* item = new QStandardItem(QString::fromStdString(text));
  item->setData(item->text(), Qt::UserRole);
  return item;
}

QList<QStandardItem*> ranked_row(std::size_t i, const planner::LayoutChoice& c) {
  const auto* l = c.layout ? &c.layout->layout : nullptr;
  const auto* d = c.data_parallel ? &*c.data_parallel : nullptr;
  auto* conf = new QStandardItem(entry_text(c));
  conf->setData(conf->text(), Qt::UserRole);
  conf->setToolTip(conf->text());
  return {number(double(i + 1), 0),
          number(static_cast<double>(c.gpus()), 0),
          number(static_cast<double>(l ? l->tp : 1), 0),
          number(static_cast<double>(l ? l->cp : 1), 0),
          number(static_cast<double>(l ? l->pp : 1), 0),
          number(static_cast<double>(c.memory().value) / kGiB, 2),
          number(c.step_s(), 3),
          number(c.samples_per_s(), 1),
          number(c.mfu() * 100, 1),
          text_item(std::string(name_of(d ? d->checkpointing : l->recompute))),
          text_item(std::string(name_of(d ? d->offload : l->offload))),
          conf};  // last: the long text stretches, the figures stay in view
}

// The combinations the searches turned down without pricing them, as the CLI counts them.
QString not_evaluated_text(const planner::UnifiedCounts& n) {
  if (n.not_evaluated <= 0) return {};
  return QString("; %1 more combinations rejected without evaluation (%2)")
      .arg(n.not_evaluated)
      .arg(QString::fromStdString(n.not_evaluated_why));
}

}  // namespace

PlanView::PlanView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  layout->addWidget(summary_);
  notes_ = new QLabel(this);
  notes_->setWordWrap(true);
  notes_->setStyleSheet("color: #8a4b00");
  layout->addWidget(notes_);
  auto* split = new QSplitter(Qt::Horizontal, this);
  ranked_ = new QStandardItemModel(this);
  auto* proxy = new QSortFilterProxyModel(this);
  proxy->setSourceModel(ranked_);
  proxy->setSortRole(Qt::UserRole);
  table_ = new QTableView(split);
  table_->setModel(proxy);
  table_->setSortingEnabled(true);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setWordWrap(false);  // one line per entry; the configuration scrolls, not the figures
  pareto_ = new QChartView(split);
  pareto_->setRenderHint(QPainter::Antialiasing);
  split->addWidget(table_);
  split->addWidget(pareto_);
  split->setSizes({950, 450});  // the table holds the figures and each layout in words
  layout->addWidget(split, 3);
  layout->addWidget(new QLabel(
      "Rejected configurations and layouts, nearest misses first (at most 500; dtplan plan "
      "--json --all-rejected lists every one):",
      this));
  rejected_ = new QTableWidget(this);
  rejected_->setColumnCount(3);
  rejected_->setHorizontalHeaderLabels({"configuration", "reason", "detail"});
  rejected_->horizontalHeader()->setStretchLastSection(true);
  layout->addWidget(rejected_, 1);
  auto* buttons = new QHBoxLayout();
  auto* ds = new QPushButton("Export DeepSpeed config...", this);
  auto* launch = new QPushButton("Copy launch lines", this);
  connect(ds, &QPushButton::clicked, this, [this] { export_deepspeed(); });
  connect(launch, &QPushButton::clicked, this, [this] { copy_launch(); });
  buttons->addWidget(ds);
  buttons->addWidget(launch);
  buttons->addStretch();
  layout->addLayout(buttons);
}

int PlanView::ranked_rows() const {
  return ranked_->rowCount();
}

int PlanView::rejected_rows() const {
  return rejected_->rowCount();
}

void PlanView::show_analysis(const Analysis& a) {
  last_ = a;
  ranked_->clear();
  ranked_->setHorizontalHeaderLabels({"#", "GPUs", "tp", "cp", "pp", "GiB/GPU", "step (s)",
                                      "samples/s", "MFU %", "checkpointing", "offload",
                                      "configuration"});
  const auto& r = a.plan;
  for (std::size_t i = 0; i < r.ranked.size(); ++i)
    ranked_->appendRow(ranked_row(i, r.ranked[i]));
  table_->sortByColumn(0, Qt::AscendingOrder);
  table_->verticalHeader()->hide();
  table_->resizeColumnsToContents();
  show_pareto(r);
  show_rejected(r);
  const auto* best = r.best();
  const auto n = planner::counts_of(r);
  summary_->setText(
      best ? QString("best: %1, %2 samples/s, step %3 s, %4 GiB per GPU; %5 configurations "
                     "searched (%6 data-parallel, %7 layouts): %8 chosen, %9 rejected")
                     .arg(entry_text(*best))
                     .arg(best->samples_per_s(), 0, 'f', 1)
                     .arg(best->step_s(), 0, 'f', 3)
                     .arg(static_cast<double>(best->memory().value) / kGiB, 0, 'f', 2)
                     .arg(n.evaluated)
                     .arg(n.data_parallel_evaluated)
                     .arg(n.layouts_evaluated)
                     .arg(n.chosen)
                     .arg(n.rejected_evaluated) +
                 not_evaluated_text(n)
           : QString("nothing fits; what would (and the rejected configurations below):"));
  QStringList notes;
  for (const auto& note : a.plan_notes)
    notes << QString::fromUtf8("\u2022 ") + QString::fromStdString(with_labels(note));
  notes_->setText(notes.join("\n"));
  notes_->setVisible(!notes.isEmpty());
}

QString PlanView::summary_text() const {
  return summary_->text();
}

QString PlanView::notes_text() const {
  return notes_->text();
}

void PlanView::show_pareto(const planner::UnifiedPlan& r) {
  auto* chart = new QChart();
  auto* all = new QScatterSeries();
  all->setName("ranked");
  all->setColor(QColor(160, 160, 160));
  all->setMarkerSize(8);
  for (const auto& c : r.ranked)
    all->append(static_cast<double>(c.memory().value) / kGiB, c.samples_per_s());
  auto* front = new QScatterSeries();
  front->setName("Pareto front");
  front->setColor(QColor(31, 119, 180));
  front->setMarkerSize(12);
  for (const auto& c : r.pareto)
    front->append(static_cast<double>(c.memory().value) / kGiB, c.samples_per_s());
  chart->addSeries(all);
  chart->addSeries(front);
  // Both axes from zero to at least a tenth beyond the largest point, on round ticks: the
  // default axes end at the extreme points and cut their markers in half.
  double top_gib = 0;
  double top_rate = 0;
  for (const auto* series : {all, front}) {
    for (const auto& p : series->points()) {
      top_gib = std::max(top_gib, p.x());
      top_rate = std::max(top_rate, p.y());
    }
  }
  auto* x = new QValueAxis();
  x->setTitleText("GiB per GPU");
  x->setRange(0, top_gib > 0 ? top_gib * 1.1 : 1.0);
  x->applyNiceNumbers();  // round ticks; the range only grows
  auto* y = new QValueAxis();
  y->setTitleText("samples/s");
  y->setRange(0, top_rate > 0 ? top_rate * 1.1 : 1.0);
  y->applyNiceNumbers();
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (auto* series : {all, front}) {
    series->attachAxis(x);
    series->attachAxis(y);
  }
  pareto_axes_ = QRectF(QPointF(x->min(), y->min()), QPointF(x->max(), y->max()));
  chart->setTitle("Memory against throughput");
  auto* old = pareto_->chart();
  pareto_->setChart(chart);
  delete old;
}

void PlanView::show_rejected(const planner::UnifiedPlan& r) {
  rejected_->setRowCount(0);
  // Nearest misses first: out of memory by the least, then the other reasons.
  std::vector<const planner::RejectedChoice*> shown;
  for (const auto& x : r.rejected) {
    if (x.reason != planner::Reason::slower) shown.push_back(&x);  // slower: in the table
  }
  std::stable_sort(shown.begin(), shown.end(), [](const auto* x, const auto* y) {
    if (x->reason != y->reason) return x->reason < y->reason;
    return x->amount < y->amount;
  });
  // A search over thousands of GPUs rejects tens of thousands: the nearest few are listed.
  if (shown.size() > static_cast<std::size_t>(kRejectedListed))
    shown.resize(static_cast<std::size_t>(kRejectedListed));
  rejected_->setRowCount(static_cast<int>(shown.size()));
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const auto& x = *shown[i];
    const int row = static_cast<int>(i);
    rejected_->setItem(row, 0, new QTableWidgetItem(entry_text(r.choice_of(x))));
    rejected_->setItem(
        row, 1,
        new QTableWidgetItem(QString::fromStdString(std::string(planner::name_of(x.reason)))));
    QString detail = QString::fromStdString(with_labels(r.detail_of(x)));
    if (x.reason == planner::Reason::out_of_memory)
      detail = QString("%1 GiB over").arg(x.amount, 0, 'f', 2);
    rejected_->setItem(row, 2, new QTableWidgetItem(detail));
  }
  rejected_->verticalHeader()->hide();
  rejected_->resizeColumnsToContents();
}

void PlanView::export_deepspeed() {
  if (!last_.plan.data_parallel.best) return;
  const auto path =
      QFileDialog::getSaveFileName(this, "DeepSpeed config", "ds_config.json", "JSON (*.json)");
  if (path.isEmpty()) return;
  try {
    planner::LaunchOptions o;
    o.ds_config = path.toStdString();
    const auto ds =
        planner::deepspeed_config(plan_file_of(last_, *last_.plan.data_parallel.best), o);
    write_file_atomically(path.toStdString(), ds.config.dump(2) + "\n", "DeepSpeed config");
  } catch (const std::exception& e) {
    QMessageBox::warning(this, "Export DeepSpeed config", QString::fromStdString(message_of(e)));
  }
}

void PlanView::copy_launch() {
  if (!last_.plan.data_parallel.best) return;
  const auto plan = plan_file_of(last_, *last_.plan.data_parallel.best);
  QString text;
  for (const auto& l : planner::torchrun_lines(plan, {}))
    text += QString::fromStdString(l) + "\n";
  QApplication::clipboard()->setText(text);
}

}  // namespace dtplan::gui
