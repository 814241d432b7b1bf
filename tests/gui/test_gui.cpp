// dtplan-gui under QT_QPA_PLATFORM=offscreen: the data behind each view holds the cost model's
// numbers (compared with direct library calls), changing an input updates them, and every
// view renders to a non-empty image.
#include <QBuffer>
#include <QImage>
#include <QTemporaryDir>
#include <QtTest/QtTest>
#include <map>
#include <tuple>
#include <vector>

#include "analysis.hpp"
#include "dtplan/cost/overheads.hpp"
#include "dtplan/model/data_dir.hpp"
#include "dtplan/model/error.hpp"
#include "gui_options.hpp"
#include "inputs_panel.hpp"
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

}  // namespace

class TestGui : public QObject {
  Q_OBJECT

 private slots:
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

  void timeline_draws_every_event_of_the_step() {
    const auto a = analyse(Session{});
    TimelineView view;
    view.show_analysis(a);
    QCOMPARE(view.drawn_events(), a.step.timeline.size());
    double end = 0;
    for (const auto& e : a.step.timeline)
      end = std::max(end, e.end_s);
    QVERIFY(std::abs(end - a.step.times.step_s) < 1e-9 * a.step.times.step_s);
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
    ValidationView view;
    view.show_analysis(a);
    QCOMPARE(view.rows(), 1);
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
    QCOMPARE(a.memory[1].strategy, Strategy::dp);
    QVERIFY(a.memory[1].not_applicable.find("one node") != std::string::npos);
    QCOMPARE(a.memory[1].gpu.total().value, std::int64_t{0});
    for (std::size_t i = 0; i < a.memory.size(); ++i) {
      if (i == 1) continue;
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
    QCOMPARE(memory.categories().at(1), QString("dp (n/a)"));
    QCOMPARE(memory.categories().at(0), QString("ddp"));
    render_every_view(s);
    // The same cluster with a strategy that runs: no problem at all, a timeline.
    s.strategy = "fsdp-full";
    const auto b = analyse(s);
    QVERIFY(b.problems.empty());
    QVERIFY(!b.step.timeline.empty());
    QVERIFY(!b.memory[1].not_applicable.empty());
  }

  void sessions_round_trip_and_bad_keys_are_named() {
    Session s;
    s.model = "llama-2-7b";
    s.micro_batch = 2;
    s.measurements = {"a.json"};
    QCOMPARE(to_json(session_from_json(to_json(s), "test")), to_json(s));
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
