// dtplan-gui under QT_QPA_PLATFORM=offscreen: the data behind each view holds the cost model's
// numbers (compared with direct library calls), changing an input updates them, and every
// view renders to a non-empty image.
#include <QBuffer>
#include <QGraphicsEllipseItem>
#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <QImage>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest/QtTest>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "analysis.hpp"
#include "dtplan/cost/dense_stack.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/cost/trace.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "dtplan/model/topology_io.hpp"
#include "dtplan/planner/layout_spec.hpp"
#include "gui_options.hpp"
#include "headless_messages.hpp"
#include "inputs_panel.hpp"
#include "labels.hpp"
#include "main_window.hpp"
#include "views.hpp"

using namespace dtplan;
using namespace dtplan::gui;

namespace {

// The default session's configuration, built here from the library, not from the GUI.
TrainingConfig default_config(Strategy s) {
  TrainingConfig c;
  c.strategy = s;
  c.precision = Precision::bf16;
  c.optimizer = Optimizer::adamw;
  c.dp_size = 8;
  c.gpus_per_node = 8;
  c.micro_batch = 16;
  c.seq_len = 1024;
  c.grad_accum = 4;
  return c;
}

// Fraction of pixels that differ from the image's most common colour.
double ink(const QImage& img) {
  std::map<QRgb, int> counts;
  for (int y = 0; y < img.height(); y += 2) {
    for (int x = 0; x < img.width(); x += 2)
      ++counts[img.pixel(x, y)];
  }
  int most = 0, total = 0;
  for (const auto& [rgb, n] : counts) {
    most = std::max(most, n);
    total += n;
  }
  return 1.0 - static_cast<double>(most) / total;
}

// Every view of a session rendered headless to a 1200 x 800 PNG with something drawn on it.
void render_every_view(const Session& s) {
  QTemporaryDir dir;
  for (const char* name : {"memory", "topology", "timeline", "plan", "validation"}) {
    MainWindow w(s);
    GuiOptions o;
    o.session = s;
    o.view = name;
    o.width = 1200;
    o.height = 800;
    o.screenshot = dir.filePath(QString(name) + ".png").toStdString();
    QCOMPARE(render_screenshot(w, o), 0);
    QImage img(QString::fromStdString(o.screenshot));
    QCOMPARE(img.width(), 1200);
    QCOMPARE(img.height(), 800);
    QVERIFY2(ink(img) > 0.01, name);
  }
}

// Llama 2 13B on two DGX H100 under Megatron-LM: tp 2 x cp 2 x pp 2 x dp 2, sequence 8192,
// 8 micro-batches per pipeline, selective recompute, K/V all-gathered as Llama 3 does (not
// overlapped, so every kind of stream has exposed work in the step; ring attention's exchange
// hides behind attention here).
Session layout_session() {
  Session s;
  s.model = "llama-2-13b";
  s.gpu = "H100-SXM";
  s.topology = "dgx-h100";
  s.nodes = 2;
  s.gpus = 16;
  s.strategy = "megatron";
  s.micro_batch = 1;
  s.grad_accum = 8;
  s.seq_len = 8192;
  s.checkpointing = "selective";
  s.global_batch = 64;
  s.layout.tp = 2;
  s.layout.cp = 2;
  s.layout.pp = 2;
  s.layout.sequence_parallel = true;
  s.layout.cp_comm = "all_gather";
  return s;
}

// The error a session's computation reports, as the window shows it.
// The session dtplan-gui's command line gives.
Session parse(std::vector<std::string> args) {
  args.insert(args.begin(), "dtplan-gui");
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  return parse_gui_options(static_cast<int>(argv.size()), argv.data()).value().session;
}

std::string window_error(const Session& s) {
  MainWindow w(s);
  try {
    w.show_now(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

class TestGui : public QObject {
  Q_OBJECT

 private slots:
  void the_timeline_says_how_far_runs_like_it_were_from_dtplan() {
    // The default session (FSDP on A100s) falls in the band of data-parallel runs on Ampere
    // that dtplan accuracy --published wrote to data/error_bands.json.
    const auto a = analyse(Session{});
    QCOMPARE(a.band_group, std::string("data-parallel on ampere"));
    const auto bands = planner::load_error_bands(resolve_data_dir("") / "error_bands.json");
    const auto* band = planner::find_band(bands, a.band_group);
    QVERIFY(band != nullptr);
    QVERIFY(a.band.has_value());
    QCOMPARE(a.band->rows, band->rows);
    TimelineView view;
    view.show_analysis(a);
    QVERIFY(view.title().contains(
        QString("accuracy: on %1 published runs of data-parallel on ampere").arg(band->rows)));
  }

  void a_screenshot_drops_only_the_offscreen_platforms_notices() {
    // The two notices every headless render printed in a new-user trial, and nothing else:
    // a real warning, or the same text as a critical message, still reaches stderr.
    QVERIFY(is_headless_notice(QtWarningMsg, "This plugin does not support propagateSizeHints()"));
    QVERIFY(is_headless_notice(
        QtWarningMsg,
        "QStandardPaths: XDG_RUNTIME_DIR not set, defaulting to '/tmp/runtime-root'"));
    QVERIFY(
        !is_headless_notice(QtWarningMsg, "QPainter::begin: Paint device returned engine == 0"));
    QVERIFY(
        !is_headless_notice(QtCriticalMsg, "This plugin does not support propagateSizeHints()"));
    QVERIFY(!is_headless_notice(QtFatalMsg, "QStandardPaths: XDG_RUNTIME_DIR not set"));
  }

  void the_time_axis_ticks_at_round_values() {
    // A trial read ticks at 0.35, 0.69, 1.04 s (tenths of the step). They now fall on 1, 2 or 5
    // times a power of ten: the default session's 3.45 s step gets 0, 0.5, ..., 3 s.
    TimelineView view;
    view.show_analysis(analyse(Session{}));
    QStringList ticks;
    const QRegularExpression tick("^[0-9.]+ (s|ms)$");
    for (auto* item : view.scene()->items()) {
      if (auto* text = dynamic_cast<QGraphicsSimpleTextItem*>(item)) {
        if (tick.match(text->text()).hasMatch()) ticks << text->text();
      }
    }
    std::vector<double> values;
    for (const auto& t : ticks)
      values.push_back(t.section(' ', 0, 0).toDouble());
    std::sort(values.begin(), values.end());
    QVERIFY2(values.size() >= 3 && values.size() <= 11, qPrintable(ticks.join(", ")));
    const double step = values[1] - values[0];
    QCOMPARE(values[0], 0.0);
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
    QVERIFY2(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 ||
                 std::abs(mantissa - 5) < 1e-9,
             qPrintable(ticks.join(", ")));
    for (std::size_t i = 1; i < values.size(); ++i)
      QVERIFY(std::abs(values[i] - values[i - 1] - step) < 1e-9 * step + 1e-12);
  }

  void exposed_communication_marks_the_idle_compute_stream() {
    // A trial found the hatching of exposed communication faint. Each hatched segment now has
    // a dark red band of the same span under the compute lane; the layout session has exposed
    // work on every communication stream.
    TimelineView view;
    view.show_analysis(analyse(layout_session()));
    const QColor dark_red(139, 0, 0);
    double hatched = 0, bands = 0;
    int hatched_count = 0, band_count = 0;
    for (const auto* item : view.scene()->items()) {
      const auto* rect = dynamic_cast<const QGraphicsRectItem*>(item);
      if (!rect) continue;
      if (rect->brush().style() == Qt::BDiagPattern && rect->pen().color() == dark_red) {
        hatched += rect->rect().width();
        ++hatched_count;
      } else if (rect->brush().style() == Qt::SolidPattern && rect->brush().color() == dark_red) {
        bands += rect->rect().width();
        ++band_count;
        QCOMPARE(rect->rect().height(), 4.0);
      }
    }
    // The legend's swatch is hatched too, 14 wide, without a band.
    QVERIFY(band_count >= 8);
    QCOMPARE(hatched_count, band_count + 1);
    QVERIFY(std::abs(hatched - 14 - bands) < 1e-9);
  }

  void a_long_step_is_titled_in_seconds() {
    // 64 micro-batches of 8192 tokens of Llama 2 13B: a step of many seconds reads in s, as
    // the time axis beneath it does, and its parts in the same unit.
    auto s = layout_session();
    s.grad_accum = 64;
    s.global_batch = 512;
    const auto a = analyse(s);
    QVERIFY(a.layout.has_value());
    const auto& t = a.layout->time;
    QVERIFY(t.step_s >= 2.0);
    TimelineView view;
    view.show_analysis(a);
    const QString expected = QString("step %1 s = 64 micro-batches x %2 s + bubble %3")
                                 .arg(t.step_s, 0, 'f', 2)
                                 .arg(t.microbatch_s, 0, 'f', 3)
                                 .arg(t.bubble_s, 0, 'f', 2);
    QVERIFY2(view.title().contains(expected), qPrintable(view.title()));
    QVERIFY2(!view.title().section('\n', 1, 1).contains(" ms"), qPrintable(view.title()));
    // A short step (the default session at one micro-batch of 1) stays in milliseconds.
    Session one;
    one.micro_batch = 1;
    one.grad_accum = 1;
    const auto short_step = analyse(one);
    view.show_analysis(short_step);
    QVERIFY(short_step.step.times.step_s < 2.0);
    QVERIFY2(view.title().contains(
                 QString("step %1 ms").arg(short_step.step.times.step_s * 1e3, 0, 'f', 1)),
             qPrintable(view.title()));
  }

  void memory_bars_hold_the_memory_model() {
    const auto a = analyse(Session{});
    const auto data = resolve_data_dir("");
    const auto model = load_model("gpt2-xl", data / "models");
    const auto overheads = cost::load_overheads(data / "overheads.json");
    QCOMPARE(a.memory.size(), std::size_t{9});
    MemoryView view;
    view.show_analysis(a);
    for (std::size_t i = 0; i < a.memory.size(); ++i) {
      const auto direct =
          cost::estimate_memory(model, default_config(a.memory[i].strategy), overheads);
      QCOMPARE(a.memory[i].gpu.total().value, direct.gpu.total().value);
      QCOMPARE(a.memory[i].gpu.activations.value, direct.gpu.activations.value);
      QCOMPARE(view.drawn_gib().at("activations")[i],
               static_cast<double>(direct.gpu.activations.value) / 1073741824.0);
    }
    QCOMPARE(view.capacity_gib(), 80.0);  // A100-80GB: 81,920 MiB (docs/gpus.md)
  }

  void changing_an_input_updates_the_views() {
    Session s;
    MainWindow w(s);
    w.show_now(s);
    const auto before = w.analysis()->memory[4].gpu.activations.value;  // zero3
    QCOMPARE(w.analysis()->memory[4].strategy, Strategy::zero3);
    // The form drives a background recomputation, as a user's edit does.
    auto edited = w.inputs()->session();
    edited.micro_batch = 8;
    w.inputs()->set_session(edited);
    w.inputs()->on_change();
    w.wait_for_recompute();
    const auto after = w.analysis()->memory[4].gpu.activations.value;
    // Activations are per sample: half the micro-batch, half the bytes.
    QCOMPARE(static_cast<double>(after) * 2, static_cast<double>(before));
    QCOMPARE(w.analysis()->session.micro_batch, std::int64_t{8});
  }

  void topology_marks_the_socket_link_as_the_bottleneck() {
    // pcie-split-8: two PCIe switches under two sockets; the ring's limit is the 10 GB/s
    // socket link (README: dtplan comm --topology pcie-split-8).
    const auto a = analyse(Session{});
    int marked = 0;
    for (const auto& l : a.topology.links) {
      if (!l.bottleneck) continue;
      ++marked;
      const auto from = a.topology.devices[l.from].name, to = a.topology.devices[l.to].name;
      QVERIFY((from == "cpu0" && to == "cpu1") || (from == "cpu1" && to == "cpu0"));
      QCOMPARE(l.ring_hops, std::int64_t{2});  // the ring crosses it out and back
    }
    QCOMPARE(marked, 1);
    QCOMPARE(a.topology.ring.size(), std::size_t{8});
    QCOMPARE(a.topology.ring_bandwidth_Bps, 10e9);
    TopologyView view;
    view.show_analysis(a);
    QCOMPARE(view.drawn_links(), a.topology.links.size());
  }

  void topology_keeps_a_rack_of_72_gpus_apart() {
    // A GB200 NVL72 rack is one node of 72 GPUs, 36 CPUs and 72 NICs: the node widens so no
    // two devices of a row overlap (each is drawn 44 wide).
    Session s;
    s.model = "llama-3-8b";
    s.gpu = "GB200";
    s.topology = "gb200-nvl72";
    s.gpus = 72;
    s.strategy = "fsdp-full";
    s.global_batch = 72;
    s.seq_len = 2048;
    const auto a = analyse(s);
    TopologyView view;
    view.show_analysis(a);
    QCOMPARE(view.drawn_links(), a.topology.links.size());
    std::map<int, std::vector<double>> rows;
    for (const auto* item : view.scene()->items()) {
      if (const auto* e = dynamic_cast<const QGraphicsEllipseItem*>(item)) {
        rows[static_cast<int>(e->rect().y())].push_back(e->rect().x());
      }
    }
    std::size_t most = 0;
    for (auto& [y, xs] : rows) {
      std::sort(xs.begin(), xs.end());
      most = std::max(most, xs.size());
      for (std::size_t i = 1; i < xs.size(); ++i)
        QVERIFY2(xs[i] - xs[i - 1] >= 44.0, "two devices of a row overlap");
    }
    QCOMPARE(most, std::size_t{72});  // the GPU row (and the NIC row)
  }

  void timeline_draws_every_event_of_the_step() {
    const auto a = analyse(Session{});
    TimelineView view;
    view.show_analysis(a);
    QCOMPARE(view.drawn_events(), a.step.timeline.size());
    double end = 0;
    for (const auto& e : a.step.timeline)
      end = std::max(end, e.end_s);
    QVERIFY(std::abs(end - a.step.times.step_s) < 1e-9 * a.step.times.step_s);
    QVERIFY(!view.title().contains("does NOT fit"));  // fsdp-grad-op fits the A100-80GB
    // A session that does not fit says so over its timeline: DDP in fp32 needs the memory
    // model's figure, more than the GPU's 80 GiB.
    Session big;
    big.strategy = "ddp";
    big.precision = "fp32";
    const auto b = analyse(big);
    double ddp = 0;
    for (const auto& bar : b.memory) {
      if (bar.strategy == Strategy::ddp) ddp = static_cast<double>(bar.gpu.total().value);
    }
    QVERIFY(ddp > b.capacity_bytes);
    view.show_analysis(b);
    QVERIFY2(
        view.title().contains(
            QString("does NOT fit: %1 GiB per GPU of 80.00").arg(ddp / 1073741824.0, 0, 'f', 2)),
        qPrintable(view.title()));
  }

  void the_pareto_chart_holds_its_extreme_points_inside() {
    // The fastest and the largest points of the ranking sit at least a tenth inside the axes' ends,
    // so their markers are drawn whole (the default axes ended on them).
    const auto a = analyse(Session{});
    double top_gib = 0;
    double top_rate = 0;
    for (const auto* list : {&a.plan.ranked, &a.plan.pareto}) {
      for (const auto& c : *list) {
        top_gib = std::max(top_gib, static_cast<double>(c.memory().value) / 1073741824.0);
        top_rate = std::max(top_rate, c.samples_per_s());
      }
    }
    QVERIFY(top_gib > 0 && top_rate > 0);
    PlanView view;
    view.show_analysis(a);
    const auto axes = view.pareto_axes();
    QCOMPARE(axes.left(), 0.0);
    QCOMPARE(axes.top(), 0.0);
    // At least a tenth beyond (round ticks may add more), and not so far that the points
    // crowd into a corner.
    QVERIFY2(axes.right() >= 1.1 * top_gib && axes.right() <= 2.0 * top_gib,
             qPrintable(QString("%1 GiB axis for %2").arg(axes.right()).arg(top_gib)));
    QVERIFY2(axes.bottom() >= 1.1 * top_rate && axes.bottom() <= 2.0 * top_rate,
             qPrintable(QString("%1 samples/s axis for %2").arg(axes.bottom()).arg(top_rate)));
  }

  void plan_view_holds_the_planners_ranking() {
    const auto a = analyse(Session{});
    // The README's default example: fsdp-grad-op, micro-batch 16 x accumulation 4 x 8 GPUs.
    QVERIFY(a.plan.best() != nullptr);
    QVERIFY(a.plan.best()->data_parallel.has_value());
    QCOMPARE(a.plan.best()->data_parallel->strategy, Strategy::fsdp_grad_op);
    QCOMPARE(a.plan.best()->data_parallel->micro_batch, std::int64_t{16});
    QCOMPARE(a.plan.best()->data_parallel->grad_accum, std::int64_t{4});
    // The layouts are in the same ranking (50 entries here: top_k of the session's request).
    bool layouts_ranked = false;
    for (const auto& c : a.plan.ranked)
      layouts_ranked |= c.layout.has_value();
    QVERIFY(layouts_ranked);
    PlanView view;
    view.show_analysis(a);
    QCOMPARE(view.ranked_rows(), static_cast<int>(a.plan.ranked.size()));
    QVERIFY(view.rejected_rows() > 0);
    QVERIFY(view.rejected_rows() <= 500);
    // The counts add up as dtplan plan's do: searched = chosen + rejected among them, and the
    // combinations never priced are counted apart (the header once said more were rejected
    // than searched).
    const auto n = planner::counts_of(a.plan);
    QCOMPARE(n.evaluated, n.chosen + n.rejected_evaluated);
    const QString counts = QString(
                               "%1 configurations searched (%2 data-parallel, %3 layouts): "
                               "%4 chosen, %5 rejected")
                               .arg(n.evaluated)
                               .arg(n.data_parallel_evaluated)
                               .arg(n.layouts_evaluated)
                               .arg(n.chosen)
                               .arg(n.rejected_evaluated);
    QVERIFY2(view.summary_text().contains(counts), qPrintable(view.summary_text()));
    QCOMPARE(view.summary_text().contains("without evaluation"), n.not_evaluated > 0);
  }

  void plan_view_runs_the_sessions_framework_flags() {
    // A session saying how Megatron-LM runs (bf16 main gradients, overlapped buckets): the plan
    // view's Megatron-LM layouts run so, as dtplan plan's with the same flags.
    Session s;
    s.strategy = "megatron";
    s.layout.grad_reduce_in_bf16 = true;
    s.layout.overlap_grad_reduce = s.layout.overlap_param_gather = true;
    s.layout.ddp_bucket_size = 134217728;
    const auto a = analyse(s);
    int megatron = 0;
    for (const auto& c : a.plan.ranked) {
      if (!c.layout || c.layout->layout.framework != cost::Framework::megatron) continue;
      ++megatron;
      QVERIFY(c.layout->layout.grad_reduce_bf16);
      QVERIFY(c.layout->layout.overlap_grad_reduce);
      QVERIFY(c.layout->layout.overlap_param_gather);
      QCOMPARE(c.layout->layout.ddp_bucket_params, std::int64_t{134217728});
    }
    QVERIFY(megatron > 0);
  }

  void validation_labels_name_compute_and_recomputation() {
    // The H100 measurement's workload rewritten as a bf16 run of the causal blocks with
    // selective recomputation (the same shapes, with norms and learned positions).
    const auto dir = std::string(DTPLAN_DATA_DIR) + "/measurements/h100-sxm/";
    nlohmann::json j;
    std::ifstream(dir + "measurement.json") >> j;
    auto stack = cost::dense_stack_from_json(
        dtplan::ObjectReader::root(dtplan::parse_json(j["workload"].dump(), "workload")));
    stack.attention = cost::StackAttention::causal;
    stack.norm = cost::StackNorm::layernorm;
    stack.positions = cost::StackPositions::learned;
    stack.max_positions = stack.seq_len;
    stack.recompute = dtplan::Checkpointing::selective;
    stack.compute = cost::ElementType::bf16;
    j["workload"] = cost::to_json(stack);
    QTemporaryDir tmp;
    const auto file = (tmp.path() + "/bf16.json").toStdString();
    std::ofstream(file) << j.dump();
    Session s;
    s.measurements = {file};
    s.profile = dir + "profile-cuda-1rank.json";
    const auto a = analyse(s);
    QCOMPARE(a.validation.size(), std::size_t{1});
    QCOMPARE(a.validation[0].label, std::string("gpt2 ddp x1 cuda, bf16, selective recomputation"));
  }

  void validation_reads_measurements() {
    Session s;
    const auto dir = std::string(DTPLAN_DATA_DIR) + "/measurements/h100-sxm/";
    s.measurements = {dir + "measurement.json", dir + "no-such-file.json"};
    const auto a = analyse(s);
    QCOMPARE(a.validation.size(), std::size_t{1});
    // data/measurements/h100-sxm/README.md: 148.5 ms measured per step.
    QVERIFY(std::abs(a.validation[0].measured_step_s - 0.1485) < 0.0005);
    QCOMPARE(a.validation[0].predicted_peak_bytes, a.validation[0].measured_peak_bytes);
    QCOMPARE(a.problems.size(), std::size_t{1});
    QVERIFY(a.problems[0].find("no-such-file.json") != std::string::npos);
    QCOMPARE(a.validation[0].label, std::string("gpt2 ddp x1 cuda"));
    ValidationView view;
    view.show_analysis(a);
    QCOMPARE(view.rows(), 1);
  }

  void validation_labels_a_tensor_parallel_run() {
    // data/measurements/cpu-2ranks/README.md: GPT-2 over 1 data-parallel x 2 tensor-parallel
    // ranks, memory predicted to the byte.
    Session s;
    s.measurements = {std::string(DTPLAN_DATA_DIR) +
                      "/measurements/cpu-2ranks/measurement-tp2.json"};
    const auto a = analyse(s);
    QCOMPARE(a.validation.size(), std::size_t{1});
    QCOMPARE(a.validation[0].label, std::string("gpt2 zero1 x2 cpu (dp 1 x tp 2), bf16"));
    QCOMPARE(a.validation[0].predicted_peak_bytes, a.validation[0].measured_peak_bytes);
  }

  void validation_names_a_profile_from_other_hardware() {
    // The bundled CPU measurement against its own profile relabelled as another machine's:
    // the comparison is still drawn, and the difference is named beside it.
    const auto dir = std::string(DTPLAN_DATA_DIR);
    QFile in(QString::fromStdString(dir + "/profiles/cpu-2ranks.json"));
    QVERIFY(in.open(QIODevice::ReadOnly));
    auto text = in.readAll().toStdString();
    const std::string was = "cpu: AMD EPYC";
    const auto at = text.find(was);
    QVERIFY(at != std::string::npos);
    text.replace(at, was.size(), "cpu: Other CPU");
    QTemporaryDir tmp;
    const auto path = tmp.filePath("other.json").toStdString();
    QFile out(QString::fromStdString(path));
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write(text.c_str(), static_cast<qint64>(text.size()));
    out.close();
    Session s;
    s.measurements = {dir + "/measurements/cpu-2ranks/measurement.json"};
    s.profile = path;
    const auto a = analyse(s);
    QCOMPARE(a.validation.size(), std::size_t{1});
    QCOMPARE(a.problems.size(), std::size_t{1});
    QVERIFY(a.problems[0].find("the profile was measured on 'cpu: Other CPU") != std::string::npos);
    QVERIFY(a.problems[0].find("this run on 'cpu: AMD EPYC") != std::string::npos);
  }

  void every_view_renders_to_a_non_empty_png() {
    Session s;
    s.measurements = {std::string(DTPLAN_DATA_DIR) + "/measurements/h100-sxm/measurement.json"};
    render_every_view(s);
  }

  // Issue 14, item 14: two DGX A100 nodes, 16 GPUs, with DataParallel chosen. DataParallel
  // runs in one process on one node: its memory bar is marked not applicable, the timeline
  // (the session's own strategy) names the problem, and every view still renders.
  void a_multi_node_session_opens_with_dp_not_applicable() {
    Session s;
    s.topology = "dgx-a100";
    s.nodes = 2;
    s.gpus = 16;
    s.strategy = "dp";
    s.global_batch = 1024;
    const auto a = analyse(s);
    QCOMPARE(a.memory.size(), std::size_t{9});
    // The registry's order (cost::all_strategy_traits): dp first.
    QCOMPARE(a.memory[0].strategy, Strategy::dp);
    QVERIFY(a.memory[0].not_applicable.find("one node") != std::string::npos);
    QCOMPARE(a.memory[0].gpu.total().value, std::int64_t{0});
    for (std::size_t i = 0; i < a.memory.size(); ++i) {
      if (i == 0) continue;
      QVERIFY2(a.memory[i].not_applicable.empty(), a.memory[i].not_applicable.c_str());
      QVERIFY(a.memory[i].gpu.total().value > 0);
    }
    QCOMPARE(a.topology.ring.size(), std::size_t{16});
    QVERIFY(a.plan.best() != nullptr);
    QVERIFY(!a.plan.best()->data_parallel ||
            a.plan.best()->data_parallel->strategy != Strategy::dp);
    QCOMPARE(a.problems.size(), std::size_t{1});
    QVERIFY(a.problems[0].rfind("timeline: ", 0) == 0);
    MemoryView memory;
    memory.show_analysis(a);
    QCOMPARE(memory.categories().at(0), QString("dp (n/a)"));
    QCOMPARE(memory.categories().at(1), QString("ddp"));
    render_every_view(s);
    // The same cluster with a strategy that runs: no problem at all, a timeline.
    s.strategy = "fsdp-full";
    const auto b = analyse(s);
    QVERIFY(b.problems.empty());
    QVERIFY(!b.step.timeline.empty());
    QVERIFY(!b.memory[0].not_applicable.empty());
  }

  // Issue 15: the memory and timeline views show any layout, with a lane per stream.
  void a_layout_session_shows_its_memory_and_streams() {
    const auto s = layout_session();
    const auto a = analyse(s);
    QVERIFY(a.layout.has_value());
    QVERIFY(a.memory.empty());  // the data-parallel bars do not describe a layout
    // The same layout built through the library directly.
    const auto data = resolve_data_dir("");
    const auto model = load_model("llama-2-13b", data / "models");
    const auto table = InterconnectTable::load(data / "interconnect.json");
    const auto topo =
        Topology::build(load_node_template("dgx-h100", data / "topologies"), 2, table);
    TrainingConfig c;
    c.dp_size = 16;
    c.gpus_per_node = 8;
    c.micro_batch = 1;
    c.seq_len = 8192;
    c.checkpointing = Checkpointing::selective;
    c.precision = Precision::bf16;
    const auto l = planner::layout_of(s.layout, "megatron", model, c, 8);
    QCOMPARE(l.dp, std::int64_t{2});
    const auto overheads = cost::load_overheads(data / "overheads.json");
    const auto mem = cost::memory_3d(model, l, overheads);
    const auto time =
        cost::time_3d(model, l, topo, table, GpuCatalog::load(data / "gpus.json").find("H100-SXM"),
                      cost::load_compute_constants(data / "compute.json"));
    QCOMPARE(a.layout->memory.total().value, mem.total().value);
    QCOMPARE(a.layout->time.step_s, time.step_s);
    // One column per framework and sharding it offers: Megatron-LM without and with the
    // distributed optimizer, FSDP2 sharding gradients (reshard_after_forward=False) and
    // parameters.
    MemoryView memory;
    memory.show_analysis(a);
    QCOMPARE(memory.categories(),
             QStringList({"megatron, sharding none", "megatron, sharding optimizer",
                          "fsdp2, sharding gradients", "fsdp2, sharding parameters"}));
    QCOMPARE(memory.drawn_gib().at("activations")[1],
             static_cast<double>(mem.activations.value) / 1073741824.0);
    // The distributed optimizer divides the fp32 master weights and Adam moments by the dp x cp
    // ranks that hold the same weights: 2 x 2 = 4 (Megatron-LM docs, "Distributed Optimizer").
    const auto& none = a.layout->by_sharding[0].memory;
    const auto& sharded = a.layout->by_sharding[1].memory;
    QVERIFY(std::abs(static_cast<double>(none.optimizer_states.value) /
                         static_cast<double>(sharded.optimizer_states.value) -
                     4.0) < 1e-6);
    QCOMPARE(sharded.weights.value, none.weights.value);
    // A lane per stream, in the order the step uses them.
    TimelineView timeline;
    timeline.show_analysis(a);
    QCOMPARE(timeline.lanes(), QStringList({"compute", "tensor parallel", "context parallel",
                                            "pipeline", "data parallel"}));
    std::size_t drawable = 0;
    for (const auto& e : cost::timeline_3d(l, time))
      drawable += e.end_s > e.start_s ? 1 : 0;
    QCOMPARE(timeline.drawn_events(), drawable);
    render_every_view(s);
  }

  void layout_inputs_go_through_the_form_and_errors_name_its_labels() {
    auto s = layout_session();
    s.layout.schedule = "interleaved";
    s.layout.interleave = 5;  // 40 layers over 2 stages x 5 chunks
    s.layout.pp_layers = {20, 20};
    s.checkpointing = "selective";
    s.layout.recompute_modules = "core_attn,layernorm";
    s.gpus_per_node = 4;
    InputsPanel form;
    form.set_session(s);
    QCOMPARE(to_json(form.session()), to_json(s));
    // The framework set apart in a session file moves to the form's strategy.
    auto apart = s;
    apart.strategy = "ddp";
    apart.layout.framework = "fsdp2";
    form.set_session(apart);
    QCOMPARE(form.session().strategy, std::string("fsdp2"));
    QVERIFY(form.session().layout.framework.empty());
    // Errors name the form's inputs, not the library's fields or the CLI's flags.
    auto modules = layout_session();
    modules.checkpointing = "selective";
    modules.layout.recompute_modules = "core_attn,core_attn";
    const auto twice = window_error(modules);
    QVERIFY2(twice == "\"recompute modules\": 'core_attn,core_attn' names core_attn twice",
             twice.c_str());
    auto bad = layout_session();
    bad.strategy = "zero3";
    QCOMPARE(window_error(bad),
             std::string("\"strategy\": zero3 is a data-parallel strategy; \"tensor parallel\" "
                         "belongs to a layout (\"tensor parallel\", \"pipeline stages\", "
                         "\"context parallel\", ...), which runs under megatron or fsdp2"));
    // Megatron-LM's flags are refused in the GUI's words.
    auto no_recipe = layout_session();
    no_recipe.layout.fp8_param_gather = true;
    const auto recipe = window_error(no_recipe);
    QVERIFY2(recipe.find("dtplan-gui --fp8-param-gather needs an FP8 recipe (\"FP8 recipe "
                         "(dtplan-gui --fp8-recipe)\")") != std::string::npos,
             recipe.c_str());
    // A Megatron-LM flag alone is named as the GUI's command line takes it.
    bad.layout = {};
    bad.layout.overlap_grad_reduce = true;
    QVERIFY2(window_error(bad).find("dtplan-gui --overlap-grad-reduce belongs to a layout") !=
                 std::string::npos,
             window_error(bad).c_str());
    bad = layout_session();
    bad.layout.tp = 3;
    bad.layout.cp = 1;
    bad.layout.cp_comm = "p2p";
    bad.layout.pp = 1;
    QCOMPARE(window_error(bad), std::string("\"GPUs\": 16 is not divisible by \"tensor "
                                            "parallel\" x \"context parallel\" x \"pipeline "
                                            "stages\" = 3"));
    // A value no input offers (a session file, a flag) names its input.
    Session unknown;
    unknown.strategy = "zero9";
    QCOMPARE(window_error(unknown),
             std::string("\"strategy\": unknown strategy 'zero9' (did you mean: zero1, zero2, "
                         "zero3?); known: dp, ddp, zero1, zero2, zero3, fsdp-full, fsdp-grad-op, "
                         "fsdp-hybrid, fsdp-no-shard"));
    unknown = Session{};
    unknown.attention_kernel = "fa9";
    const auto kernel = window_error(unknown);
    QVERIFY2(kernel.rfind("\"attention kernel\": unknown attention kernel 'fa9'", 0) == 0,
             kernel.c_str());
    // Part of a node is whole hosts of a node of several: a DGX H100 is one host.
    bad = layout_session();
    bad.gpus_per_node = 4;
    const auto part = window_error(bad);
    QVERIFY2(part.find("\"GPUs per node\"") != std::string::npos &&
                 part.find("is one host of 8 GPUs") != std::string::npos,
             part.c_str());
  }

  void plan_notes_name_the_forms_inputs() {
    // Llama 2 70B on 8 x A100-80GB in one PCIe box: nothing fits, the planner suggests more
    // nodes, a smaller micro-batch, ... (dtplan plan prints the same with flags).
    Session s;
    s.model = "llama-2-70b";
    s.seq_len = 4096;
    const auto a = analyse(s);
    QVERIFY(a.plan.best() == nullptr);
    QVERIFY(!a.plan_notes.empty());
    PlanView view;
    view.show_analysis(a);
    const auto text = view.notes_text();
    QVERIFY2(!text.contains('{'), qPrintable(text));
    QVERIFY2(text.contains("(\"micro-batch\" 1)"), qPrintable(text));
    QVERIFY2(text.contains("(\"nodes\" 2)"), qPrintable(text));
    QCOMPARE(with_labels("{global_batch}"), std::string("\"global batch (plan)\""));
    // An export the GUI has no button for points at the command that writes it.
    QCOMPARE(with_labels("{export_torchtitan} writes the layout"),
             std::string("dtplan plan --export-torchtitan writes the layout"));
  }

  // dtplan-gui takes dtplan estimate's layout flags and --attention; layout flags alone make
  // the session a Megatron-LM layout (as estimate does), and given flags override a session
  // file's values.
  void layout_flags_on_the_command_line() {
    const auto s = parse({"--model", "llama-3.1-8b", "--tp", "2", "--cp", "8", "--cp-comm",
                          "all_gather", "--sp", "--pp", "2", "--pp-layers", "15,17", "--schedule",
                          "zb-h1", "--attention", "flash"});
    QCOMPARE(s.strategy, std::string("megatron"));
    QCOMPARE(s.layout.tp, std::int64_t{2});
    QCOMPARE(s.layout.cp, std::int64_t{8});
    QCOMPARE(s.layout.cp_comm, std::string("all_gather"));
    QVERIFY(s.layout.sequence_parallel);
    QCOMPARE(s.layout.pp_layers, (std::vector<std::int64_t>{15, 17}));
    QCOMPARE(s.layout.schedule, std::string("zb-h1"));
    const auto moe = parse({"--model", "mixtral-8x7b", "--ep", "8", "--etp", "1"});
    QCOMPARE(moe.strategy, std::string("megatron"));  // a layout flag makes it a layout
    QCOMPARE(moe.layout.ep, std::int64_t{8});
    QCOMPARE(moe.layout.etp, std::int64_t{1});
    const auto modules = parse({"--model", "mixtral-8x7b", "--checkpointing", "selective",
                                "--recompute-modules", "layernorm,moe_act"});
    QCOMPARE(modules.strategy, std::string("megatron"));  // a layout flag
    QCOMPARE(modules.layout.recompute_modules, std::string("layernorm,moe_act"));
    // --nodes alone takes every GPU of the nodes; --gpus still says how many.
    QCOMPARE(parse({"--topology", "dgx-h100", "--nodes", "16"}).gpus, std::int64_t{128});
    QCOMPARE(parse({"--topology", "dgx-h100", "--nodes", "16", "--gpus", "32"}).gpus,
             std::int64_t{32});
    QCOMPARE(parse({"--topology", "dgx-h100"}).gpus, std::int64_t{8});
    // 16 trays of each of 4 NVL72 racks: 64 GPUs a node, 256 in all.
    const auto racks =
        parse({"--topology", "gb200-nvl72", "--nodes", "4", "--gpus-per-node", "64"});
    QCOMPARE(racks.gpus, std::int64_t{256});
    QCOMPARE(racks.gpus_per_node, std::int64_t{64});
    const auto fsdp = parse({"--framework", "fsdp2", "--dp-shard", "8", "--sharding", "gradients"});
    QCOMPARE(fsdp.strategy, std::string("fsdp2"));
    QVERIFY(fsdp.layout.framework.empty());  // the form names it as the strategy
    QCOMPARE(fsdp.layout.dp_shard, std::int64_t{8});
    try {
      parse({"--framework", "foo", "--tp", "2"});
      QFAIL("an unknown framework must be refused");
    } catch (const Error& e) {
      QVERIFY(std::string(e.what()).find("--framework: unknown framework 'foo'") !=
              std::string::npos);
    }
    // No layout flag: the default data-parallel session, flash attention.
    const auto plain = parse({"--attention", "eager"});
    QCOMPARE(plain.strategy, Session{}.strategy);
    QCOMPARE(plain.attention, std::string("eager"));
    // A session file's layout, with --tp and --attention given on top.
    const auto path = QDir(QDir::tempPath()).filePath("dtplan-gui-flags.json").toStdString();
    save_session(layout_session(), path);
    const auto merged = parse({"--session", path, "--tp", "4", "--attention", "hf-eager"});
    QCOMPARE(merged.layout.tp, std::int64_t{4});
    QCOMPARE(merged.layout.cp, std::int64_t{2});  // the file's
    QCOMPARE(merged.layout.cp_comm, std::string("all_gather"));
    QCOMPARE(merged.attention, std::string("hf-eager"));
    QCOMPARE(merged.strategy, std::string("megatron"));
    // The attention kernel reaches the layout: context parallelism refuses eager attention.
    auto eager = layout_session();
    eager.attention = "eager";
    QVERIFY(window_error(eager).find("attention") != std::string::npos);
    // --attention-kernel as dtplan estimate's, over a session file's too.
    QCOMPARE(parse({"--attention-kernel", "cudnn"}).attention_kernel, std::string("cudnn"));
    QCOMPARE(merged.attention_kernel, std::string("framework"));
    QCOMPARE(parse({"--session", path, "--attention-kernel", "flash-attn-2"}).attention_kernel,
             std::string("flash-attn-2"));
  }

  // The fused kernel the session names sets the attention time of its step; a kernel without
  // a curve for the GPU, or one given with eager attention, is an error in the window.
  void attention_kernel_sets_the_attention_time() {
    Session s;
    s.gpu = "H100-SXM";
    s.topology = "dgx-h100";
    s.model = "gpt2-xl";
    s.strategy = "fsdp-full";
    s.micro_batch = 4;
    s.seq_len = 1024;
    const auto framework = analyse(s).step.compute.attention_s;
    s.attention_kernel = "cudnn";
    const auto cudnn = analyse(s).step.compute.attention_s;
    // dtplan estimate's test derives both by hand; here the ratio of the two curves at 1024
    // tokens and head dimension 64, with 4 us per call, must carry over.
    const double flops = 4.0 * 4 * 1024.0 * 1024 * 1600 / 2;
    auto by_hand = [&](double plateau, double half) {
      return 48 * 3.5 * (flops / (989.5e12 * plateau * 1024 / (1024 + half)) + 4e-6);
    };
    QVERIFY(std::abs(framework / by_hand(0.302, 1153) - 1) < 1e-9);
    QVERIFY(std::abs(cudnn / by_hand(0.475, 1309) - 1) < 1e-9);
    s.attention_kernel = "flash-attn-triton";
    const auto problems = analyse(s).problems;
    QVERIFY(std::any_of(problems.begin(), problems.end(), [](const std::string& p) {
      return p.find("flash-attn-triton has no measured curve for H100-SXM") != std::string::npos;
    }));
    s.attention_kernel = "cudnn";
    s.attention = "eager";
    QVERIFY(window_error(s).find("runs none") != std::string::npos);
  }

  // The PyTorch training-loop inputs (as dtplan estimate's --zero-grad, --optimizer-impl and
  // --layer-kernels) reach the memory bars: each bar is the memory model's figure with the same
  // inputs, and each input changes the figure it models.
  void training_loop_inputs_reach_the_memory_bars() {
    Session s;
    s.precision = "fp32";
    s.grad_accum = 1;
    const auto data = resolve_data_dir("");
    const auto model = load_model("gpt2-xl", data / "models");
    const auto overheads = cost::load_overheads(data / "overheads.json");
    auto config = [](Strategy st) {
      auto c = default_config(st);
      c.precision = Precision::fp32;
      c.grad_accum = 1;
      return c;
    };
    const auto ddp = [](const Analysis& a) {
      for (const auto& bar : a.memory) {
        if (bar.strategy == Strategy::ddp) return bar.gpu;
      }
      throw Error("no ddp bar");
    };
    const auto base = ddp(analyse(s)).total().value;
    QCOMPARE(base,
             cost::estimate_memory(model, config(Strategy::ddp), overheads).gpu.total().value);
    // zero_grad(set_to_none=False): every gradient is allocated when backward starts.
    s.zero_grad = "zeros";
    auto c = config(Strategy::ddp);
    c.zero_grad = ZeroGrad::zeros;
    const auto zeros = ddp(analyse(s)).total().value;
    QCOMPARE(zeros, cost::estimate_memory(model, c, overheads).gpu.total().value);
    QVERIFY(zeros > base);
    // Eager modules in fp32 keep the tensors each op saves (eager_layers), more than fused ones.
    s.zero_grad = "set-to-none";
    const auto fused = ddp(analyse(s)).activations.value;
    s.layer_kernels = "eager";
    c = config(Strategy::ddp);
    c.layer_kernels = LayerKernels::eager;
    const auto eager = ddp(analyse(s)).activations.value;
    QCOMPARE(eager, cost::estimate_memory(model, c, overheads).gpu.activations.value);
    QVERIFY(eager > fused);
    // A for-loop step holds one tensor's temporary at a time, not foreach's list.
    s.layer_kernels = "framework";
    s.optimizer_impl = "for-loop";
    c = config(Strategy::ddp);
    c.optimizer_impl = OptimizerImpl::for_loop;
    QCOMPARE(ddp(analyse(s)).total().value,
             cost::estimate_memory(model, c, overheads).gpu.total().value);
    // The flags set them, over a session file's too; a bad name is refused naming the flag.
    QCOMPARE(parse({"--zero-grad", "zeros"}).zero_grad, std::string("zeros"));
    QCOMPARE(parse({"--layer-kernels", "eager"}).layer_kernels, std::string("eager"));
    QCOMPARE(parse({"--optimizer-impl", "fused"}).optimizer_impl, std::string("fused"));
    s.zero_grad = "none";
    QVERIFY(window_error(s).find("none") != std::string::npos);
    // The flags' integers have the CLI's bounds, as a session file's do.
    for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
             {"--micro-batch", "-3"}, {"--grad-accum", "0"}, {"--nodes", "5000"}}) {
      try {
        parse({flag, value});
        QFAIL(("dtplan-gui " + flag + " " + value + " must be refused").c_str());
      } catch (const Error& e) {
        const std::string what = e.what();
        QVERIFY2(what.find(flag) != std::string::npos && what.find(value) != std::string::npos,
                 e.what());
      }
    }
    QCOMPARE(to_json(session_from_json(to_json(s), "test")), to_json(s));
  }

  void sessions_round_trip_and_bad_keys_are_named() {
    Session s;
    s.model = "llama-2-7b";
    s.micro_batch = 2;
    s.measurements = {"a.json"};
    QCOMPARE(to_json(session_from_json(to_json(s), "test")), to_json(s));
    const auto layout = layout_session();
    QCOMPARE(to_json(session_from_json(to_json(layout), "test")), to_json(layout));
    auto old = to_json(layout);
    old.erase("layout");  // a session saved before layouts: the data-parallel strategy alone
    QCOMPARE(session_from_json(old, "test").layout.tp, std::int64_t{1});
    // Expert parallelism round-trips; a layout saved before it has neither key: ep 1, etp tp.
    auto experts = layout;
    experts.layout.ep = 4;
    experts.layout.etp = 1;
    QCOMPARE(session_from_json(to_json(experts), "test").layout.ep, std::int64_t{4});
    QCOMPARE(session_from_json(to_json(experts), "test").layout.etp, std::int64_t{1});
    auto before = to_json(layout);
    before["layout"].erase("ep");
    before["layout"].erase("etp");
    QCOMPARE(session_from_json(before, "test").layout.ep, std::int64_t{1});
    QCOMPARE(session_from_json(before, "test").layout.etp, std::int64_t{0});
    auto typo = to_json(layout);
    typo["layout"]["tpp"] = 2;
    try {
      session_from_json(typo, "test");
      QFAIL("an unknown layout key must be refused");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("tpp") != std::string::npos, e.what());
    }
    auto j = to_json(s);
    j["micro_batchh"] = 3;
    try {
      session_from_json(j, "test");
      QFAIL("an unknown key must be refused");
    } catch (const Error& e) {
      QVERIFY(std::string(e.what()).find("micro_batchh") != std::string::npos);
    }
    // Issue 14, item 8: absurd numbers are refused with the field, its bounds and the value.
    for (const auto& [key, value, expected] :
         std::vector<std::tuple<std::string, std::int64_t, std::string>>{
             {"nodes", 100000, "/nodes: must be an integer from 1 to 4096, got 100000"},
             {"micro_batch", 0, "/micro_batch: must be an integer from 1 to 1000000, got 0"},
             {"global_batch", std::int64_t{1} << 62, "/global_batch: must be an integer from 1"},
             {"seq_len", -1, "/seq_len: must be an integer from 0 to 100000000, got -1"}}) {
      auto bad = to_json(s);
      bad[key] = value;
      try {
        session_from_json(bad, "test");
        QFAIL(("session " + key + " must be refused").c_str());
      } catch (const Error& e) {
        QVERIFY2(std::string(e.what()).find(expected) != std::string::npos, e.what());
      }
    }
    s.strategy = "zero4";
    try {
      analyse(s);
      QFAIL("an unknown strategy must be refused");
    } catch (const Error& e) {
      QVERIFY(std::string(e.what()).find("zero4") != std::string::npos);
    }
  }
};

QTEST_MAIN(TestGui)
#include "test_gui.moc"
