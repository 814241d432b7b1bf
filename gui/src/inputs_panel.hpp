// The inputs form: model, GPU, topology, nodes and GPUs, strategy (a data-parallel one, or
// megatron|fsdp2 for a layout), precision, micro-batch, accumulation, sequence length,
// checkpointing, offload and the planner's global batch; then the layout: tensor, pipeline and
// context parallel sizes, chunks per GPU, sequence parallel, CP exchange, schedule, sharding,
// shard group and layers per stage. The labels are the ones labels.hpp renders fields as.
// Every change calls on_change (the window recomputes).
#pragma once

#include <QWidget>
#include <functional>

#include "session.hpp"

class QCheckBox;
class QComboBox;
class QFormLayout;
class QLineEdit;
class QSpinBox;

namespace dtplan::gui {

class InputsPanel : public QWidget {
 public:
  explicit InputsPanel(QWidget* parent = nullptr);
  Session session() const;
  void set_session(const Session& s);  // without calling on_change
  std::function<void()> on_change;

 private:
  QComboBox* combo(const QStringList& items, bool editable);
  QSpinBox* spin(int lo, int hi);
  void add_layout_rows(QFormLayout* form);
  void changed();
  QComboBox *model_, *gpu_, *topology_, *strategy_, *precision_, *optimizer_, *checkpointing_,
      *attention_, *attention_kernel_, *offload_, *optimizer_impl_, *layer_kernels_, *zero_grad_;
  QSpinBox *nodes_, *gpus_per_node_, *gpus_, *micro_batch_, *grad_accum_, *seq_len_, *global_batch_;
  QSpinBox *tp_, *pp_, *cp_, *ep_, *etp_, *interleave_, *dp_shard_;
  QComboBox *cp_comm_, *schedule_, *sharding_;
  QCheckBox* sequence_parallel_;
  QLineEdit *pp_layers_, *recompute_modules_;
  Session extra_;  // what the form does not show (measurements, profile)
  bool loading_ = false;
};

}  // namespace dtplan::gui
