// Text layout of memory estimates.
#include "memory_report.hpp"

#include <algorithm>

#include "dtplan/model/suggest.hpp"
#include "format.hpp"
#include "table.hpp"

namespace dtplan::cli {

namespace {

// The "how" column of the component table wraps here: the explanations run to 200 characters,
// and an unwrapped one would stretch the table's rules to its full length.
constexpr std::size_t kHowColumnChars = 72;

std::string signed_gib(Bytes b) {
  return (b.value >= 0 ? "+" : "") + gib(b);
}

std::string model_line(const ModelDesc& m) {
  std::string kind = m.kind == ModelKind::transformer  ? "transformer, " + m.transformer->model_type
                     : m.kind == ModelKind::layer_list ? "layer list"
                                                       : "parameter count only";
  // A bare parameter count is named by its count: say it once.
  const std::string count = format_thousands(m.params) + " parameters";
  if (m.kind == ModelKind::param_count) return count + " (" + kind + "; " + m.origin + ")";
  return m.name + ": " + count + " (" + kind + "; " + m.origin + ")";
}

std::string precision_line(const TrainingConfig& c) {
  const std::string p(name_of(c.precision));
  // Autocast keeps fp32 weights that the optimizer updates: there is no separate master copy.
  const std::string master =
      is_autocast(c.precision) ? " (fp32 weights, no master copy)" : " (fp32 master weights)";
  std::string text = is_mixed(c.precision) ? p + " mixed precision" + master : std::string("fp32");
  if (c.fp32_grad_accumulation) text += ", fp32 gradient accumulation buffer";
  return text + ", " + std::string(name_of(c.optimizer));
}

std::string batch_line(const ModelDesc& m, const TrainingConfig& c, std::int64_t seq_len) {
  std::string text = "micro-batch " + std::to_string(c.micro_batch);
  if (m.transformer) {
    text += " x sequence " + std::to_string(seq_len) +
            (c.seq_len == 0 ? " (the model's maximum; set --seq-len)" : "") + ", " +
            attention_text(m, c);
  } else if (m.layers) {
    text += ", input " + format_shape(m.layers->input_shape) + " per sample";
  } else {
    text += " (activations not modelled)";
  }
  return text + ", checkpointing " + std::string(name_of(c.checkpointing));
}

void print_terms(std::ostream& out, const std::string& title,
                 const std::vector<cost::NamedBytes>& terms) {
  if (terms.empty()) return;
  out << "\n  " << title << ":\n";
  TextTable t({"", "GiB", "bytes"});
  for (const auto& term : terms) {
    t.add_row({term.name, gib(term.bytes), format_thousands(term.bytes.value)});
  }
  t.print(out, {}, "    ");
}

std::string verdict(const cost::FitVerdict& f, bool host_assumed) {
  std::string text;
  if (f.gpu_fits) {
    text = "fits on " + f.gpu + " with " + format_gib(f.margin) + " (" + format_gb(f.margin) +
           ") to spare" + headroom_clause(f.capacity - f.margin, f.capacity);
  } else {
    const Bytes short_by{-f.margin.value};
    text = "does NOT fit on " + f.gpu + ": short by " + format_gib(short_by) + " (" +
           format_gb(short_by) + ")";
  }
  if (f.host_capacity && !f.host_fits) {
    const Bytes short_by{-f.host_margin.value};
    text += (f.gpu_fits ? "; but" : "; and") + std::string(" does NOT fit host memory: ") +
            format_gib(*f.host_capacity - f.host_margin) + " per node needed, " +
            format_gib(*f.host_capacity) + (host_assumed ? " assumed" : "") +
            " (--host-memory), short by " + format_gib(short_by);
  }
  return text;
}

// How each strategy lays out mixed-precision states, grouped.
void print_recipes(std::ostream& out, const std::vector<cost::MemoryEstimate>& estimates) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const auto& e : estimates) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&e](const auto& g) { return g.first == e.recipe; });
    if (it == groups.end()) it = groups.insert(groups.end(), {e.recipe, {}});
    it->second.emplace_back(name_of(e.strategy));
  }
  if (groups.size() < 2) return;
  out << "\n  states:\n";
  for (const auto& [recipe, who] : groups)
    out << "    " << join(who, ", ") << ": " << recipe << '\n';
}

// Notes that several strategies share are printed once, naming the strategies.
void print_shared_notes(std::ostream& out, const std::vector<cost::MemoryEstimate>& estimates) {
  std::vector<std::pair<std::string, std::vector<std::string>>> notes;
  for (const auto& e : estimates) {
    for (const auto& note : e.notes) {
      auto it = std::find_if(notes.begin(), notes.end(),
                             [&note](const auto& n) { return n.first == note; });
      if (it == notes.end()) it = notes.insert(notes.end(), {note, {}});
      it->second.emplace_back(name_of(e.strategy));
    }
  }
  for (const auto& [note, who] : notes) {
    const std::string scope = who.size() == estimates.size() ? "" : " (" + join(who, ", ") + ")";
    out << "\n  note" << scope << ": " << note << '\n';
  }
}

}  // namespace

cost::MemoryEstimate with_flags(cost::MemoryEstimate e) {
  for (auto& note : e.notes)
    note = with_flags(note);
  for (auto& [component, text] : e.explain)
    text = with_flags(text);
  return e;
}

void print_memory_header(std::ostream& out, const MemoryReportContext& ctx,
                         const std::string& strategy_text, std::int64_t seq_len) {
  const auto& c = ctx.config;
  out << "dtplan memory: peak memory per GPU during training\n";
  TextTable t({"", ""});
  t.add_row({"model", model_line(ctx.model)});
  t.add_row({"training", precision_line(c)});
  t.add_row({"GPUs", std::to_string(c.dp_size) + " data-parallel, " +
                         std::to_string(c.gpus_per_node) + " per node; " + strategy_text});
  t.add_row({"batch", batch_line(ctx.model, c, seq_len)});
  t.add_row({"offload", std::string(name_of(c.offload))});
  if (ctx.gpu) {
    t.add_row({"GPU", ctx.gpu->name + ", " + format_gib(ctx.gpu->memory) + " (" +
                          format_gb(ctx.gpu->memory) + ")"});
  } else {
    t.add_row({"GPU", "none given (--gpu NAME for a fit check)"});
  }
  t.print(out, {1});
}

void print_memory_detail(std::ostream& out, const MemoryReportContext& ctx,
                         const cost::MemoryEstimate& e) {
  print_memory_header(out, ctx, "strategy " + std::string(name_of(e.strategy)), e.seq_len);
  out << "  states    " << e.recipe << '\n';
  auto how = [&e](const std::string& key) {
    for (const auto& [k, text] : e.explain) {
      if (k == key) return text;
    }
    return std::string();
  };
  const auto& g = e.gpu;
  const auto& h = e.cpu;
  TextTable t({"component", "GPU GiB", "GPU bytes", "host GiB", "how"});
  auto row = [&](const std::string& label, Bytes gpu, Bytes host, const std::string& text) {
    t.add_row({label, gib(gpu), format_thousands(gpu.value), gib(host), text});
  };
  row("weights", g.weights, h.weights, how("weights"));
  row("master weights", g.master_weights, h.master_weights, how("master_weights"));
  row("gradients", g.gradients, h.gradients, how("gradients"));
  row("optimizer states", g.optimizer_states, h.optimizer_states, how("optimizer_states"));
  row("grad buckets", g.grad_buckets, h.grad_buckets, how("grad_buckets"));
  t.add_rule();
  row("model states", g.model_states(), h.model_states(), "");
  row("activations", g.activations, h.activations,
      e.activations_modelled ? "see below" : "not modelled");
  row("buffers", g.buffers, h.buffers, "see below");
  row("overhead", g.overhead, h.overhead, "see below");
  t.add_rule();
  row("peak total", g.total(), h.total(),
      format_gb(g.total()) + " per GPU; host " + format_gib(e.cpu_per_node) + " per node");
  out << '\n';
  t.wrap_last_column(kHowColumnChars);
  t.print(out, {4});
  out << "\n  as PyTorch reports the peak: " << gib(g.torch_reserved()) << " GiB reserved, "
      << gib(g.torch_allocated())
      << " GiB allocated (torch.cuda.max_memory_reserved and _allocated: without the CUDA "
         "context and NCCL's buffers, and allocated without the allocator's slack)\n";
  print_terms(out, "activations", e.activation_terms);
  print_terms(out, "buffers", e.buffer_terms);
  print_terms(out, "overhead", e.overhead_terms);
  for (const auto& note : e.notes)
    out << "\n  note: " << note << '\n';
  if (e.fit) out << "\n  verdict: " << verdict(*e.fit, ctx.host_assumed) << '\n';
}

void print_memory_comparison(std::ostream& out, const MemoryReportContext& ctx,
                             const std::vector<cost::MemoryEstimate>& estimates,
                             const std::vector<SkippedStrategy>& skipped) {
  const std::int64_t seq = estimates.empty() ? 0 : estimates.front().seq_len;
  print_memory_header(out, ctx, "all strategies compared", seq);
  std::vector<std::string> header{"GiB per GPU"};
  for (const auto& e : estimates)
    header.emplace_back(name_of(e.strategy));
  TextTable t(header);
  auto row = [&](const std::string& label, auto get) {
    std::vector<std::string> cells{label};
    for (const auto& e : estimates)
      cells.push_back(get(e));
    t.add_row(cells);
  };
  using E = cost::MemoryEstimate;
  row("weights", [](const E& e) { return gib(e.gpu.weights); });
  row("master weights", [](const E& e) { return gib(e.gpu.master_weights); });
  row("gradients", [](const E& e) { return gib(e.gpu.gradients); });
  row("optimizer states", [](const E& e) { return gib(e.gpu.optimizer_states); });
  row("grad buckets", [](const E& e) { return gib(e.gpu.grad_buckets); });
  t.add_rule();
  row("model states", [](const E& e) { return gib(e.gpu.model_states()); });
  row("activations", [](const E& e) { return gib(e.gpu.activations); });
  row("buffers", [](const E& e) { return gib(e.gpu.buffers); });
  row("overhead", [](const E& e) { return gib(e.gpu.overhead); });
  t.add_rule();
  row("peak total", [](const E& e) { return gib(e.gpu.total()); });
  row("peak total (GB)", [](const E& e) { return fixed(to_gb(e.gpu.total()), 2); });
  row("host per rank", [](const E& e) { return gib(e.cpu.total()); });
  if (ctx.gpu) {
    row("fits " + ctx.gpu->name,
        [](const E& e) { return std::string(e.fit->gpu_fits ? "yes" : "NO"); });
    row("margin", [](const E& e) { return signed_gib(e.fit->margin); });
    if (ctx.host_memory) {
      row("host GiB per node", [](const E& e) { return gib(e.cpu_per_node); });
      row("fits host " + gib(*ctx.host_memory) + " GiB" + (ctx.host_assumed ? " (assumed)" : ""),
          [](const E& e) { return std::string(e.fit->host_fits ? "yes" : "NO"); });
    }
  }
  out << '\n';
  t.print(out);
  if (!estimates.empty())
    print_terms(out, "activations (every strategy)", estimates[0].activation_terms);
  for (const auto& s : skipped) {
    out << "\n  skipped " << name_of(s.strategy) << ": " << s.reason << '\n';
  }
  print_recipes(out, estimates);
  print_shared_notes(out, estimates);
  if (ctx.gpu) {
    std::vector<std::string> fitting;
    const E* roomiest = nullptr;
    for (const auto& e : estimates) {
      if (!e.fit->fits) continue;
      fitting.emplace_back(name_of(e.strategy));
      if (roomiest == nullptr || e.fit->margin > roomiest->fit->margin) roomiest = &e;
    }
    out << "\n  verdict: ";
    const bool host_limits = std::any_of(estimates.begin(), estimates.end(), [](const E& e) {
      return e.fit->gpu_fits && !e.fit->host_fits;
    });
    const std::string where =
        ctx.gpu->name + (host_limits ? " and in host memory (" + gib(*ctx.host_memory) +
                                           " GiB per node, --host-memory)"
                                     : "");
    if (fitting.empty()) {
      out << "no strategy fits on " << where
          << "; try --checkpointing full, a smaller --micro-batch, more --gpus or --offload\n";
    } else {
      out << fitting.size() << " of " << estimates.size() << " fit on " << where << " ("
          << join(fitting, ", ") << "); most headroom: " << name_of(roomiest->strategy) << " ("
          << format_gib(roomiest->fit->margin) << " free)\n";
    }
  }
}

}  // namespace dtplan::cli
