// dtplan-gui's Tools menu under QT_QPA_PLATFORM=offscreen: calibration and autotuning run
// through the runtime library (real mpirun and dtplan-run jobs, DTPLAN_RUN names the binary)
// under a progress dialog whose bar reaches the end; Cancel stops the job and writes nothing;
// a calibrated profile becomes the session's; errors come back as text naming the field.
#include <QProgressDialog>
#include <QPushButton>
#include <QTemporaryDir>
#include <QtTest/QtTest>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "dtplan/cost/hardware_profile.hpp"
#include "inputs_panel.hpp"
#include "main_window.hpp"
#include "workflows.hpp"

using namespace dtplan;
using namespace dtplan::gui;
using Status = WorkflowResult::Status;

namespace {

CalibrateChoice quick_calibration(const QString& out) {
  CalibrateChoice c;
  c.request.backend = "cpu";
  c.request.np = 1;
  c.request.quick = true;
  c.request.no_steps = true;
  c.out = out.toStdString();
  return c;
}

Session small_session() {
  Session s;
  s.model = "gpt2";
  s.gpu = "A100-80GB";
  s.topology = "pcie-split-8";
  s.gpus = 8;
  s.strategy = "ddp";
  s.precision = "fp32";
  s.seq_len = 64;
  return s;
}

}  // namespace

class TestGuiWorkflows : public QObject {
  Q_OBJECT
 private slots:
  void calibration_writes_the_profile_and_the_session_uses_it();
  void cancel_stops_the_calibration_and_writes_nothing();
  void bad_settings_come_back_naming_the_field();
  void autotune_measures_trials_and_logs_them();
  void progress_labels_count_steps_from_one();
};

void TestGuiWorkflows::calibration_writes_the_profile_and_the_session_uses_it() {
  QTemporaryDir dir;
  const auto out = dir.filePath("profile.json");
  MainWindow w(small_session());
  const auto c = quick_calibration(out);
  // Stages: GEMMs, element-wise rates, then one per communicator size (calibrate.hpp).
  const int stages = runtime::calibration_stages(c.request);
  int updates = 0, last_value = -1, maximum = 0;
  const auto r = w.calibrate(c, [&](QProgressDialog& d, const runtime::WorkProgress& p) {
    ++updates;
    QCOMPARE(p.total, static_cast<double>(stages));
    QVERIFY(d.value() >= last_value);  // the bar never goes back
    last_value = d.value();
    maximum = d.maximum();
  });
  QVERIFY2(r.status == Status::done, r.text.c_str());
  QVERIFY(updates >= stages);
  QCOMPARE(last_value, maximum);  // the bar ends full
  const auto profile = cost::load_profile(out.toStdString());
  QCOMPARE(profile.backend, std::string("cpu"));
  QVERIFY(!profile.gemm_samples.empty());
  QVERIFY(r.text.find("wrote " + out.toStdString()) != std::string::npos);
  QCOMPARE(w.inputs()->session().profile, out.toStdString());
}

void TestGuiWorkflows::cancel_stops_the_calibration_and_writes_nothing() {
  QTemporaryDir dir;
  const auto out = dir.filePath("profile.json");
  MainWindow w(small_session());
  auto c = quick_calibration(out);
  c.request.np = 2;  // through mpirun: the job in flight is stopped
  bool cancelled = false;
  const auto r = w.calibrate(c, [&](QProgressDialog& d, const runtime::WorkProgress&) {
    if (!cancelled) {
      cancelled = true;
      auto* button = d.findChild<QPushButton*>();
      QVERIFY(button != nullptr && button->text() == "Cancel");
      button->click();
    }
  });
  QVERIFY(cancelled);
  QVERIFY2(r.status == Status::cancelled, r.text.c_str());
  QVERIFY(!std::filesystem::exists(out.toStdString()));
  QVERIFY(w.inputs()->session().profile.empty());
}

void TestGuiWorkflows::bad_settings_come_back_naming_the_field() {
  QTemporaryDir dir;
  MainWindow w(small_session());
  auto c = quick_calibration(dir.filePath("p.json"));
  c.request.backend = "tpu";
  auto r = w.calibrate(c);
  QCOMPARE(static_cast<int>(r.status), static_cast<int>(Status::failed));
  QVERIFY2(r.text.find("\"backend\": tpu: expected cpu or cuda") != std::string::npos,
           r.text.c_str());
  c = quick_calibration(dir.path());  // a directory is no profile file
  r = w.calibrate(c);
  QCOMPARE(static_cast<int>(r.status), static_cast<int>(Status::failed));
  QVERIFY2(r.text.find("is a directory") != std::string::npos, r.text.c_str());
  AutotuneChoice a;
  a.results = "";
  r = w.autotune(a);
  QVERIFY2(r.text.find("\"results file\": name the file") != std::string::npos, r.text.c_str());
}

void TestGuiWorkflows::autotune_measures_trials_and_logs_them() {
  QTemporaryDir dir;
  MainWindow w(small_session());
  // No profile is bundled for one CPU rank: calibrate first, as a user would; autotune then
  // predicts with the session's new profile.
  const auto cal = w.calibrate(quick_calibration(dir.filePath("profile.json")));
  QVERIFY2(cal.status == Status::done, cal.text.c_str());
  AutotuneChoice a;
  a.np = 1;
  a.backend = "cpu";
  a.scale = 0.05;
  a.global_batch = 4;
  a.seq_len = 64;
  a.steps = 2;
  a.max_trials = 2;
  a.recompute = true;  // none, selective and full: the header records the search
  a.results = dir.filePath("trials.jsonl").toStdString();
  int updates = 0;
  const auto r = w.autotune(a, [&](QProgressDialog&, const runtime::WorkProgress&) { ++updates; });
  QVERIFY2(r.status == Status::done, r.text.c_str());
  QVERIFY(updates >= 2);  // one before each trial
  std::ifstream in(a.results);
  std::string line;
  int trials = 0;
  std::getline(in, line);
  const auto header = nlohmann::json::parse(line);
  QCOMPARE(header["type"].get<std::string>(), std::string("autotune"));
  QCOMPARE(header["checkpointing"].dump(), std::string(R"(["none","selective","full"])"));
  while (std::getline(in, line)) {
    const auto t = nlohmann::json::parse(line);
    QVERIFY(t.contains("key"));
    ++trials;
  }
  QCOMPARE(trials, 2);  // the header, then exactly max_trials trials
  QVERIFY2(r.text.find("fastest measured: ") == 0, r.text.c_str());
}

void TestGuiWorkflows::progress_labels_count_steps_from_one() {
  runtime::WorkProgress p;
  p.done = 0;
  p.total = 4;
  p.what = "GEMMs";
  QCOMPARE(progress_label(p), QString("step 1 of 4: GEMMs"));
  p.done = 2.5;
  p.eta_s = 11.6;
  QCOMPARE(progress_label(p), QString("step 3 of 4: GEMMs -- about 12 s left"));
  p.done = 4;
  p.eta_s = -1;
  p.what = "done";
  QCOMPARE(progress_label(p), QString("done"));
}

QTEST_MAIN(TestGuiWorkflows)
#include "test_gui_workflows.moc"
