#include "scheduler/batch/batch_size.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/models.h"

namespace inac::scheduler {
namespace {

constexpr double kRelImprovement = 1e-12;

struct NoiseDefault {
  std::string_view model;
  double noise_scale;
};
// docs/batch-size.md ("Defaults per built-in model") gives the source of each value.
constexpr NoiseDefault kNoiseDefaults[] = {
    {"AlexNet", 4096}, {"ResNet50", 8192}, {"ResNet101", 8192},   {"ResNet152", 8192},
    {"VGG16", 4096},   {"VGG19", 4096},    {"BERT-large", 32768}, {"GoogLeNet", 4096},
};

double MsPerGbit(double gbit, double rate_gbps) {
  if (gbit <= 0) return 0;
  if (rate_gbps <= 0) return std::numeric_limits<double>::infinity();
  if (std::isinf(rate_gbps)) return 0;
  return gbit / rate_gbps * 1000.0;
}

}  // namespace

double ConvergenceModel::Steps(double global_batch) const {
  if (global_batch <= 0) return std::numeric_limits<double>::infinity();
  return steps_min * (1 + noise_scale / global_batch);
}

std::optional<double> DefaultNoiseScale(std::string_view model) {
  const core::ModelProfile* profile = core::FindModel(model);
  if (profile == nullptr) return std::nullopt;
  for (const NoiseDefault& d : kNoiseDefaults) {
    if (d.model == profile->name) return d.noise_scale;
  }
  return std::nullopt;
}

absl::StatusOr<JobBatchModel> BatchModelFromSpec(const core::JobSpec& spec) {
  JobBatchModel m;
  m.workers = static_cast<int>(spec.workers.size());
  if (m.workers <= 0) return absl::InvalidArgumentError("batch model: job has no workers");
  if (spec.batch_size <= 0) {
    return absl::InvalidArgumentError("batch model: batch_size must be positive");
  }
  m.submitted = spec.batch_size;
  m.choices = spec.batch_sizes;
  m.choices.push_back(spec.batch_size);
  std::sort(m.choices.begin(), m.choices.end());
  m.choices.erase(std::unique(m.choices.begin(), m.choices.end()), m.choices.end());
  m.choices.erase(std::remove_if(m.choices.begin(), m.choices.end(), [](int b) { return b <= 0; }),
                  m.choices.end());
  const double compute = std::max(0.0, spec.compute_ms);
  m.compute.alpha_ms = kDefaultFixedComputeFraction * compute;
  m.compute.beta_ms = (compute - m.compute.alpha_ms) / spec.batch_size;
  m.gradient_gbit = static_cast<double>(std::max<int64_t>(0, spec.gradient_bytes)) * 8 / 1e9;
  const double submitted_global = static_cast<double>(m.workers) * spec.batch_size;
  double noise = submitted_global;
  if (spec.noise_scale) {
    noise = *spec.noise_scale;
  } else if (spec.model) {
    if (std::optional<double> d = DefaultNoiseScale(*spec.model)) noise = *d;
  }
  if (!std::isfinite(noise) || noise < 0) {
    return absl::InvalidArgumentError("batch model: noise_scale must be finite and >= 0");
  }
  m.convergence.noise_scale = noise;
  if (spec.steps_min) {
    m.convergence.steps_min = *spec.steps_min;
  } else if (spec.target_epochs && spec.dataset_size) {
    // Samples to the target at the submitted batch: E(B0) = E_min (1 + B0 / B_noise).
    const double samples = *spec.target_epochs * static_cast<double>(*spec.dataset_size);
    if (noise > 0) {
      const double e_min = samples / (1 + submitted_global / noise);
      m.convergence.steps_min = e_min / noise;
    } else {
      m.convergence.steps_min = samples / submitted_global;  // S(B) = S_min: data-parallel limit
    }
  } else {
    if (spec.iterations <= 0) {
      return absl::InvalidArgumentError(
          "batch model: iterations must be positive without steps_min or target_epochs");
    }
    m.convergence.steps_min = static_cast<double>(spec.iterations) / (1 + noise / submitted_global);
  }
  if (!std::isfinite(m.convergence.steps_min) || m.convergence.steps_min <= 0) {
    return absl::InvalidArgumentError("batch model: steps_min must be finite and positive");
  }
  return m;
}

absl::StatusOr<BatchProblem> BuildBatchProblem(const Network& network,
                                               const std::vector<RoutedJob>& routed,
                                               const std::vector<double>& remaining,
                                               const BatchBuildOptions& options) {
  if (!remaining.empty() && remaining.size() != routed.size()) {
    return absl::InvalidArgumentError("batch problem: one remaining fraction per routed job");
  }
  BatchProblem problem;
  problem.capacity = network.residuals();
  const core::Graph& g = network.graph();
  const core::Topology& topo = network.input().topology;
  std::map<int, int> memory_resource;  // switch node -> resource index
  for (size_t i = 0; i < routed.size(); ++i) {
    const RoutedJob& rj = routed[i];
    if (rj.job < 0 || rj.job >= static_cast<int>(network.input().jobs.size())) {
      return absl::InvalidArgumentError(absl::StrCat("batch problem: unknown job index ", rj.job));
    }
    const JobInput& in = network.input().jobs[rj.job];
    auto model = BatchModelFromSpec(in.spec);
    if (!model.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("job ", in.id, ": ", model.status().message()));
    }
    BatchJob job;
    job.model = std::move(*model);
    job.remaining = remaining.empty() ? 1.0 : std::clamp(remaining[i], 0.0, 1.0);
    const JobUsage usage = ComputeUsage(network, rj);
    std::map<int, double> coeff;
    for (const auto& [r, c] : usage.up) coeff[r] += c;
    for (const auto& [r, c] : usage.down) coeff[r] += c;
    job.flow.limit = usage.memory_limit_gbps;
    if (options.shared_memory) {
      // Stream share per aggregating switch: per PS the largest fraction aggregated there.
      std::map<int, std::map<int, double>> largest;  // switch -> ps -> fraction
      for (const RoutedFlow& f : rj.flows) {
        if (f.agg < 0 || f.agg == f.ps || !g.is_switch(f.agg)) continue;
        double& l = largest[f.agg][f.ps];
        l = std::max(l, f.fraction);
      }
      for (const auto& [sw, per_ps] : largest) {
        const int64_t pool = topo.switches[sw].ina.aggregators;
        const int bytes = topo.switches[sw].ina.aggregator_bytes;
        if (pool <= 0 || bytes <= 0) continue;
        double share = 0;
        for (const auto& [ps, frac] : per_ps) {
          double x = 1;
          for (const auto& [node, s] : rj.shares) {
            if (node == ps) x = s;
          }
          share += x * frac;
        }
        auto h = rj.hold_us.find(sw);
        const double hold_us = h != rj.hold_us.end() ? h->second : usage.rtt_us;
        // Aggregators held per Gbps of λ: chunks in flight = rate · hold / chunk bits.
        const double per_gbps = share * hold_us * 1e-6 * 1e9 / (8.0 * bytes);
        if (per_gbps <= 0) continue;
        auto [it, added] = memory_resource.emplace(sw, static_cast<int>(problem.capacity.size()));
        if (added) problem.capacity.push_back(static_cast<double>(pool));
        coeff[it->second] += per_gbps;
      }
    }
    for (const auto& [r, c] : coeff) {
      if (c > 1e-12) job.flow.coefficients.emplace_back(r, c);
    }
    problem.jobs.push_back(std::move(job));
  }
  return problem;
}

BatchChoice EvaluateBatches(const BatchProblem& problem, const std::vector<int>& batches) {
  const size_t n = problem.jobs.size();
  std::vector<OnOffJob> onoff(n);
  for (size_t j = 0; j < n; ++j) {
    const BatchJob& job = problem.jobs[j];
    onoff[j].flow = job.flow;
    onoff[j].gradient_gbit = job.model.gradient_gbit > 0 ? job.model.gradient_gbit : 1e-12;
    onoff[j].compute_s = job.model.compute.Ms(batches[j]) / 1000.0;
  }
  const OnOffShare share = OnOffFairRates(problem.capacity, onoff);
  BatchChoice out;
  out.method = "given";
  out.evaluations = 1;
  for (size_t j = 0; j < n; ++j) {
    const BatchJob& job = problem.jobs[j];
    JobBatchOutcome o;
    o.batch = batches[j];
    o.rate_gbps = share.rates[j];
    o.compute_ms = job.model.compute.Ms(batches[j]);
    o.comm_ms = MsPerGbit(job.model.gradient_gbit, o.rate_gbps);
    o.iteration_ms = o.compute_ms + o.comm_ms;
    o.active_fraction = o.iteration_ms > 0 ? o.comm_ms / o.iteration_ms : 0;
    o.steps = job.remaining *
              job.model.convergence.Steps(static_cast<double>(job.model.workers) * batches[j]);
    o.completion_ms = o.steps * o.iteration_ms;
    out.objective_ms += o.completion_ms;
    out.jobs.push_back(o);
  }
  return out;
}

namespace {

std::vector<int> Submitted(const BatchProblem& problem) {
  std::vector<int> b;
  for (const BatchJob& j : problem.jobs) b.push_back(j.model.submitted);
  return b;
}

bool Better(double a, double b) {
  if (!std::isfinite(b)) return a < b;
  return a < b - kRelImprovement * std::abs(b);
}

// Coordinate descent on the total objective from `start`: single-job moves until none improves,
// then (when one sweep of them costs at most `pair_budget` evaluations, at most `max_pair_sweeps`
// times) the best move of two jobs at once, and single moves again after a pair move improved.
BatchChoice Descend(const BatchProblem& problem, std::vector<int> batches, int max_passes,
                    int64_t pair_budget, int max_pair_sweeps, int64_t* evaluations) {
  BatchChoice best = EvaluateBatches(problem, batches);
  ++*evaluations;
  const size_t n = problem.jobs.size();
  int64_t pair_sweep = 0;
  for (size_t j = 0; j < n; ++j) {
    for (size_t k = j + 1; k < n; ++k) {
      pair_sweep += static_cast<int64_t>(problem.jobs[j].model.choices.size() - 1) *
                    static_cast<int64_t>(problem.jobs[k].model.choices.size() - 1);
    }
  }
  for (int pass = 0; pass < max_passes; ++pass) {
    bool moved = false;
    for (size_t j = 0; j < n; ++j) {
      const int keep = batches[j];
      int best_b = keep;
      for (int b : problem.jobs[j].model.choices) {
        if (b == keep) continue;
        batches[j] = b;
        BatchChoice c = EvaluateBatches(problem, batches);
        ++*evaluations;
        if (Better(c.objective_ms, best.objective_ms)) {
          best = std::move(c);
          best_b = b;
        }
      }
      batches[j] = best_b;
      if (best_b != keep) moved = true;
    }
    if (moved) continue;
    if (pair_sweep == 0 || pair_sweep > pair_budget || max_pair_sweeps-- <= 0) break;
    // Stuck for single moves: the best simultaneous move of two jobs (both change).
    std::vector<int> best_pair;
    for (size_t j = 0; j < n; ++j) {
      for (size_t k = j + 1; k < n; ++k) {
        const int keep_j = batches[j], keep_k = batches[k];
        for (int bj : problem.jobs[j].model.choices) {
          if (bj == keep_j) continue;
          for (int bk : problem.jobs[k].model.choices) {
            if (bk == keep_k) continue;
            batches[j] = bj;
            batches[k] = bk;
            BatchChoice c = EvaluateBatches(problem, batches);
            ++*evaluations;
            if (Better(c.objective_ms, best.objective_ms)) {
              best = std::move(c);
              best_pair = batches;
            }
          }
        }
        batches[j] = keep_j;
        batches[k] = keep_k;
      }
    }
    if (best_pair.empty()) break;
    batches = std::move(best_pair);
  }
  return best;
}

}  // namespace

BatchChoice FixedBatchSizes(const BatchProblem& problem) {
  BatchChoice c = EvaluateBatches(problem, Submitted(problem));
  c.method = "fixed";
  return c;
}

BatchChoice IndependentBatchSizes(const BatchProblem& problem) {
  const std::vector<int> submitted = Submitted(problem);
  std::vector<int> chosen = submitted;
  int64_t evaluations = 0;
  for (size_t j = 0; j < problem.jobs.size(); ++j) {
    std::vector<int> batches = submitted;
    double best = std::numeric_limits<double>::infinity();
    for (int b : problem.jobs[j].model.choices) {
      batches[j] = b;
      const BatchChoice c = EvaluateBatches(problem, batches);
      ++evaluations;
      if (Better(c.jobs[j].completion_ms, best)) {
        best = c.jobs[j].completion_ms;
        chosen[j] = b;
      }
    }
  }
  BatchChoice c = EvaluateBatches(problem, chosen);
  c.method = "independent";
  c.evaluations = evaluations + 1;
  return c;
}

BatchChoice ExhaustiveBatchSizes(const BatchProblem& problem) {
  const size_t n = problem.jobs.size();
  std::vector<size_t> index(n, 0);
  std::vector<int> batches(n);
  BatchChoice best;
  best.objective_ms = std::numeric_limits<double>::infinity();
  int64_t evaluations = 0;
  bool any = false;
  while (true) {
    for (size_t j = 0; j < n; ++j) batches[j] = problem.jobs[j].model.choices[index[j]];
    BatchChoice c = EvaluateBatches(problem, batches);
    ++evaluations;
    if (!any || Better(c.objective_ms, best.objective_ms)) {
      best = std::move(c);
      any = true;
    }
    size_t k = 0;
    while (k < n && ++index[k] == problem.jobs[k].model.choices.size()) index[k++] = 0;
    if (k == n) break;
  }
  best.method = "exhaustive";
  best.evaluations = evaluations;
  return best;
}

BatchChoice ChooseBatchSizes(const BatchProblem& problem, const BatchOptions& options) {
  if (problem.jobs.empty()) return BatchChoice{{}, 0, "exhaustive", 0};
  double product = 1;
  for (const BatchJob& j : problem.jobs) product *= static_cast<double>(j.model.choices.size());
  if (!options.force_descent && product <= static_cast<double>(options.exhaustive_budget)) {
    return ExhaustiveBatchSizes(problem);
  }
  int64_t evaluations = 0;
  BatchChoice independent = IndependentBatchSizes(problem);
  evaluations += independent.evaluations;
  std::vector<int> from_independent;
  for (const JobBatchOutcome& o : independent.jobs) from_independent.push_back(o.batch);
  std::vector<int> submitted_start = Submitted(problem);
  std::vector<int> smallest, largest;
  for (const BatchJob& j : problem.jobs) {
    smallest.push_back(j.model.choices.front());
    largest.push_back(j.model.choices.back());
  }
  // Four starts, in this order (ties keep the earlier): submitted, independent, every job at
  // its smallest and at its largest batch.
  BatchChoice best;
  bool first = true;
  for (std::vector<int>* start : {&submitted_start, &from_independent, &smallest, &largest}) {
    BatchChoice c = Descend(problem, *start, options.max_passes, options.pair_budget,
                            options.max_pair_sweeps, &evaluations);
    if (first || Better(c.objective_ms, best.objective_ms)) best = std::move(c);
    first = false;
  }
  best.method = "coordinate_descent";
  best.evaluations = evaluations;
  return best;
}

BatchUpdate ApplyBatchHysteresis(const BatchProblem& problem, const std::vector<int>& current,
                                 const std::vector<int>& chosen,
                                 const std::vector<int64_t>& last_change_ms, int64_t now_ms,
                                 const BatchSwitchRule& rule) {
  BatchUpdate out;
  out.batches = current;
  out.changed.assign(current.size(), false);
  out.current_ms = EvaluateBatches(problem, current).objective_ms;
  out.next_ms = out.current_ms;
  std::vector<int> next = current;
  bool any = false;
  for (size_t j = 0; j < current.size(); ++j) {
    if (chosen[j] == current[j]) continue;
    if (last_change_ms[j] >= 0 && now_ms - last_change_ms[j] < rule.min_interval_ms) continue;
    next[j] = chosen[j];
    any = true;
  }
  if (!any) return out;
  const double next_ms = EvaluateBatches(problem, next).objective_ms;
  if (!ShouldChangeBatch(rule, out.current_ms, next_ms, -1, now_ms)) return out;
  for (size_t j = 0; j < current.size(); ++j) out.changed[j] = next[j] != current[j];
  out.batches = std::move(next);
  out.next_ms = next_ms;
  return out;
}

}  // namespace inac::scheduler
