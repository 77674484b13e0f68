// JSON encoders of the REST layer's own answers (the domain types' encoders are core/json.h):
// switch status, event, job configuration and INA counters, as api/openapi.yaml documents them.
#pragma once

#include <vector>

#include "core/json.h"
#include "core/ports.h"
#include "server/job_config.h"
#include "server/metrics.h"

namespace inac::server::rest {

core::Json SwitchJson(const SwitchStatus& s);
core::Json EventJson(const core::Event& e);
core::Json ConfigJson(const JobConfig& c);
// GET /jobs/{id}'s `ina_counters`: the samples per (switch, tag) and their totals.
core::Json InaCountersJson(const std::vector<InaCounterSample>& samples);

}  // namespace inac::server::rest
