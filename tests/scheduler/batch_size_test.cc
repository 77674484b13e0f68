// InGo's batch-size choice (scheduler/batch/): hand-computed cases of the model, the joint choice
// against jobs choosing alone, the noise-scale refit and the hysteresis.
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

#include <gtest/gtest.h>

#include "core/generators.h"
#include "core/json.h"
#include "core/validation.h"
#include "scheduler/batch/batch_size.h"
#include "scheduler/batch/noise_scale.h"
#include "scheduler/planner.h"
#include "scheduler/routing/routing_algorithm.h"
#include "scheduler/sim/simulator.h"
#include "tests/fixtures/sample_jobs.h"
#include "tests/fixtures/sample_topologies.h"

namespace inac::scheduler {
namespace {

// One job on resource 0 with coefficient 1: per-worker batch choices, alpha 0 and beta ms per
// sample, G Gbit per iteration, S(B) = steps_min (1 + noise / (workers b)).
BatchJob Job(std::vector<int> choices, int submitted, double beta_ms, double gradient_gbit,
             double steps_min, double noise, int workers = 4) {
  BatchJob j;
  j.model.workers = workers;
  j.model.submitted = submitted;
  j.model.choices = std::move(choices);
  j.model.compute = ComputeModel{0, beta_ms};
  j.model.gradient_gbit = gradient_gbit;
  j.model.convergence = ConvergenceModel{steps_min, noise};
  j.flow.coefficients = {{0, 1.0}};
  return j;
}

TEST(BatchSizeTest, LargerBatchWinsWhenCommunicationDominates) {
  // 10 Gbit per iteration on a 10 Gbps link: 1000 ms of communication per step.
  // b = 16: B = 64, S = 1000 (1 + 256/64) = 5000, iteration 16 + 1000 ms -> 5,080,000 ms.
  // b = 64: B = 256, S = 2000, iteration 64 + 1000 ms -> 2,128,000 ms.
  BatchProblem p{{10.0}, {Job({16, 64}, 16, 1.0, 10.0, 1000, 256)}};
  const BatchChoice fixed = FixedBatchSizes(p);
  EXPECT_NEAR(fixed.objective_ms, 5080000, 1e-3);
  const BatchChoice c = ChooseBatchSizes(p);
  EXPECT_EQ(c.method, "exhaustive");
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_EQ(c.jobs[0].batch, 64);
  EXPECT_NEAR(c.jobs[0].rate_gbps, 10.0, 1e-9);
  EXPECT_NEAR(c.jobs[0].steps, 2000, 1e-9);
  EXPECT_NEAR(c.jobs[0].iteration_ms, 1064, 1e-6);
  EXPECT_NEAR(c.objective_ms, 2128000, 1e-3);
  EXPECT_EQ(IndependentBatchSizes(p).jobs[0].batch, 64);  // alone, the job finds it too
}

TEST(BatchSizeTest, SmallerBatchWinsWhenStepsExplode) {
  // 0.01 Gbit at 10 Gbps: 1 ms of communication; noise scale 64 (global).
  // b = 16: B = 64, S = 2000, iteration 17 ms -> 34,000 ms.
  // b = 256: B = 1024, S = 1062.5, iteration 257 ms -> 273,062.5 ms.
  BatchProblem p{{10.0}, {Job({16, 256}, 256, 1.0, 0.01, 1000, 64)}};
  EXPECT_NEAR(FixedBatchSizes(p).objective_ms, 273062.5, 1e-3);
  const BatchChoice c = ChooseBatchSizes(p);
  EXPECT_EQ(c.jobs[0].batch, 16);
  EXPECT_NEAR(c.jobs[0].steps, 2000, 1e-9);
  EXPECT_NEAR(c.objective_ms, 34000, 1e-3);
}

// Job A (1 worker, batch 1 or 9 at 1000 ms per sample, S = 100 (1 + 2/b)) shares a 10 Gbps link
// with job B (always communicating, 2000 steps); both send 10 Gbit per iteration. The link
// saturates where their mean loads sum to 10: 10/(t_A + 10/λ) + λ = 10, so λ = 5(√5 − 1) with
// t_A = 1 s and λ = (35 + √2125)/9 with t_A = 9 s.
//   A at 1: A 300 · (1000 + 10000/λ1), B 2000 · 10000/λ1  -> 785,410 + 3,236,068 ms
//   A at 9: A 122.2 · (9000 + 10000/λ9), B 2000 · 10000/λ9 -> 1,235,640 + 2,219,560 ms
// Alone, A prefers batch 1 (785,410 < 1,235,640); jointly batch 9 frees the link for B.
TEST(BatchSizeTest, JointChoiceBeatsJobsChoosingAlone) {
  BatchJob a = Job({1, 9}, 1, 1000.0, 10.0, 100, 2, /*workers=*/1);
  BatchJob b = Job({1}, 1, 0.0, 10.0, 2000, 0, /*workers=*/1);
  BatchProblem p{{10.0}, {a, b}};
  const double l1 = 5 * (std::sqrt(5.0) - 1);
  const double l9 = (35 + std::sqrt(2125.0)) / 9;
  const double a1 = 300 * (1000 + 10000 / l1), b1 = 2000 * 10000 / l1;
  const double a9 = 100 * (1 + 2.0 / 9) * (9000 + 10000 / l9), b9 = 2000 * 10000 / l9;
  ASSERT_LT(a1, a9);  // the premise: A alone prefers batch 1

  const BatchChoice alone = IndependentBatchSizes(p);
  EXPECT_EQ(alone.jobs[0].batch, 1);
  EXPECT_NEAR(alone.jobs[0].rate_gbps, l1, 1e-6);
  EXPECT_NEAR(alone.objective_ms, a1 + b1, 1.0);

  const BatchChoice joint = ChooseBatchSizes(p);
  EXPECT_EQ(joint.method, "exhaustive");
  EXPECT_EQ(joint.jobs[0].batch, 9);
  EXPECT_NEAR(joint.jobs[0].rate_gbps, l9, 1e-6);
  EXPECT_NEAR(joint.objective_ms, a9 + b9, 1.0);
  EXPECT_LT(joint.objective_ms, alone.objective_ms * 0.86);  // 3,455,200 against 4,021,478

  BatchOptions descent;
  descent.force_descent = true;
  const BatchChoice cd = ChooseBatchSizes(p, descent);
  EXPECT_EQ(cd.method, "coordinate_descent");
  EXPECT_EQ(cd.jobs[0].batch, 9);
  EXPECT_NEAR(cd.objective_ms, joint.objective_ms, 1e-6);
}

TEST(BatchSizeTest, WithoutChoicesNothingChanges) {
  core::JobSpec spec;
  spec.workers = {"h1", "h2", "h3", "h4"};
  spec.parameter_servers = {"ps"};
  spec.gradient_bytes = 1000;
  spec.compute_ms = 100;
  spec.iterations = 500;
  spec.batch_size = 32;
  auto m = BatchModelFromSpec(spec);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->choices, std::vector<int>{32});
  // Default noise scale: the submitted global batch (128), so S(128) = 2 S_min = iterations.
  EXPECT_DOUBLE_EQ(m->convergence.noise_scale, 128);
  EXPECT_DOUBLE_EQ(m->convergence.Steps(128), 500);
  EXPECT_DOUBLE_EQ(m->compute.Ms(32), 100);
  EXPECT_DOUBLE_EQ(m->compute.alpha_ms, 10);
  // A built-in model gives its noise scale; target_epochs and dataset_size give S_min.
  spec.model = "ResNet50";
  spec.batch_sizes = {64, 16, 32};
  spec.target_epochs = 90;
  spec.dataset_size = 1281167;
  m = BatchModelFromSpec(spec);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->choices, (std::vector<int>{16, 32, 64}));
  EXPECT_DOUBLE_EQ(m->convergence.noise_scale, 8192);
  // Samples at the submitted batch: S(128) · 128 = 90 epochs.
  EXPECT_NEAR(m->convergence.Steps(128) * 128, 90.0 * 1281167, 1e-3);
  spec.workers.clear();
  EXPECT_FALSE(BatchModelFromSpec(spec).ok());
}

// The spec's InGo fields: a batch_sizes range is expanded, the convergence inputs round-trip,
// bad values are problems with their field.
TEST(BatchSpecTest, RangeAndConvergenceFieldsParseValidateAndRoundTrip) {
  const core::Json json = core::Json::parse(R"({"name": "j", "workers": ["h1", "h2"],
      "parameter_servers": ["ps"], "gradient_bytes": 1000, "compute_ms": 5, "iterations": 10,
      "batch_size": 32, "batch_sizes": {"min": 16, "max": 64, "step": 16},
      "noise_scale": 512, "target_epochs": 3, "dataset_size": 50000})");
  std::vector<core::Problem> problems;
  const core::JobSpec spec = core::JobSpecFromJson(json, "", &problems);
  ASSERT_TRUE(problems.empty()) << problems[0].message;
  EXPECT_EQ(spec.batch_sizes, (std::vector<int>{16, 32, 48, 64}));
  EXPECT_EQ(spec.noise_scale, 512);
  EXPECT_EQ(spec.target_epochs, 3);
  EXPECT_EQ(spec.dataset_size, 50000);
  EXPECT_FALSE(spec.steps_min.has_value());
  EXPECT_TRUE(core::ValidateJobSpec(spec, nullptr, "").empty());
  const core::JobSpec again = core::JobSpecFromJson(core::JobSpecToJson(spec), "", &problems);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(again, spec);

  core::JobSpec bad = spec;
  bad.noise_scale = -1;
  bad.steps_min = 0;
  bad.dataset_size.reset();
  std::vector<std::string> fields;
  for (const core::Problem& p : core::ValidateJobSpec(bad, nullptr, "")) fields.push_back(p.path);
  EXPECT_EQ(fields, (std::vector<std::string>{"steps_min", "noise_scale", "dataset_size"}));
  core::Json range = json;
  range["batch_sizes"] = {{"min", 64}, {"max", 16}};
  problems.clear();
  core::JobSpecFromJson(range, "", &problems);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path, "batch_sizes");
  range["batch_sizes"] = {{"min", 1}, {"max", 100}};  // 100 values
  problems.clear();
  core::JobSpecFromJson(range, "", &problems);
  ASSERT_EQ(problems.size(), 1u);
}

TEST(NoiseScaleEstimatorTest, ExactStatisticsGiveTheNoiseScale) {
  // |G|^2 = 4, tr(S) = 400: B_noise = 100. Local batch 8, global 32.
  NoiseScaleEstimator e;
  EXPECT_FALSE(e.NoiseScale().has_value());
  ASSERT_TRUE(e.Add(4 + 400.0 / 8, 4 + 400.0 / 32, 8, 32));
  ASSERT_TRUE(e.NoiseScale().has_value());
  EXPECT_NEAR(*e.NoiseScale(), 100, 1e-9);
  EXPECT_NEAR(e.grad_sqr(), 4, 1e-9);
  EXPECT_NEAR(e.grad_var(), 400, 1e-9);
  // Unusable samples are refused.
  EXPECT_FALSE(e.Add(-1, 1, 8, 32));
  EXPECT_FALSE(e.Add(std::nan(""), 1, 8, 32));
  EXPECT_FALSE(e.Add(1, 1, 8, 8));
  EXPECT_EQ(e.samples(), 1);
}

TEST(NoiseScaleEstimatorTest, NoisyReportsConvergeToTheTrueValueAndTrackAChange) {
  // Each report is the expectation times a seeded factor 1 + N(0, 0.05) (independent for the
  // local and the global statistic): |G|^2 is a difference of the two, so single estimates are
  // far off (sd about 1.2 against |G|^2 = 1), while the smoothed ratio converges.
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 0.05);
  NoiseScaleEstimator e(0.998);  // a window of about 500 reports
  auto report = [&](double g2, double trs) {
    const double local = (g2 + trs / 8) * (1 + noise(rng));
    const double global = (g2 + trs / 32) * (1 + noise(rng));
    e.Add(std::max(0.0, local), std::max(0.0, global), 8, 32);
  };
  for (int i = 0; i < 3000; ++i) report(4, 400);  // B_noise 100
  ASSERT_TRUE(e.NoiseScale().has_value());
  EXPECT_NEAR(*e.NoiseScale(), 100, 10);
  for (int i = 0; i < 3000; ++i) report(1, 400);  // B_noise grows to 400 as training proceeds
  EXPECT_NEAR(*e.NoiseScale(), 400, 40);
}

TEST(BatchHysteresisTest, ShouldChangeBatchNeedsTheMarginAndTheInterval) {
  BatchSwitchRule rule;  // 5 %, 60 s
  EXPECT_TRUE(ShouldChangeBatch(rule, 100, 94, -1, 0));
  EXPECT_FALSE(ShouldChangeBatch(rule, 100, 95.5, -1, 0));
  EXPECT_FALSE(ShouldChangeBatch(rule, 100, 90, 1000, 30000));
  EXPECT_TRUE(ShouldChangeBatch(rule, 100, 90, 1000, 61000));
}

// One job whose preferred batch flips as the refitted noise scale oscillates around the value
// where batches 16 and 32 tie: without hysteresis the batch flaps at every report, with the
// default rule it changes at most once.
TEST(BatchHysteresisTest, NoFlappingAroundATie) {
  // Compute 1 ms per sample, 16 ms of communication per step, 4 workers. At B_noise = N:
  // C(16) = (1 + N/64) · 32, C(32) = (1 + N/128) · 48: equal at N = 128; 120 favours 16 and
  // 136 favours 32, each by about 1 %.
  auto problem = [](double noise) {
    return BatchProblem{{10.0}, {Job({16, 32}, 16, 1.0, 0.16, 1000, noise)}};
  };
  auto run = [&](const BatchSwitchRule& rule) {
    int batch = 16;
    int64_t last_change = -1;
    int changes = 0;
    for (int i = 0; i < 40; ++i) {
      const double noise = i % 2 == 0 ? 120 : 136;  // ±6.25 % around the tie
      const int64_t now = 10000 * static_cast<int64_t>(i);
      const BatchProblem p = problem(noise);
      const BatchChoice best = ChooseBatchSizes(p);
      const BatchUpdate u =
          ApplyBatchHysteresis(p, {batch}, {best.jobs[0].batch}, {last_change}, now, rule);
      if (u.changed[0]) {
        batch = u.batches[0];
        last_change = now;
        ++changes;
      }
    }
    return changes;
  };
  EXPECT_EQ(run(BatchSwitchRule{0.0, 0}), 40 - 1);  // flaps: every report but the first
  EXPECT_LE(run(BatchSwitchRule{}), 1);
  EXPECT_EQ(run(BatchSwitchRule{0.0, 60000}), 6);  // the interval alone: every 60 s
}

// The planner (`inac plan --algorithm ingo`, the controller): fat-tree k = 4, one job of 4 workers
// with 100 MB of gradients and 10 ms of compute at batch 32; noise scale 10^6, so
// S(B) = S_min (1 + 10^6 / B) falls almost in proportion to B: the largest batch (256) needs about
// 1/8 of the steps at 7.3 times the compute (1 + 9/32 · b ms), while communication (16 ms a step
// at 50 Gbps) stays: 256 wins.
class IngoPlannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = core::GenerateFatTree(4, {});
    ASSERT_TRUE(t.ok());
    topology_ = *t;
    core::Job job;
    job.id = 1;
    job.spec = fixtures::PsJobSpec("j", {"h0_0_0", "h0_1_0", "h1_0_0", "h1_1_0"}, {"h2_0_0"},
                                   {.compute_ms = 10, .iterations = 1000, .batch_size = 32});
    job.spec.batch_sizes = {32, 64, 128, 256};
    job.spec.noise_scale = 1e6;
    request_.topology = &topology_;
    request_.jobs = {job};
  }
  core::Topology topology_;
  PlanRequest request_;
};

TEST_F(IngoPlannerTest, ChoosesTheBatchAndReportsThePrediction) {
  request_.options.algorithm = "ingo";
  auto out = ComputePlan(request_);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->plan.algorithm, "ingo");
  ASSERT_EQ(out->plan.jobs.size(), 1u);
  EXPECT_EQ(out->plan.jobs[0].batch_size, 256);
  const JobReport& r = out->reports.at(1);
  ASSERT_TRUE(r.batch.has_value());
  EXPECT_EQ(r.batch->batch, 256);
  EXPECT_EQ(r.batch_fixed->batch, 32);
  EXPECT_EQ(r.batch_method, "exhaustive");
  // S(4 · 256) = 1000 (1 + 10^6/1024) / (1 + 10^6/128): 12.5 % of the steps at 32.
  EXPECT_NEAR(r.batch->steps, 1000 * (1 + 1e6 / 1024) / (1 + 1e6 / 128), 1e-6);
  EXPECT_NEAR(r.batch_fixed->steps, 1000, 1e-6);
  EXPECT_NEAR(r.batch->completion_ms, r.batch->steps * r.batch->iteration_ms, 1e-6);
  EXPECT_LT(r.batch->completion_ms, r.batch_fixed->completion_ms / 2);
  // iteration_ms = t(256) + comm: alpha 1 ms + 9/32 ms per sample.
  EXPECT_NEAR(out->plan.jobs[0].iteration_ms, 1 + 9.0 / 32 * 256 + out->plan.jobs[0].comm_ms, 1e-9);
}

TEST_F(IngoPlannerTest, AutomaticWithChoicesAndUnchangedWithout) {
  request_.options.algorithm = "grid";
  auto out = ComputePlan(request_);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->plan.jobs[0].batch_size, 256);  // several choices: chosen under grid too
  request_.jobs[0].spec.batch_sizes.clear();
  out = ComputePlan(request_);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->plan.jobs[0].batch_size, 32);
  EXPECT_FALSE(out->reports.at(1).batch.has_value());
}

TEST_F(IngoPlannerTest, ReplansRespectTheMinimumInterval) {
  request_.options.algorithm = "ingo";
  auto first = ComputePlan(request_);
  ASSERT_TRUE(first.ok());
  core::Plan previous = first->plan;
  previous.jobs[0].batch_size = 32;  // running at 32, changed 1 s ago
  request_.previous = &previous;
  request_.now_ms = 100000;
  request_.batch_changed_ms = {{1, 99000}};
  auto kept = ComputePlan(request_);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->plan.jobs[0].batch_size, 32);
  request_.batch_changed_ms = {{1, 30000}};  // 70 s ago: free to change
  auto moved = ComputePlan(request_);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->plan.jobs[0].batch_size, 256);
  // A job new to the plan is not held by the hysteresis of the running ones.
  core::Job second = request_.jobs[0];
  second.id = 2;
  second.spec.workers = {"h3_0_0", "h3_0_1", "h3_1_0", "h3_1_1"};
  second.spec.parameter_servers = {"h2_1_1"};
  request_.jobs.push_back(second);
  request_.batch_changed_ms = {{1, 99000}};
  auto added = ComputePlan(request_);
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(added->plan.jobs[0].batch_size, 32);   // held
  EXPECT_EQ(added->plan.jobs[1].batch_size, 256);  // new: its choice
}

// `inac sim --batch adaptive` against fixed: 4 jobs of 4 workers with 1 GB of gradients on a
// 10 Gbps star (communication dominates) and a noise scale far above their global batches: every
// job moves to the largest batch and the mean JCT falls. Without batch choices the adaptive run
// is the fixed run, event for event.
TEST(IngoSimulatorTest, AdaptiveBatchBeatsFixedWhenCommunicationDominates) {
  const core::Topology topology = fixtures::SingleSwitch(20000, 24, 10);
  std::vector<TraceJob> trace;
  for (int j = 0; j < 4; ++j) {
    TraceJob t;
    t.name = absl::StrCat("j", j);
    t.gradient_bytes = 1'000'000'000;
    t.compute_ms = 50;
    t.workers = 4;
    t.iterations = 100;
    t.batch_size = 32;
    t.noise_scale = 1e5;
    trace.push_back(t);
  }
  auto routing = MakeRoutingAlgorithm("atp");
  ASSERT_TRUE(routing.ok());
  SimOptions options;
  options.routing = routing->get();
  auto fixed = Simulate(topology, trace, options);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  options.adaptive_batch = true;
  auto same = Simulate(topology, trace, options);  // no batch_sizes: nothing to choose
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->summary.mean_jct_s, fixed->summary.mean_jct_s);
  for (TraceJob& t : trace) t.batch_sizes = {32, 64, 128};
  auto adaptive = Simulate(topology, trace, options);
  ASSERT_TRUE(adaptive.ok()) << adaptive.status();
  for (const SimJobResult& j : adaptive->jobs) {
    EXPECT_EQ(j.batch_size, 128) << j.name;
    EXPECT_GE(j.batch_changes, 1) << j.name;
  }
  // S(4 · 128) / S(4 · 32) = (1 + 1e5/512) / (1 + 1e5/128) = 0.25 (to 0.3 %), at a slightly longer
  // iteration: the JCT falls by well over half.
  EXPECT_LT(adaptive->summary.mean_jct_s, 0.5 * fixed->summary.mean_jct_s);
}

}  // namespace
}  // namespace inac::scheduler
