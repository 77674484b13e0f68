#include "scheduler/sim/trace.h"

#include <cmath>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "core/models.h"

namespace inac::scheduler {
namespace {

using core::Problem;

constexpr const char* kColumns[] = {"name",       "arrival_s", "model",      "gradient_bytes",
                                    "compute_ms", "workers",   "hosts",      "parameter_servers",
                                    "iterations", "priority",  "batch_size", "batch_sizes",
                                    "noise_scale"};

std::string JobPath(size_t i, absl::string_view field) {
  return absl::StrCat("jobs[", i, "]", field.empty() ? "" : ".", field);
}

std::vector<std::string> SplitHosts(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(text, absl::ByAnyChar("; "), absl::SkipEmpty())) {
    out.emplace_back(part);
  }
  return out;
}

// Model defaults and semantic checks of one parsed job.
void Finish(size_t i, const std::string& where, TraceJob* job, std::vector<Problem>* problems) {
  auto report = [&](absl::string_view field, std::string message) {
    problems->push_back({JobPath(i, field), where + message});
  };
  if (!job->model.empty()) {
    const core::ModelProfile* m = core::FindModel(job->model);
    if (m == nullptr) {
      report("model", absl::StrCat("unknown model \"", job->model, "\""));
    } else {
      job->model = std::string(m->name);
      if (job->gradient_bytes == 0) job->gradient_bytes = m->gradient_bytes;
      if (job->compute_ms < 0) job->compute_ms = m->compute_ms;
    }
  }
  if (!std::isfinite(job->arrival_s) || job->arrival_s < 0) {
    report("arrival_s", "must be a finite number >= 0");
  }
  if (job->gradient_bytes <= 0) report("gradient_bytes", "must be > 0 (or give a model)");
  if (!std::isfinite(job->compute_ms) || job->compute_ms < 0) {
    report("compute_ms", "must be >= 0 (or give a model)");
  }
  if (!job->hosts.empty()) {
    if (job->workers != 0 && job->workers != static_cast<int>(job->hosts.size())) {
      report("workers", "disagrees with the number of hosts");
    }
    job->workers = static_cast<int>(job->hosts.size());
  }
  if (job->workers < 1) report("workers", "must be >= 1 (or list hosts)");
  if (job->iterations < 1) report("iterations", "must be >= 1");
  if (job->batch_size < 0 || job->batch_size > (1 << 20)) {
    report("batch_size", "must be in [0, 2^20] (0: no batch-size adjustment)");
  }
  for (int b : job->batch_sizes) {
    if (b < 1 || b > (1 << 20)) report("batch_sizes", "every batch size must be in [1, 2^20]");
  }
  if (!job->batch_sizes.empty() && job->batch_size == 0) {
    report("batch_size", "required with batch_sizes");
  }
  if (!std::isfinite(job->noise_scale)) report("noise_scale", "must be finite");
  if (job->name.empty()) job->name = absl::StrFormat("job-%04d", i + 1);
}

bool ParseCsvField(absl::string_view column, absl::string_view value, TraceJob* job) {
  value = absl::StripAsciiWhitespace(value);
  if (column == "name") {
    job->name = std::string(value);
  } else if (column == "model") {
    job->model = std::string(value);
  } else if (column == "hosts") {
    job->hosts = SplitHosts(value);
  } else if (column == "parameter_servers") {
    job->parameter_servers = SplitHosts(value);
  } else if (value.empty()) {
    return true;  // numeric column left blank: default
  } else if (column == "arrival_s") {
    return absl::SimpleAtod(value, &job->arrival_s);
  } else if (column == "gradient_bytes") {
    return absl::SimpleAtoi(value, &job->gradient_bytes);
  } else if (column == "compute_ms") {
    return absl::SimpleAtod(value, &job->compute_ms);
  } else if (column == "workers") {
    return absl::SimpleAtoi(value, &job->workers);
  } else if (column == "iterations") {
    return absl::SimpleAtoi(value, &job->iterations);
  } else if (column == "priority") {
    return absl::SimpleAtoi(value, &job->priority);
  } else if (column == "batch_size") {
    return absl::SimpleAtoi(value, &job->batch_size);
  } else if (column == "noise_scale") {
    return absl::SimpleAtod(value, &job->noise_scale);
  } else if (column == "batch_sizes") {
    for (const std::string& part : SplitHosts(value)) {
      int b = 0;
      if (!absl::SimpleAtoi(part, &b)) return false;
      job->batch_sizes.push_back(b);
    }
  }
  return true;
}

std::optional<std::vector<TraceJob>> ParseCsv(absl::string_view text,
                                              std::vector<Problem>* problems) {
  const size_t before = problems->size();
  std::vector<std::string> header;
  std::vector<TraceJob> jobs;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripTrailingAsciiWhitespace(line);  // also drops '\r'
    if (absl::StripLeadingAsciiWhitespace(line).empty() ||
        absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "#")) {
      continue;
    }
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    if (header.empty()) {
      for (absl::string_view cell : cells) {
        const std::string name(absl::StripAsciiWhitespace(cell));
        bool known = false;
        for (const char* c : kColumns) known = known || name == c;
        if (!known) {
          problems->push_back(
              {"", absl::StrCat("line ", line_no, ": unknown column \"", name, "\"")});
        }
        header.push_back(name);
      }
      continue;
    }
    const size_t i = jobs.size();
    const std::string where = absl::StrCat("line ", line_no, ": ");
    TraceJob job;
    if (cells.size() != header.size()) {
      problems->push_back({JobPath(i, ""), absl::StrCat(where, cells.size(), " cells, header has ",
                                                        header.size())});
      jobs.push_back(job);
      continue;
    }
    for (size_t c = 0; c < cells.size(); ++c) {
      if (!ParseCsvField(header[c], cells[c], &job)) {
        problems->push_back(
            {JobPath(i, header[c]),
             absl::StrCat(where, "not a number: \"", absl::StripAsciiWhitespace(cells[c]), "\"")});
      }
    }
    Finish(i, where, &job, problems);
    jobs.push_back(std::move(job));
  }
  if (header.empty()) problems->push_back({"", "empty trace: no header row"});
  if (problems->size() != before) return std::nullopt;
  return jobs;
}

std::optional<std::vector<TraceJob>> ParseJson(absl::string_view text,
                                               std::vector<Problem>* problems) {
  using nlohmann::json;
  const size_t before = problems->size();
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    problems->push_back({"", "not valid JSON"});
    return std::nullopt;
  }
  const json* list = &doc;
  if (doc.is_object()) {
    for (const auto& [key, value] : doc.items()) {
      if (key != "jobs") problems->push_back({key, "unknown field"});
    }
    if (!doc.contains("jobs")) {
      problems->push_back({"jobs", "required"});
      return std::nullopt;
    }
    list = &doc["jobs"];
  }
  if (!list->is_array()) {
    problems->push_back({"jobs", "must be an array"});
    return std::nullopt;
  }
  std::vector<TraceJob> jobs;
  for (size_t i = 0; i < list->size(); ++i) {
    const json& item = (*list)[i];
    TraceJob job;
    if (!item.is_object()) {
      problems->push_back({JobPath(i, ""), "must be an object"});
      jobs.push_back(job);
      continue;
    }
    for (const auto& [key, value] : item.items()) {
      auto wrong = [&](const char* type) {
        problems->push_back({JobPath(i, key), absl::StrCat("must be ", type)});
      };
      auto hosts = [&](std::vector<std::string>* out) {
        if (!value.is_array()) return wrong("an array of host ids");
        for (const json& h : value) {
          if (!h.is_string()) return wrong("an array of host ids");
          out->push_back(h.get<std::string>());
        }
      };
      if (key == "name" || key == "model") {
        if (!value.is_string()) {
          wrong("a string");
        } else {
          (key == "name" ? job.name : job.model) = value.get<std::string>();
        }
      } else if (key == "arrival_s" || key == "compute_ms") {
        if (!value.is_number()) {
          wrong("a number");
        } else {
          (key == "arrival_s" ? job.arrival_s : job.compute_ms) = value.get<double>();
        }
      } else if (key == "gradient_bytes" || key == "iterations") {
        if (!value.is_number_integer()) {
          wrong("an integer");
        } else {
          (key == "gradient_bytes" ? job.gradient_bytes : job.iterations) = value.get<int64_t>();
        }
      } else if (key == "workers" || key == "priority" || key == "batch_size") {
        if (!value.is_number_integer()) {
          wrong("an integer");
        } else {
          (key == "workers" ? job.workers : (key == "priority" ? job.priority : job.batch_size)) =
              value.get<int>();
        }
      } else if (key == "noise_scale") {
        if (!value.is_number()) {
          wrong("a number");
        } else {
          job.noise_scale = value.get<double>();
        }
      } else if (key == "batch_sizes") {
        if (!value.is_array()) {
          wrong("an array of integers");
        } else {
          for (const json& b : value) {
            if (!b.is_number_integer()) {
              wrong("an array of integers");
              break;
            }
            job.batch_sizes.push_back(b.get<int>());
          }
        }
      } else if (key == "hosts") {
        hosts(&job.hosts);
      } else if (key == "parameter_servers") {
        hosts(&job.parameter_servers);
      } else {
        problems->push_back({JobPath(i, key), "unknown field"});
      }
    }
    Finish(i, "", &job, problems);
    jobs.push_back(std::move(job));
  }
  if (problems->size() != before) return std::nullopt;
  return jobs;
}

}  // namespace

std::optional<std::vector<TraceJob>> ParseTrace(std::string_view std_text,
                                                std::vector<core::Problem>* problems) {
  const absl::string_view text(std_text.data(), std_text.size());
  const absl::string_view stripped = absl::StripLeadingAsciiWhitespace(text);
  if (!stripped.empty() && (stripped.front() == '{' || stripped.front() == '[')) {
    return ParseJson(text, problems);
  }
  return ParseCsv(text, problems);
}

std::string TraceToCsv(const std::vector<TraceJob>& jobs) {
  std::string out = absl::StrCat(absl::StrJoin(kColumns, ","), "\n");
  for (const TraceJob& j : jobs) {
    absl::StrAppend(&out, j.name, ",", absl::StrFormat("%.17g", j.arrival_s), ",", j.model, ",",
                    j.gradient_bytes, ",", absl::StrFormat("%.17g", j.compute_ms), ",", j.workers,
                    ",", absl::StrJoin(j.hosts, ";"), ",", absl::StrJoin(j.parameter_servers, ";"),
                    ",", j.iterations, ",", j.priority, ",", j.batch_size, ",",
                    absl::StrJoin(j.batch_sizes, ";"), ",", absl::StrFormat("%.17g", j.noise_scale),
                    "\n");
  }
  return out;
}

absl::StatusOr<ArrivalProcess> ParseArrivalProcess(std::string_view std_text) {
  absl::string_view text(std_text.data(), std_text.size());
  if (text == "all-at-zero") return ArrivalProcess{};
  if (absl::ConsumePrefix(&text, "poisson:")) {
    double rate = 0;
    if (absl::SimpleAtod(text, &rate) && std::isfinite(rate) && rate > 0) {
      return ArrivalProcess{.kind = ArrivalProcess::Kind::kPoisson, .rate_per_s = rate};
    }
    return absl::InvalidArgumentError(
        absl::StrCat("poisson rate must be a number > 0, got \"", text, "\""));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("arrivals must be poisson:RATE or all-at-zero, got \"", text, "\""));
}

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SplitMix64::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

uint64_t SplitMix64::Below(uint64_t n) { return static_cast<uint64_t>(Uniform() * n) % n; }

absl::StatusOr<std::vector<TraceJob>> GenerateTrace(const TraceGeneratorOptions& options) {
  if (options.jobs < 0) return absl::InvalidArgumentError("jobs must be >= 0");
  if (options.iterations < 1) return absl::InvalidArgumentError("iterations must be >= 1");
  if (options.worker_counts.empty()) {
    return absl::InvalidArgumentError("worker_counts must not be empty");
  }
  for (int w : options.worker_counts) {
    if (w < 1) return absl::InvalidArgumentError("worker counts must be >= 1");
  }
  if (options.arrivals.kind == ArrivalProcess::Kind::kPoisson &&
      !(options.arrivals.rate_per_s > 0)) {
    return absl::InvalidArgumentError("poisson rate must be > 0");
  }
  std::vector<const core::ModelProfile*> models;
  if (options.models.empty()) {
    for (const core::ModelProfile& m : core::BuiltinModels()) models.push_back(&m);
  } else {
    for (const std::string& name : options.models) {
      const core::ModelProfile* m = core::FindModel(name);
      if (m == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown model ", name));
      models.push_back(m);
    }
  }
  SplitMix64 rng(options.seed);
  std::vector<TraceJob> jobs;
  double t = 0;
  for (int i = 0; i < options.jobs; ++i) {
    if (options.arrivals.kind == ArrivalProcess::Kind::kPoisson) {
      t += -std::log(1.0 - rng.Uniform()) / options.arrivals.rate_per_s;
    }
    const core::ModelProfile* m = models[rng.Below(models.size())];
    TraceJob job;
    job.name = absl::StrFormat("job-%04d", i + 1);
    job.arrival_s = t;
    job.model = std::string(m->name);
    job.gradient_bytes = m->gradient_bytes;
    job.compute_ms = m->compute_ms;
    job.workers = options.worker_counts[rng.Below(options.worker_counts.size())];
    job.iterations = options.iterations;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace inac::scheduler
