// Inputs form (see inputs_panel.hpp).
#include "inputs_panel.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpressionValidator>
#include <QSpinBox>

#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/gpu_spec.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/model/training.hpp"

namespace dtplan::gui {
namespace {

QStringList to_list(const std::vector<std::string>& v) {
  QStringList out;
  for (const auto& s : v)
    out << QString::fromStdString(s);
  return out;
}

QStringList topology_presets(const std::filesystem::path& data) {
  QStringList out;
  for (const auto& e : std::filesystem::directory_iterator(data / "topologies")) {
    if (e.path().extension() == ".json") out << QString::fromStdString(e.path().stem().string());
  }
  out.sort();
  return out;
}

QStringList gpu_names(const std::filesystem::path& data) {
  QStringList out;
  const auto catalog = GpuCatalog::load(data / "gpus.json");
  for (const auto& g : catalog.gpus())
    out << QString::fromStdString(g.name);
  return out;
}

template <class T, std::size_t N>
QStringList names(const std::array<NamedValue<T>, N>& table) {
  QStringList out;
  for (const auto& row : table)
    out << QString::fromUtf8(row.name.data(), static_cast<int>(row.name.size()));
  return out;
}

// The combo boxes whose empty choice means "the default": shown as "(default)".
constexpr const char* kDefault = "(default)";

std::string chosen(const QComboBox* box) {
  const auto text = box->currentText().toStdString();
  return text == kDefault ? std::string() : text;
}

std::vector<std::int64_t> layer_counts(const QString& text) {
  std::vector<std::int64_t> out;
  for (const auto& part : text.split(',', Qt::SkipEmptyParts))
    out.push_back(part.trimmed().toLongLong());
  return out;
}

QString layer_text(const std::vector<std::int64_t>& counts) {
  QStringList parts;
  for (auto n : counts)
    parts << QString::number(n);
  return parts.join(',');
}

void select(QComboBox* box, const std::string& text) {
  const auto t = QString::fromStdString(text);
  if (box->findText(t) < 0) box->addItem(t);
  box->setCurrentText(t);
}

}  // namespace

QComboBox* InputsPanel::combo(const QStringList& items, bool editable) {
  auto* box = new QComboBox(this);
  box->addItems(items);
  box->setEditable(editable);
  connect(box, &QComboBox::currentTextChanged, this, [this] { changed(); });
  return box;
}

QSpinBox* InputsPanel::spin(int lo, int hi) {
  auto* box = new QSpinBox(this);
  box->setRange(lo, hi);
  connect(box, &QSpinBox::valueChanged, this, [this] { changed(); });
  return box;
}

InputsPanel::InputsPanel(QWidget* parent) : QWidget(parent) {
  const auto dir = resolve_data_dir("");
  auto* form = new QFormLayout(this);
  model_ = combo(to_list(list_model_presets(dir / "models")), true);
  auto* open_model = new QPushButton("Open...", this);
  connect(open_model, &QPushButton::clicked, this, [this] {
    const auto f = QFileDialog::getOpenFileName(this, "Model: config.json or dtplan layer JSON");
    if (!f.isEmpty()) model_->setCurrentText(f);
  });
  auto* model_row = new QHBoxLayout();
  model_row->addWidget(model_, 1);
  model_row->addWidget(open_model);
  form->addRow("model", model_row);
  gpu_ = combo(gpu_names(dir), false);
  form->addRow("GPU", gpu_);
  topology_ = combo(topology_presets(dir), true);
  auto* open_topo = new QPushButton("Open...", this);
  connect(open_topo, &QPushButton::clicked, this, [this] {
    const auto f = QFileDialog::getOpenFileName(this, "Topology: JSON or nvidia-smi topo -m text");
    if (!f.isEmpty()) topology_->setCurrentText(f);
  });
  auto* topo_row = new QHBoxLayout();
  topo_row->addWidget(topology_, 1);
  topo_row->addWidget(open_topo);
  form->addRow("topology", topo_row);
  form->addRow("nodes", nodes_ = spin(1, 4096));
  form->addRow("GPUs per node", gpus_per_node_ = spin(0, 1024));
  gpus_per_node_->setSpecialValueText("all");
  form->addRow("GPUs", gpus_ = spin(1, 65536));
  form->addRow("strategy", strategy_ = combo(to_list(strategy_names()) << "megatron"
                                                                       << "fsdp2",
                                             false));
  form->addRow("precision", precision_ = combo(names(kPrecisions), false));
  form->addRow("optimizer", optimizer_ = combo(names(kOptimizers), false));
  form->addRow("optimizer kernels", optimizer_impl_ = combo(names(kOptimizerImpls), false));
  form->addRow("micro-batch", micro_batch_ = spin(1, 65536));
  form->addRow("accumulation", grad_accum_ = spin(1, 65536));
  form->addRow("sequence (0: max)", seq_len_ = spin(0, 1 << 20));
  form->addRow("checkpointing", checkpointing_ = combo(names(kCheckpointings), false));
  form->addRow("attention", attention_ = combo(names(kAttentions), false));
  form->addRow("attention kernel", attention_kernel_ = combo(names(kAttentionKernels), false));
  form->addRow("layer kernels", layer_kernels_ = combo(names(kLayerKernels), false));
  form->addRow("zero_grad", zero_grad_ = combo(names(kZeroGrads), false));
  form->addRow("offload", offload_ = combo(names(kOffloads), false));
  form->addRow("global batch (plan)", global_batch_ = spin(1, 1 << 24));
  add_layout_rows(form);
  set_session(Session{});
}

void InputsPanel::add_layout_rows(QFormLayout* form) {
  form->addRow("tensor parallel", tp_ = spin(1, 1'000'000));
  form->addRow("pipeline stages", pp_ = spin(1, 1'000'000));
  form->addRow("context parallel", cp_ = spin(1, 1'000'000));
  form->addRow("expert parallel", ep_ = spin(1, 1'000'000));
  form->addRow("expert tensor parallel", etp_ = spin(0, 1'000'000));
  etp_->setSpecialValueText("as tensor parallel");
  form->addRow("chunks per GPU", interleave_ = spin(1, 1'000'000));
  sequence_parallel_ = new QCheckBox(this);
  connect(sequence_parallel_, &QCheckBox::toggled, this, [this] { changed(); });
  form->addRow("sequence parallel", sequence_parallel_);
  form->addRow("CP exchange", cp_comm_ = combo({"p2p", "all_gather", "a2a"}, false));
  form->addRow("schedule",
               schedule_ = combo(
                   {kDefault, "1f1b", "interleaved", "gpipe", "zb-h1", "zb-h2", "zbv"}, false));
  form->addRow("sharding", sharding_ = combo(
                               {kDefault, "none", "optimizer", "gradients", "parameters"}, false));
  form->addRow("shard group", dp_shard_ = spin(0, 1'000'000));
  dp_shard_->setSpecialValueText("all dp x cp");
  pp_layers_ = new QLineEdit(this);
  pp_layers_->setPlaceholderText("e.g. 7,8,8,7 (default: the rule)");
  pp_layers_->setValidator(
      new QRegularExpressionValidator(QRegularExpression("[0-9]{0,6}(,[0-9]{1,6})*,?"), this));
  connect(pp_layers_, &QLineEdit::textChanged, this, [this] { changed(); });
  form->addRow("layers per stage", pp_layers_);
  // Megatron-LM's --recompute-modules, read under checkpointing selective.
  recompute_modules_ = new QLineEdit(this);
  recompute_modules_->setPlaceholderText("core_attn (checkpointing selective)");
  recompute_modules_->setToolTip(
      "with checkpointing selective, the parts of each block rebuilt in backward: "
      "comma-separated from core_attn, layernorm, mla_up_proj, mlp, moe_act, moe, "
      "shared_experts, or none");
  recompute_modules_->setValidator(
      new QRegularExpressionValidator(QRegularExpression("[a-z_,]*"), this));
  connect(recompute_modules_, &QLineEdit::textChanged, this, [this] { changed(); });
  form->addRow("recompute modules", recompute_modules_);
}

Session InputsPanel::session() const {
  Session s = extra_;
  s.model = model_->currentText().toStdString();
  s.gpu = gpu_->currentText().toStdString();
  s.topology = topology_->currentText().toStdString();
  s.nodes = nodes_->value();
  s.gpus_per_node = gpus_per_node_->value();
  s.gpus = gpus_->value();
  s.strategy = strategy_->currentText().toStdString();
  s.precision = precision_->currentText().toStdString();
  s.optimizer = optimizer_->currentText().toStdString();
  s.optimizer_impl = optimizer_impl_->currentText().toStdString();
  s.layer_kernels = layer_kernels_->currentText().toStdString();
  s.zero_grad = zero_grad_->currentText().toStdString();
  s.micro_batch = micro_batch_->value();
  s.grad_accum = grad_accum_->value();
  s.seq_len = seq_len_->value();
  s.checkpointing = checkpointing_->currentText().toStdString();
  s.attention = attention_->currentText().toStdString();
  s.attention_kernel = attention_kernel_->currentText().toStdString();
  s.offload = offload_->currentText().toStdString();
  s.global_batch = global_batch_->value();
  s.layout.framework.clear();  // the strategy names it (set_session moved it there)
  s.layout.tp = tp_->value();
  s.layout.pp = pp_->value();
  s.layout.cp = cp_->value();
  s.layout.ep = ep_->value();
  s.layout.etp = etp_->value();
  s.layout.interleave = interleave_->value();
  s.layout.sequence_parallel = sequence_parallel_->isChecked();
  s.layout.cp_comm = cp_comm_->currentText().toStdString();
  s.layout.schedule = chosen(schedule_);
  s.layout.sharding = chosen(sharding_);
  s.layout.dp_shard = dp_shard_->value();
  s.layout.pp_layers = layer_counts(pp_layers_->text());
  s.layout.recompute_modules = recompute_modules_->text().toStdString();
  return s;
}

void InputsPanel::set_session(const Session& s) {
  loading_ = true;
  extra_ = s;
  select(model_, s.model);
  select(gpu_, s.gpu);
  select(topology_, s.topology);
  nodes_->setValue(static_cast<int>(s.nodes));
  gpus_per_node_->setValue(static_cast<int>(s.gpus_per_node));
  gpus_->setValue(static_cast<int>(s.gpus));
  // The form names a layout's framework as its strategy.
  const bool framework_apart =
      !s.layout.framework.empty() && s.strategy != "megatron" && s.strategy != "fsdp2";
  select(strategy_, framework_apart ? s.layout.framework : s.strategy);
  select(precision_, s.precision);
  select(optimizer_, s.optimizer);
  select(optimizer_impl_, s.optimizer_impl);
  select(layer_kernels_, s.layer_kernels);
  select(zero_grad_, s.zero_grad);
  micro_batch_->setValue(static_cast<int>(s.micro_batch));
  grad_accum_->setValue(static_cast<int>(s.grad_accum));
  seq_len_->setValue(static_cast<int>(s.seq_len));
  select(checkpointing_, s.checkpointing);
  select(attention_, s.attention);
  select(attention_kernel_, s.attention_kernel);
  select(offload_, s.offload);
  global_batch_->setValue(static_cast<int>(s.global_batch));
  tp_->setValue(static_cast<int>(s.layout.tp));
  pp_->setValue(static_cast<int>(s.layout.pp));
  cp_->setValue(static_cast<int>(s.layout.cp));
  ep_->setValue(static_cast<int>(s.layout.ep));
  etp_->setValue(static_cast<int>(s.layout.etp));
  interleave_->setValue(static_cast<int>(s.layout.interleave));
  sequence_parallel_->setChecked(s.layout.sequence_parallel);
  select(cp_comm_, s.layout.cp_comm);
  select(schedule_, s.layout.schedule.empty() ? kDefault : s.layout.schedule);
  select(sharding_, s.layout.sharding.empty() ? kDefault : s.layout.sharding);
  dp_shard_->setValue(static_cast<int>(s.layout.dp_shard));
  pp_layers_->setText(layer_text(s.layout.pp_layers));
  recompute_modules_->setText(QString::fromStdString(s.layout.recompute_modules));
  loading_ = false;
}

void InputsPanel::changed() {
  if (!loading_ && on_change) on_change();
}

}  // namespace dtplan::gui
