// The REST resources: one class per collection of api/openapi.yaml, each depending only on the
// service it adapts (server/services.h). Register() declares the resource's routes, with the role
// each requires, into the route table; the handlers decode strictly (core/json.h), call the
// service, and encode the answer or the error (northbound/rest_router.h).
//
//   HealthResource    GET /healthz, /readyz (public), /metrics
//   TopologyResource  GET|PUT /topology, GET /links, PATCH /links/{id}
//   SwitchesResource  GET /switches, /switches/{id}
//   JobsResource      POST|GET /jobs, GET|DELETE /jobs/{id}, GET /jobs/{id}/config,
//                     POST /jobs/{id}/progress, POST /jobs/{id}/data-path
//   PlanResource      GET /plan, POST /plan/preview
//   EventsResource    GET /events, /events/stream
//   AuditResource     GET /audit (admin)
//   StatsResource     GET /stats/switches, /stats/jobs, /stats/controller
//
// Thread safety: handlers run concurrently; the services are thread-safe.
#pragma once

#include <atomic>
#include <memory>

#include "northbound/rest_router.h"
#include "server/services.h"
#include "server/stats_history.h"

namespace inac::northbound::rest {

// GET /jobs answers at most this many bytes (at least one job): a page of 1,000 jobs with large
// specs stops early, and its next_after resumes after the last job sent.
inline constexpr size_t kMaxJobPageBytes = 4 << 20;

class HealthResource {
 public:
  explicit HealthResource(server::HealthService* health) : health_(health) {}
  void Register(RouteTable& routes);

 private:
  server::HealthService* health_;
};

class TopologyResource {
 public:
  explicit TopologyResource(server::TopologyService* topology) : topology_(topology) {}
  void Register(RouteTable& routes);

 private:
  server::TopologyService* topology_;
};

class SwitchesResource {
 public:
  explicit SwitchesResource(server::TopologyService* topology) : topology_(topology) {}
  void Register(RouteTable& routes);

 private:
  server::TopologyService* topology_;
};

class JobsResource {
 public:
  explicit JobsResource(server::JobService* jobs) : jobs_(jobs) {}
  void Register(RouteTable& routes);

 private:
  server::JobService* jobs_;
};

class PlanResource {
 public:
  explicit PlanResource(server::PlanService* plans) : plans_(plans) {}
  void Register(RouteTable& routes);

 private:
  server::PlanService* plans_;
};

// Every open stream holds one thread of the server's pool: at most `max_streams` are open at once
// (503 `unavailable` with Retry-After beyond), so that streams cannot starve the rest of the API.
class EventsResource {
 public:
  EventsResource(server::EventService* events, server::HealthService* health, int max_streams)
      : events_(events),
        health_(health),
        max_streams_(max_streams),
        streams_(std::make_shared<std::atomic<int>>(0)) {}
  void Register(RouteTable& routes);

 private:
  server::EventService* events_;
  server::HealthService* health_;
  int max_streams_;
  std::shared_ptr<std::atomic<int>> streams_;
};

// The audit log of API writes, cursor-paged like GET /jobs (admin only).
class AuditResource {
 public:
  explicit AuditResource(server::AuditService* audit) : audit_(audit) {}
  void Register(RouteTable& routes);

 private:
  server::AuditService* audit_;
};

// The controller's recent history for the dashboard (server/stats_history.h): per-switch
// aggregator utilisation, per-job rates and iteration times, submissions and re-plans, as
// column-oriented JSON; `since_ms` (epoch ms, default 0) keeps the buckets starting at or after
// it, `job` (GET /stats/jobs) one job's series. 400 for a negative or non-integer value.
class StatsResource {
 public:
  explicit StatsResource(server::StatsHistory* stats) : stats_(stats) {}
  void Register(RouteTable& routes);

 private:
  server::StatsHistory* stats_;
};

}  // namespace inac::northbound::rest
