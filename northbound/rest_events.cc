// EventsResource: the event log, polled or streamed (server-sent events).
#include <algorithm>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "northbound/rest_json.h"
#include "northbound/rest_resources.h"

namespace inac::northbound::rest {

void EventsResource::Register(RouteTable& routes) {
  server::EventService* e = events_;
  server::HealthService* h = health_;
  routes.Add("GET", "/events", Access::kRead,
             [e](const httplib::Request& req, httplib::Response& res) {
               core::EventFilter filter;
               int64_t since = 0, limit = 100, job = 0;
               if (!QueryInt(req, res, "since", &since) || !QueryInt(req, res, "limit", &limit) ||
                   !QueryInt(req, res, "job", &job)) {
                 return;
               }
               if (limit < 1 || limit > 1000) {
                 return BadRequest(res, "limit: must be between 1 and 1000", "limit");
               }
               if (since < 0) {
                 return BadRequest(res, "since: must be a sequence number >= 0", "since");
               }
               filter.after_seq = since;
               filter.limit = limit;
               // tail=N: the newest N events (the dashboard's first screen), in seq order.
               if (req.has_param("tail")) {
                 int64_t tail = 0;
                 if (!QueryInt(req, res, "tail", &tail)) return;
                 if (tail < 1 || tail > 1000 || req.has_param("since")) {
                   return BadRequest(res, "tail: between 1 and 1000, and not with since", "tail");
                 }
                 const int64_t newest =
                     e->WaitForEvents(std::numeric_limits<int64_t>::max(), /*timeout_ms=*/0);
                 if (newest < std::numeric_limits<int64_t>::max()) {
                   filter.after_seq = std::max<int64_t>(0, newest - tail);
                 }
                 filter.limit = tail;
               }
               if (req.has_param("job")) filter.job_id = job;
               if (req.has_param("kind")) filter.kind = req.get_param_value("kind");
               auto events = e->Events(filter);
               if (!events.ok()) return SendStatus(res, events.status());
               Json arr = Json::array();
               int64_t last = since;
               for (const auto& ev : *events) {
                 arr.push_back(EventJson(ev));
                 last = ev.seq;
               }
               SendJson(res, 200, {{"events", arr}, {"last_seq", last}});
             });
  auto streams = streams_;
  const int max_streams = max_streams_;
  routes.Add(
      "GET", "/events/stream", Access::kRead,
      [e, h, streams, max_streams](const httplib::Request& req, httplib::Response& res) {
        int64_t since = 0;
        if (!QueryInt(req, res, "since", &since)) return;
        if (since < 0) {  // as on GET /events
          return BadRequest(res, "since: must be a sequence number >= 0", "since");
        }
        if (req.has_header("Last-Event-ID")) {
          // What an EventSource sends back on reconnecting: an event's id (its sequence).
          if (!absl::SimpleAtoi(req.get_header_value("Last-Event-ID"), &since) || since < 0) {
            return BadRequest(res, "Last-Event-ID: must be a sequence number >= 0",
                              "Last-Event-ID");
          }
        }
        if (streams->fetch_add(1) >= max_streams) {
          streams->fetch_sub(1);
          res.set_header("Retry-After", "5");
          return SendStatus(res, absl::UnavailableError(absl::StrCat(
                                     "too many open event streams (at most ", max_streams,
                                     "); poll GET /events?since= or retry later")));
        }
        auto cursor = std::make_shared<int64_t>(since);
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [e, h, cursor](size_t, httplib::DataSink& sink) {
              if (!sink.is_writable()) return false;
              e->WaitForEvents(*cursor, 1000);
              core::EventFilter filter;
              filter.after_seq = *cursor;
              filter.limit = 500;
              auto events = e->Events(filter);
              if (!events.ok()) return false;
              std::string out;
              for (const auto& ev : *events) {
                absl::StrAppend(&out, "id: ", ev.seq, "\nevent: ", ev.kind,
                                "\ndata: ", EventJson(ev).dump(), "\n\n");
                *cursor = ev.seq;
              }
              if (out.empty()) out = ": keep-alive\n\n";
              if (!sink.write(out.data(), out.size())) return false;
              if (!h->LoopAlive()) {
                sink.done();
                return false;
              }
              return true;
            },
            // Runs when the response is destroyed: the stream ended.
            [streams](bool) { streams->fetch_sub(1); });
      });
}

}  // namespace inac::northbound::rest
