// The inputs form: model, GPU, topology, nodes and GPUs, strategy, precision, micro-batch,
// accumulation, sequence length, checkpointing, offload and the planner's global batch. Every
// change calls on_change (the window recomputes).
#pragma once

#include <QWidget>
#include <functional>

#include "session.hpp"

class QComboBox;
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
  void changed();
  QComboBox *model_, *gpu_, *topology_, *strategy_, *precision_, *optimizer_, *checkpointing_,
      *offload_;
  QSpinBox *nodes_, *gpus_, *micro_batch_, *grad_accum_, *seq_len_, *global_batch_;
  Session extra_;  // what the form does not show (measurements, profile)
  bool loading_ = false;
};

}  // namespace dtplan::gui
