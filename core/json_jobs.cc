// The job spec, job file and job codecs of core/json.h, and the all-reduce names.
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/json.h"
#include "core/json_fields.h"
#include "core/models.h"

namespace inac::core {

namespace {

using json_fields::Indexed;
using json_fields::ProblemsToStatus;
using json_fields::Reader;
using json_fields::TypeName;

}  // namespace

std::string_view AllReduceName(AllReduce mode) { return mode == AllReduce::kPs ? "ps" : "ring"; }

Json JobSpecToJson(const JobSpec& s) {
  Json j = {{"name", s.name},
            {"tenant", s.tenant},
            {"priority", s.priority},
            {"workers", s.workers},
            {"parameter_servers", s.parameter_servers},
            {"allreduce", std::string(AllReduceName(s.allreduce))},
            {"gradient_bytes", s.gradient_bytes},
            {"compute_ms", s.compute_ms},
            {"iterations", s.iterations},
            {"batch_size", s.batch_size}};
  if (!s.batch_sizes.empty()) j["batch_sizes"] = s.batch_sizes;
  if (s.model) j["model"] = *s.model;
  if (s.steps_min) j["steps_min"] = *s.steps_min;
  if (s.noise_scale) j["noise_scale"] = *s.noise_scale;
  if (s.target_epochs) j["target_epochs"] = *s.target_epochs;
  if (s.dataset_size) j["dataset_size"] = *s.dataset_size;
  return j;
}

namespace {

// "batch_sizes" of a job spec, read by `r` (the spec's reader at `path`): an array of integers,
// or a range {"min": m, "max": M, "step": k} (step defaults to min) expanded to its values.
void ReadBatchSizes(const Json& json, const std::string& path, Reader& r,
                    std::vector<Problem>* problems, std::vector<int>* out) {
  if (r.Has("batch_sizes") && json.at("batch_sizes").is_object()) {
    const Json* range = r.Object("batch_sizes", false);
    Reader rr(*range, r.At("batch_sizes"), problems);
    int64_t lo = 0, hi = 0, step = 0;
    const bool has_lo = rr.Int("min", &lo, true);
    const bool has_hi = rr.Int("max", &hi, true);
    if (!rr.Int("step", &step, false)) step = lo;
    if (has_lo && has_hi) {
      if (lo < 1 || hi < lo || step < 1 || hi > (1 << 20)) {
        rr.Add(r.At("batch_sizes"), "range needs 1 <= min <= max <= 2^20 and step >= 1");
      } else if ((hi - lo) / step + 1 > 64) {
        rr.Add(r.At("batch_sizes"), "range has more than 64 batch sizes");
      } else {
        for (int64_t b = lo; b <= hi; b += step) out->push_back(static_cast<int>(b));
      }
    }
  } else if (const Json* arr = r.Array("batch_sizes", false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      const Json& e = (*arr)[i];
      if (!e.is_number_integer()) {
        r.Add(Indexed(path, "batch_sizes", i),
              absl::StrCat("expected an integer, got ", TypeName(e)));
        continue;
      }
      int64_t v = e.get<int64_t>();
      if (v > std::numeric_limits<int>::max() || v < std::numeric_limits<int>::min()) {
        r.Add(Indexed(path, "batch_sizes", i), "integer out of range");
        continue;
      }
      out->push_back(static_cast<int>(v));
    }
  }
}

}  // namespace

JobSpec JobSpecFromJson(const Json& json, const std::string& path, std::vector<Problem>* problems) {
  JobSpec s;
  Reader r(json, path, problems);
  if (!r.ok()) return s;
  r.String("name", &s.name, true);
  r.String("tenant", &s.tenant, false);
  r.Int32("priority", &s.priority, false);
  r.StringArray("workers", &s.workers, true);
  r.StringArray("parameter_servers", &s.parameter_servers, false);
  std::string mode;
  if (r.String("allreduce", &mode, false)) {
    if (mode == "ps") {
      s.allreduce = AllReduce::kPs;
    } else if (mode == "ring") {
      s.allreduce = AllReduce::kRing;
    } else {
      r.Add(r.At("allreduce"),
            absl::StrCat("must be \"ps\" or \"ring\", got ", QuoteForMessage(mode)));
    }
  } else {
    s.allreduce = s.parameter_servers.empty() ? AllReduce::kRing : AllReduce::kPs;
  }
  const ModelProfile* model = nullptr;
  std::string model_name;
  if (r.String("model", &model_name, false)) {
    model = FindModel(model_name);
    if (model) {
      s.model = std::string(model->name);
    } else {
      std::vector<std::string> names;
      for (const ModelProfile& m : BuiltinModels()) names.emplace_back(m.name);
      r.Add(r.At("model"), absl::StrCat("unknown model ", QuoteForMessage(model_name),
                                        " (known: ", absl::StrJoin(names, ", "), ")"));
    }
  }
  bool has_model = !model_name.empty();
  if (!r.Int("gradient_bytes", &s.gradient_bytes, !has_model) && model) {
    if (!r.Has("gradient_bytes")) s.gradient_bytes = model->gradient_bytes;
  }
  if (!r.Number("compute_ms", &s.compute_ms, !has_model) && model) {
    if (!r.Has("compute_ms")) s.compute_ms = model->compute_ms;
  }
  r.Int("iterations", &s.iterations, true);
  r.Int32("batch_size", &s.batch_size, true);
  // InGo (docs/batch-size.md): the convergence inputs, then the batch sizes (ReadBatchSizes).
  r.OptNumber("steps_min", &s.steps_min);
  r.OptNumber("noise_scale", &s.noise_scale);
  r.OptNumber("target_epochs", &s.target_epochs);
  {
    int64_t dataset = 0;
    if (r.Int("dataset_size", &dataset, false)) s.dataset_size = dataset;
  }
  ReadBatchSizes(json, path, r, problems, &s.batch_sizes);
  return s;
}

std::optional<std::vector<JobSpec>> ParseJobsFile(std::string_view text, const Topology* topology,
                                                  std::vector<Problem>* problems) {
  size_t before = problems->size();
  auto json = ParseJsonText(text, problems);
  if (!json) return std::nullopt;
  std::vector<JobSpec> specs;
  std::vector<char> decoded;  // per job: no structural problem
  {
    Reader r(*json, "", problems);
    if (!r.ok()) return std::nullopt;
    const Json* arr = r.Array("jobs", true);
    if (arr && arr->size() > kMaxJobsPerFile) {
      r.Add("jobs", absl::StrCat("at most ", kMaxJobsPerFile, " jobs per file, got ", arr->size()));
      return std::nullopt;
    }
    if (arr) {
      if (arr->empty()) r.Add("jobs", "a job file needs at least one job");
      for (size_t i = 0; i < arr->size(); ++i) {
        const size_t at = problems->size();
        specs.push_back(JobSpecFromJson((*arr)[i], Indexed("", "jobs", i), problems));
        decoded.push_back(problems->size() == at);
      }
    }
  }
  // Whole-file problems stop here; otherwise the jobs that decoded are checked too, so one pass
  // reports both kinds (a job that failed to decode is not checked: it would only echo them).
  if (specs.empty() && problems->size() != before) return std::nullopt;
  std::set<std::string> names;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!decoded[i]) continue;
    std::string p = Indexed("", "jobs", i);
    auto more = ValidateJobSpec(specs[i], topology, p);
    problems->insert(problems->end(), more.begin(), more.end());
    if (!specs[i].name.empty() && !names.insert(specs[i].name).second) {
      problems->push_back(
          {p + ".name", absl::StrCat("duplicate job name \"", specs[i].name, "\"")});
    }
  }
  if (problems->size() != before) return std::nullopt;
  return specs;
}

Json JobsFileToJson(const std::vector<JobSpec>& specs) {
  Json arr = Json::array();
  for (const JobSpec& s : specs) arr.push_back(JobSpecToJson(s));
  return {{"jobs", arr}};
}

Json JobToJson(const Job& job) {
  Json j = {{"id", job.id},
            {"state", std::string(JobStateName(job.state))},
            {"spec", JobSpecToJson(job.spec)},
            {"iterations_done", job.iterations_done},
            {"created_ms", job.created_ms},
            {"updated_ms", job.updated_ms}};
  if (job.loss) j["loss"] = *job.loss;
  if (!job.failure_reason.empty()) j["failure_reason"] = job.failure_reason;
  return j;
}

absl::StatusOr<Job> JobFromJson(const Json& json) {
  std::vector<Problem> problems;
  Job job;
  {
    Reader r(json, "", &problems);
    if (r.ok()) {
      r.Int("id", &job.id, true);
      std::string state;
      if (r.String("state", &state, true)) {
        auto st = ParseJobState(state);
        if (st) {
          job.state = *st;
        } else {
          r.Add("state", absl::StrCat("unknown job state \"", state, "\""));
        }
      }
      if (const Json* spec = r.Object("spec", true))
        job.spec = JobSpecFromJson(*spec, "spec", &problems);
      r.Int("iterations_done", &job.iterations_done, false);
      r.OptNumber("loss", &job.loss);
      r.String("failure_reason", &job.failure_reason, false);
      r.Int("created_ms", &job.created_ms, false);
      r.Int("updated_ms", &job.updated_ms, false);
    }
  }
  if (!problems.empty()) return ProblemsToStatus("job", problems);
  return job;
}

}  // namespace inac::core
