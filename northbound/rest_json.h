// JSON encoders of the REST layer's own answers (the domain types' encoders are core/json.h):
// switch status, event, job configuration, INA counters and data path, as api/openapi.yaml
// documents them.
#pragma once

#include <vector>

#include "core/json.h"
#include "core/stores.h"
#include "server/data_path.h"
#include "server/job_config.h"
#include "server/metrics.h"

namespace inac::northbound::rest {

core::Json SwitchJson(const server::SwitchStatus& s);
core::Json EventJson(const core::Event& e);
core::Json ConfigJson(const server::JobConfig& c);
// GET /jobs/{id}'s `ina_counters`: the samples per (switch, tag) and their totals.
core::Json InaCountersJson(const std::vector<server::InaCounterSample>& samples);
// A job's `data_path` (GET /jobs/{id}, GET /jobs, POST /jobs/{id}/data-path): state, summary,
// the sums and the workers' latest reports.
core::Json DataPathJson(const server::JobDataPath& data_path);

}  // namespace inac::northbound::rest
