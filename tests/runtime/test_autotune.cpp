// Tests for cli/src/autotune_search.cpp and autotune_log.cpp with a synthetic runner: the
// "machine" runs every step at known multiples of the uncorrected prediction (compute x1.3,
// collectives x2, optimizer x1), so the right answer is known for every candidate.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "dtplan/model/error.hpp"
#include "dtplan/runtime/autotune_log.hpp"
#include "dtplan/runtime/autotune_search.hpp"

using namespace dtplan;
using namespace dtplan::runtime;
using Catch::Matchers::Contains;

namespace {

cost::HardwareProfile flat_profile() {
  cost::HardwareProfile p;
  p.gemm_s_per_flop = 1e-10;
  p.gemm_s_per_call = 2e-6;
  for (auto* c : {&p.elementwise_s_per_byte, &p.softmax_s_per_element, &p.activation_s_per_element,
                  &p.activation_grad_s_per_element, &p.adam_s_per_param, &p.sgd_s_per_param}) {
    c->points = {{1, 1e-9}};
  }
  for (const char* k : {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"})
    p.collectives.push_back({k, 2, 3e-5, 1e-9, 0});
  return p;
}

const cost::StepCorrection kTruth{1.3, 2.0, 1.0, 0, 0};

cost::DenseStack stack() {
  cost::DenseStack s;
  s.vocab = 500;
  s.heads = s.kv_heads = 4;
  s.head_dim = 16;
  s.hidden = 64;
  s.ffn = 256;
  s.layers = 4;
  s.seq_len = 64;
  return s;
}

std::vector<TuneCandidate> candidates() {
  std::vector<TuneCandidate> out;
  const Strategy strategies[] = {Strategy::ddp, Strategy::zero3, Strategy::dp};
  for (auto st : strategies) {
    for (std::int64_t mb : {1, 2, 4, 8}) {
      TuneCandidate c;
      c.run = {stack(), st, Optimizer::adamw, 2, mb, 8 / mb, true, 1 << 16, {}};
      c.key = std::string(name_of(st)) + " mb " + std::to_string(mb);
      c.config.model = "synthetic";
      out.push_back(c);
    }
  }
  return out;
}

double true_step_s(const TuneCandidate& c) {
  auto p = flat_profile();
  p.correction = kTruth;
  return cost::predict_runtime_step(c.run, p).step_s;
}

TrialRecord synthetic_trial(const TuneCandidate& c) {
  const auto r = cost::predict_runtime_step(c.run, flat_profile()).parts;
  TrialRecord t;
  t.label = c.key;
  t.measured_s = true_step_s(c);
  t.sample = cost::step_sample(c.key, r, 1.3 * r.compute_s + 2.0 * r.collectives_s,
                               r.optimizer_s + 2.0 * r.optimizer_collectives_s);
  t.wall_s = 10;
  return t;
}

// The profile after calibration: three of the candidates measured as calibration steps.
cost::HardwareProfile calibrated() {
  auto p = flat_profile();
  const auto c = candidates();
  for (std::size_t i : {0u, 5u, 10u})
    p.step_samples.push_back(synthetic_trial(c[i]).sample);
  p.correction = cost::fit_step_correction(p.step_samples);
  return p;
}

struct Run {
  TuneOutcome outcome;
  std::vector<std::string> ran;
};

Run run_tune(const TuneSettings& s, const std::vector<TrialRecord>& previous = {}) {
  Run r;
  r.outcome = tune(
      candidates(), calibrated(), previous, s,
      [&](const TuneCandidate& c, double) {
        r.ran.push_back(c.key);
        return synthetic_trial(c);
      },
      [](const TrialRecord&) {}, [](const TuneProgress&) {});
  return r;
}

const TuneCandidate& fastest() {
  static const auto c = candidates();
  static const auto& best = *std::min_element(c.begin(), c.end(), [](const auto& a, const auto& b) {
    return true_step_s(a) < true_step_s(b);
  });
  return best;
}

}  // namespace

TEST_CASE("calibration recovers the synthetic machine's step correction") {
  const auto k = calibrated().correction;
  CHECK(k.compute_scale == Approx(1.3).epsilon(1e-6));
  CHECK(k.collective_scale == Approx(2.0).epsilon(1e-6));
  CHECK(k.optimizer_scale == Approx(1.0).epsilon(1e-6));
}

TEST_CASE("model-based tuning finds the best with fewer trials than the grid, and stops soundly") {
  const auto r = run_tune({});
  REQUIRE(r.outcome.trials.size() == r.ran.size());
  CHECK(r.ran.size() < candidates().size());
  const auto* best = best_trial(r.outcome.trials);
  REQUIRE(best);
  CHECK(best->key == fastest().key);
  CHECK(r.outcome.stop_reason ==
        "no untried candidate can beat the measured best by the model's "
        "error band");
  // What the stop promises: nothing untried is faster than the best by more than the band.
  for (const auto& c : candidates()) {
    if (std::find(r.ran.begin(), r.ran.end(), c.key) == r.ran.end())
      CHECK(true_step_s(c) * (1 - r.outcome.band) >= *best->measured_s * (1 - 1e-12));
  }
  // Predictions were exact (the calibration found the truth): errors are zero.
  for (const auto& t : r.outcome.trials)
    CHECK(t.error() == Approx(0).margin(1e-9));
}

TEST_CASE("exhaustive tuning tries every candidate, --max-trials and --time-budget stop it") {
  TuneSettings all;
  all.exhaustive = true;
  CHECK(run_tune(all).ran.size() == candidates().size());
  TuneSettings two = all;
  two.max_trials = 2;
  const auto r = run_tune(two);
  CHECK(r.ran.size() == 2);
  CHECK_THAT(r.outcome.stop_reason, Contains("--max-trials 2"));
  TuneSettings budget = all;
  budget.time_budget_s = 25;  // trials take 10 s each: the third would end at 30 s
  const auto b = run_tune(budget);
  CHECK(b.ran.size() == 2);
  CHECK_THAT(b.outcome.stop_reason, Contains("--time-budget"));
}

TEST_CASE("resumed trials are not run again and count toward the result") {
  TuneSettings all;
  all.exhaustive = true;
  all.max_trials = 5;
  auto first = synthetic_trial(candidates()[3]);
  first.key = candidates()[3].key;
  auto second = synthetic_trial(candidates()[7]);
  second.key = candidates()[7].key;
  TrialRecord interrupted;
  interrupted.key = candidates()[9].key;
  interrupted.failure = "dtplan-run failed (exit 1)";
  const auto r = run_tune(all, {first, second, interrupted});
  // 5 in all: 2 measured and 1 failed before (it counts, and may run again) leave 2.
  CHECK(r.ran.size() == 2);
  CHECK(std::count(r.ran.begin(), r.ran.end(), first.key) == 0);
  CHECK(std::count(r.ran.begin(), r.ran.end(), second.key) == 0);
  CHECK(r.outcome.trials.size() == 4);  // the failed one is not among the measured
}

TEST_CASE("results file: header, appended trials, resume, mismatch and a cut-off line") {
  const auto path = std::filesystem::temp_directory_path() / "dtplan-test-autotune.jsonl";
  std::filesystem::remove(path);
  const nlohmann::json header{{"model", "gpt2"}, {"np", 2}, {"created", "now"}};
  auto a = synthetic_trial(candidates()[1]);
  a.key = "ddp mb 2";
  TrialRecord failed;
  failed.key = "dp mb 8";
  failed.label = "dp";
  failed.failure = "out of memory on cpu";
  {
    ResultsFile f(path, header, false);
    CHECK(f.previous().empty());
    f.append(a);
    f.append(failed);
  }
  // The library names its fields; the CLI renders {resume} as --resume (test_workflows).
  CHECK_THROWS_WITH(ResultsFile(path, header, false), Contains("exists: pass resume to continue"));
  {
    // "created" may differ: it is when the first run started.
    ResultsFile f(path, {{"model", "gpt2"}, {"np", 2}, {"created", "later"}}, true);
    REQUIRE(f.previous().size() == 2);
    CHECK(f.previous()[0].key == "ddp mb 2");
    CHECK(*f.previous()[0].measured_s == Approx(*a.measured_s));
    CHECK(f.previous()[0].sample.compute_s == Approx(a.sample.compute_s));
    CHECK(f.previous()[1].failure == "out of memory on cpu");
  }
  CHECK_THROWS_WITH(ResultsFile(path, {{"model", "gpt2"}, {"np", 4}}, true),
                    Contains("\"np\" is 2, this run's 4"));
  // An interrupted write leaves half a line: it is cut off and that trial runs again.
  // The user is told which line and how much of it was dropped.
  const auto size = std::filesystem::file_size(path);
  const std::string half = "{\"type\":\"trial\",\"key\":\"zer";  // 26 bytes
  std::ofstream(path, std::ios::app) << half;
  {
    ResultsFile f(path, header, true);
    CHECK(f.previous().size() == 2);
    CHECK_THAT(f.repair_note(), Contains("dtplan-test-autotune.jsonl:4: dropped 26 bytes of a "
                                         "half-written trial line"));
  }
  CHECK(std::filesystem::file_size(path) == size);
  // A complete line with a key missing is an error naming the key, not a cut-off line.
  std::ofstream(path, std::ios::app)
      << "{\"type\":\"trial\",\"key\":\"x\",\"predicted_step_s\":1,\"wall_s\":1,"
         "\"failure\":\"f\"}\n"
      << trial_json(a).dump() << "\n";
  CHECK_THROWS_WITH(ResultsFile(path, header, true), Contains("label"));
  std::filesystem::remove(path);
}

TEST_CASE("results file: a trial measured twice (two tuners at once) is refused on resume") {
  const auto path = std::filesystem::temp_directory_path() / "dtplan-test-autotune-twice.jsonl";
  std::filesystem::remove(path);
  const nlohmann::json header{{"model", "gpt2"}, {"np", 2}, {"created", "now"}};
  auto a = synthetic_trial(candidates()[1]);
  a.key = "ddp mb 2";
  TrialRecord failed;
  failed.key = a.key;
  failed.label = "ddp";
  failed.failure = "timeout";
  {
    // Failed, then measured on resume: legitimate (a failed trial runs again).
    ResultsFile f(path, header, false);
    f.append(failed);
    f.append(a);
  }
  CHECK(ResultsFile(path, header, true).previous().size() == 2);
  std::ofstream(path, std::ios::app) << trial_json(a).dump() << "\n";
  CHECK_THROWS_WITH(ResultsFile(path, header, true),
                    Contains("dtplan-test-autotune-twice.jsonl:4: trial \"ddp mb 2\" was already "
                             "measured on line 3"));
  std::filesystem::remove(path);
}

TEST_CASE("results file: a trial line with an absurd number is refused, naming the field") {
  // Issue 14, item 8: a measured step of -1 s or 1e308 s used to be accepted on resume.
  const auto path = std::filesystem::temp_directory_path() / "dtplan-test-autotune-absurd.jsonl";
  const nlohmann::json header{{"model", "gpt2"}, {"np", 2}, {"created", "now"}};
  for (const double bad : {-1.0, 1e308}) {
    std::filesystem::remove(path);
    { ResultsFile(path, header, false); }
    auto j = trial_json(synthetic_trial(candidates()[1]));
    j["measured_step_s"] = bad;
    std::ofstream(path, std::ios::app) << j.dump() << "\n";
    CHECK_THROWS_WITH(
        ResultsFile(path, header, true),
        Contains("dtplan-test-autotune-absurd.jsonl:2") && Contains("/measured_step_s"));
  }
  std::filesystem::remove(path);
}

TEST_CASE("results file: a second tuner on a file in use is refused with the holder's pid") {
  const auto path = std::filesystem::temp_directory_path() / "dtplan-test-autotune-lock.jsonl";
  std::filesystem::remove(path);
  const nlohmann::json header{{"model", "gpt2"}, {"np", 2}, {"created", "now"}};
  // The holder is another process: POSIX record locks never conflict within one process.
  int ready[2], release[2];
  REQUIRE(pipe(ready) == 0);
  REQUIRE(pipe(release) == 0);
  const pid_t holder = fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    char c = 'r';
    try {
      ResultsFile f(path, header, false);
      if (write(ready[1], &c, 1) != 1 || read(release[0], &c, 1) != 1) _exit(2);
    } catch (...) {
      _exit(1);
    }
    _exit(0);
  }
  char c = 0;
  REQUIRE(read(ready[0], &c, 1) == 1);
  CHECK_THROWS_WITH(
      ResultsFile(path, header, true),
      Contains("dtplan-test-autotune-lock.jsonl: in use by process " + std::to_string(holder)));
  REQUIRE(write(release[1], &c, 1) == 1);
  int status = 0;
  REQUIRE(waitpid(holder, &status, 0) == holder);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  for (int fd : {ready[0], ready[1], release[0], release[1]})
    close(fd);
  // The lock goes with its holder: now the file resumes.
  CHECK(ResultsFile(path, header, true).previous().empty());
  std::filesystem::remove(path);
}
