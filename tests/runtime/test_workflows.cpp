// Tests for the runtime's workflows as a library (calibrate.hpp, accuracy.hpp, autotune.hpp,
// interrupt.hpp, model/error.hpp's FieldError): requests are checked field by field before
// any process starts, errors name fields (the front ends render them), and a Cancel from
// another thread stops a workflow as Ctrl-C does.
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "dtplan/model/error.hpp"
#include "dtplan/model/model_desc.hpp"
#include "dtplan/runtime/accuracy.hpp"
#include "dtplan/runtime/autotune.hpp"
#include "dtplan/runtime/calibrate.hpp"
#include "dtplan/runtime/interrupt.hpp"
#include "dtplan/runtime/measurement.hpp"
#include "dtplan/runtime/trial_sets.hpp"
#include "tiny_stack.hpp"

using namespace dtplan;
using Catch::Matchers::Contains;

namespace {

// The field a FieldError names, or "" when `f` throws something else (or nothing).
template <typename F>
std::string field_of(F&& f) {
  try {
    f();
  } catch (const FieldError& e) {
    return e.field();
  } catch (...) {
    return "(another exception)";
  }
  return "";
}

std::string flag_style(const std::string& field) {
  return "--" + field;
}

cost::HardwareProfile bundled() {
  return cost::load_profile(std::filesystem::path(DTPLAN_DATA_DIR) / "profiles/cpu-2ranks.json");
}

}  // namespace

TEST_CASE("a FieldError names its field and renders every {field} the front end's way") {
  const FieldError e("global_batch", "9: not a multiple of {np} 2 ({np} ranks)");
  CHECK(e.field() == "global_batch");
  CHECK(std::string(e.what()) == "global_batch: 9: not a multiple of np 2 (np ranks)");
  CHECK(e.render(flag_style) == "--global_batch: 9: not a multiple of --np 2 (--np ranks)");
  // An unclosed brace is text, not a field.
  CHECK(FieldError("x", "a {b").render(flag_style) == "--x: a {b");
  // Suggestions and notes carry the same markers without being errors.
  CHECK(render_fields("less {headroom} or {nodes} 2", flag_style) ==
        "less --headroom or --nodes 2");
  CHECK(render_fields("no fields", flag_style) == "no fields");
}

TEST_CASE("calibrate requests are checked field by field before anything runs") {
  runtime::CalibrateRequest r;
  CHECK(field_of([&] { runtime::check_request(r); }).empty());
  r.backend = "tpu";
  CHECK(field_of([&] { runtime::check_request(r); }) == "backend");
  r.backend = "cpu";
  r.np = 0;
  CHECK(field_of([&] { runtime::check_request(r); }) == "np");
  r.np = 2;
  r.max_spread = -0.1;
  CHECK(field_of([&] { runtime::check_request(r); }) == "max_spread");
  // calibrate() checks first: no mpirun is started for a bad request.
  CHECK(field_of([&] { runtime::calibrate(r, [](const auto&) {}); }) == "max_spread");
}

TEST_CASE("calibration progress counts GEMMs, rates, each communicator size and each step") {
  runtime::CalibrateRequest r;
  r.no_steps = true;
  r.np = 8;  // GEMMs, rates, communicators of 2 and 4, and the full 8
  CHECK(runtime::calibration_stages(r) == 5);
  r.np = 1;  // GEMMs, rates, the full communicator (of one)
  CHECK(runtime::calibration_stages(r) == 3);
  r.no_steps = false;
  r.np = 2;
  CHECK(runtime::calibration_stages(r) ==
        3 + static_cast<int>(runtime::calibration_set("cpu").size()));
}

TEST_CASE("a noisy calibration does not replace a good profile but does replace a noisy one") {
  const auto dir = std::filesystem::temp_directory_path() / "dtplan-test-replaceable";
  std::filesystem::create_directories(dir);
  const auto path = dir / "profile.json";
  auto good = bundled();
  good.quality.reset();  // no quality section (profiles before 2026-11-27): counts as good
  std::ofstream(path) << cost::to_json(good).dump();
  auto fresh = good;
  fresh.quality = cost::ProfileQuality{};
  fresh.quality->noisy = false;
  CHECK_NOTHROW(runtime::check_replaceable(path, fresh, dir));
  fresh.quality->noisy = true;
  fresh.quality->reasons = {"repeats vary 30%"};
  try {
    runtime::check_replaceable(path, fresh, dir);
    FAIL("a noisy profile replaced a good one");
  } catch (const FieldError& e) {
    CHECK(e.field() == "out");
    CHECK_THAT(e.render(flag_style), Contains("Pass --force to replace it") &&
                                         Contains("this calibration is noisy (repeats vary 30%)"));
  }
  good.quality = fresh.quality;  // the old one noisy too: replaced
  std::ofstream(path) << cost::to_json(good).dump();
  CHECK_NOTHROW(runtime::check_replaceable(path, fresh, dir));
  std::filesystem::remove_all(dir);
}

TEST_CASE("accuracy refuses a backend the profile was not measured on, before running") {
  runtime::AccuracyRequest r;
  r.backend = "cuda";  // the bundled profile is cpu
  CHECK(field_of([&] { runtime::measure_accuracy(r, bundled(), [](const auto&) {}); }) ==
        "backend");
  r.backend.clear();
  r.steps = 0;
  CHECK(field_of([&] { runtime::measure_accuracy(r, bundled(), [](const auto&) {}); }) == "steps");
}

TEST_CASE("autotune requests: fields checked, the sequence resolved, the header as recorded") {
  runtime::AutotuneRequest r;
  r.model_name = "gpt2";
  r.model = load_model("gpt2", std::filesystem::path(DTPLAN_DATA_DIR) / "models");
  r.global_batch = 9;
  r.np = 2;
  try {
    (void)runtime::checked(r);
    FAIL("an uneven global batch was accepted");
  } catch (const FieldError& e) {
    CHECK(e.field() == "global_batch");
    CHECK(e.render(flag_style) ==
          "--global_batch: 9: not a multiple of --np 2 (every rank "
          "takes the same share)");
  }
  r.global_batch = 8;
  r.scale = 1.5;
  CHECK(field_of([&] { (void)runtime::checked(r); }) == "scale");
  r.scale = 0.05;
  r.strategies = {Strategy::ddp, Strategy::zero2};
  const auto ok = runtime::checked(r);
  CHECK(ok.seq_len == 1024);  // GPT-2's n_positions: "the model's maximum"
  const auto h = runtime::results_header(ok, "now");
  CHECK(h["strategies"] == nlohmann::json::array({"ddp", "zero2"}));
  CHECK(h["precision"] == "bf16");
  CHECK(h["seq_len"] == 1024);
  CHECK(h["created"] == "now");
  // Recomputation is recorded only when searched, so results files without it still resume.
  CHECK_FALSE(h.contains("checkpointing"));
  auto with = ok;
  with.checkpointings = {Checkpointing::none, Checkpointing::full};
  CHECK(runtime::results_header(with, "now")["checkpointing"] ==
        nlohmann::json::array({"none", "full"}));
}

TEST_CASE("request_interrupt from another thread stops a workflow as SIGINT does") {
  runtime::request_interrupt();  // outside a scope: nothing happens
  CHECK(runtime::interrupt_signal() == 0);
  const runtime::InterruptScope scope;
  std::thread([] { runtime::request_interrupt(); }).join();
  CHECK(runtime::interrupt_signal() == SIGINT);
  try {
    runtime::throw_if_interrupted();
    FAIL("no Interrupted");
  } catch (const runtime::Interrupted& e) {
    CHECK(e.exit_code() == 130);
  }
}

TEST_CASE("profile_summary names the attention fit's error where the profile has one") {
  cost::HardwareProfile p;
  p.created = "2026-11-29T00:00:00Z";
  p.gemm_rms_relative_error = 0.031;
  CHECK(runtime::profile_summary(p) == "created 2026-11-29T00:00:00Z, GEMM fit error 3.1%");
  p.attention = cost::AttentionFit{{1e-6, 0, 0}, {2e-6, 0, 0}, 0.08, {}};
  CHECK(runtime::profile_summary(p) ==
        "created 2026-11-29T00:00:00Z, GEMM fit error 3.1%, attention fit error 8.0%");
}

TEST_CASE("a profile without an attention fit is named as older than the causal workload") {
  auto p = bundled();
  p.attention.reset();  // as profiles calibrated before dtplan-run executed attention
  p.dropout_draw_s_per_element.reset();
  runtime::Measurement m;
  m.device = p.hardware.substr(0, p.hardware.find(", 2 ranks"));
  m.world_size = 2;
  m.workload = test::tiny_stack(false, true);  // causal, with norms
  const auto note = runtime::profile_mismatch(m, p);
  REQUIRE(note.has_value());
  CHECK_THAT(*note, Catch::Contains("predates the runtime's attention") &&
                        Catch::Contains("dtplan calibrate --np 2"));
  // The older value_only workload is what the profile was made for: no note.
  m.workload.attention = cost::StackAttention::value_only;
  CHECK_FALSE(runtime::profile_mismatch(m, p).has_value());
  // Nor once the profile has an attention fit.
  m.workload.attention = cost::StackAttention::causal;
  p.attention = cost::AttentionFit{};
  CHECK_FALSE(runtime::profile_mismatch(m, p).has_value());
  // A workload with dropout needs the timing of mask draws, which that profile lacks.
  m.workload.hidden_dropout = 0.1;
  const auto dropout = runtime::profile_mismatch(m, p);
  REQUIRE(dropout.has_value());
  CHECK_THAT(*dropout, Catch::Contains("predates the runtime's dropout"));
  p.dropout_draw_s_per_element = cost::RateCurve{{{1, 1e-9}}};
  CHECK_FALSE(runtime::profile_mismatch(m, p).has_value());
  // The bundled profile was calibrated over 2 ranks (its largest collective group); a run of 4
  // on the same 2 cores computes at other rates.
  m.world_size = 4;
  const auto ranks = runtime::profile_mismatch(m, p);
  REQUIRE(ranks.has_value());
  CHECK_THAT(*ranks, Catch::Contains("calibrated over 2 ranks and this run had 4") &&
                         Catch::Contains("dtplan calibrate --np 4"));
}
