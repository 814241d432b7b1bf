#include "workflow_dialogs.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <algorithm>

namespace dtplan::gui {
namespace {

QComboBox* backend_box(QWidget* parent) {
  auto* box = new QComboBox(parent);
  box->addItems({"cpu", "cuda"});
  box->setToolTip("cpu: MPI ranks with Eigen; cuda: one GPU per rank with NCCL and cuBLAS");
  return box;
}

QSpinBox* int_box(QWidget* parent, int low, int high, int value) {
  auto* box = new QSpinBox(parent);
  box->setRange(low, high);
  box->setValue(value);
  return box;
}

// A line edit with a Browse button that picks a file to save.
QWidget* save_path_row(QDialog* parent, QLineEdit* edit, const QString& filter) {
  auto* row = new QWidget(parent);
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* browse = new QPushButton("Browse...", row);
  QObject::connect(browse, &QPushButton::clicked, parent, [parent, edit, filter] {
    const auto path = QFileDialog::getSaveFileName(parent, "Save as", edit->text(), filter);
    if (!path.isEmpty()) edit->setText(path);
  });
  layout->addWidget(edit);
  layout->addWidget(browse);
  return row;
}

QDialogButtonBox* ok_cancel(QDialog* dialog, const QString& ok_text) {
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, dialog);
  buttons->button(QDialogButtonBox::Ok)->setText(ok_text);
  QObject::connect(buttons, &QDialogButtonBox::accepted, dialog, &QDialog::accept);
  QObject::connect(buttons, &QDialogButtonBox::rejected, dialog, &QDialog::reject);
  return buttons;
}

}  // namespace

std::optional<CalibrateChoice> ask_calibrate(QWidget* parent) {
  QDialog dialog(parent);
  dialog.setWindowTitle("Calibrate this machine");
  auto* form = new QFormLayout(&dialog);
  auto* backend = backend_box(&dialog);
  auto* ranks = int_box(&dialog, 1, 1024, 2);
  auto* quick = new QCheckBox("fewer shapes and sizes (seconds)", &dialog);
  auto* steps = new QCheckBox("fit the step correction from whole training steps", &dialog);
  steps->setChecked(true);
  auto* out = new QLineEdit("profile.json", &dialog);
  auto* force = new QCheckBox("replace a good profile even with a noisy one", &dialog);
  form->addRow("backend", backend);
  form->addRow("ranks", ranks);
  form->addRow("", quick);
  form->addRow("", steps);
  form->addRow("profile file", save_path_row(&dialog, out, "Profiles (*.json)"));
  form->addRow("", force);
  form->addRow(ok_cancel(&dialog, "Calibrate"));
  if (dialog.exec() != QDialog::Accepted) return std::nullopt;
  CalibrateChoice c;
  c.request.backend = backend->currentText().toStdString();
  c.request.np = ranks->value();
  c.request.quick = quick->isChecked();
  c.request.no_steps = !steps->isChecked();
  c.out = out->text().toStdString();
  c.force = force->isChecked();
  return c;
}

std::optional<AutotuneChoice> ask_autotune(QWidget* parent, const Session& s) {
  QDialog dialog(parent);
  dialog.setWindowTitle(QString("Autotune %1 by measurement").arg(QString::fromStdString(s.model)));
  auto* form = new QFormLayout(&dialog);
  AutotuneChoice d;
  auto* backend = backend_box(&dialog);
  auto* ranks = int_box(&dialog, 1, 1024, 2);
  auto* scale = new QDoubleSpinBox(&dialog);
  scale->setRange(0.01, 1.0);
  scale->setSingleStep(0.05);
  scale->setValue(d.scale);
  scale->setToolTip("the runtime runs the model at this fraction of its width");
  auto* batch = int_box(&dialog, 1, 1 << 20, static_cast<int>(d.global_batch));
  auto* seq =
      int_box(&dialog, 1, 1 << 20, static_cast<int>(std::min<std::int64_t>(s.seq_len, 128)));
  auto* steps = int_box(&dialog, 1, 1000, static_cast<int>(d.steps));
  auto* trials = int_box(&dialog, 0, 100000, 0);
  trials->setSpecialValueText("no limit");
  auto* results = new QLineEdit("autotune.jsonl", &dialog);
  auto* resume = new QCheckBox("continue this results file, skipping its trials", &dialog);
  auto* recompute = new QCheckBox(
      "also measure selective (attention core) and full activation recomputation", &dialog);
  form->addRow("backend", backend);
  form->addRow("ranks", ranks);
  form->addRow("model width", scale);
  form->addRow("global batch", batch);
  form->addRow("sequence length", seq);
  form->addRow("measured steps per trial", steps);
  form->addRow("at most trials", trials);
  form->addRow("", recompute);
  form->addRow("results file", save_path_row(&dialog, results, "JSON lines (*.jsonl)"));
  form->addRow("", resume);
  form->addRow(ok_cancel(&dialog, "Autotune"));
  if (dialog.exec() != QDialog::Accepted) return std::nullopt;
  d.backend = backend->currentText().toStdString();
  d.np = ranks->value();
  d.scale = scale->value();
  d.global_batch = batch->value();
  d.seq_len = seq->value();
  d.steps = steps->value();
  d.max_trials = trials->value();
  d.results = results->text().toStdString();
  d.resume = resume->isChecked();
  d.recompute = recompute->isChecked();
  return d;
}

}  // namespace dtplan::gui
