#include "core/json.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/models.h"
#include "core/status.h"

namespace inac::core {

namespace {

std::string TypeName(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return "number";
    default:
      return "value";
  }
}

std::string Join(const std::string& path, const std::string& field) {
  return path.empty() ? field : path + "." + field;
}

// Strict reader over one JSON object: every accessor records the field as known, and Finish()
// reports the fields nobody asked for. Problems are appended, never thrown.
class Reader {
 public:
  Reader(const Json& json, std::string path, std::vector<Problem>* problems)
      : json_(json), path_(std::move(path)), problems_(problems) {
    ok_ = json_.is_object();
    if (!ok_) Add(path_, absl::StrCat("expected an object, got ", TypeName(json_)));
  }
  ~Reader() { Finish(); }

  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }
  std::string At(const std::string& field) const { return Join(path_, field); }

  // Returns the field or nullptr (adding "required" when `required`).
  const Json* Get(const std::string& field, bool required) {
    known_.insert(field);
    if (!ok_) return nullptr;
    auto it = json_.find(field);
    if (it == json_.end() || it->is_null()) {
      if (required) Add(At(field), "required");
      return nullptr;
    }
    return &*it;
  }
  bool Has(const std::string& field) const {
    return ok_ && json_.contains(field) && !json_.at(field).is_null();
  }

  bool String(const std::string& field, std::string* out, bool required) {
    const Json* j = Get(field, required);
    if (!j) return false;
    if (!j->is_string()) return TypeError(field, "a string", *j);
    *out = j->get<std::string>();
    return true;
  }
  bool OptString(const std::string& field, std::optional<std::string>* out) {
    std::string s;
    if (!String(field, &s, false)) return false;
    *out = s;
    return true;
  }
  bool Number(const std::string& field, double* out, bool required) {
    const Json* j = Get(field, required);
    if (!j) return false;
    if (!j->is_number()) return TypeError(field, "a number", *j);
    *out = j->get<double>();
    return true;
  }
  bool OptNumber(const std::string& field, std::optional<double>* out) {
    double v = 0;
    if (!Number(field, &v, false)) return false;
    *out = v;
    return true;
  }
  bool Int(const std::string& field, int64_t* out, bool required) {
    const Json* j = Get(field, required);
    if (!j) return false;
    if (j->is_number_integer()) {
      if (j->is_number_unsigned() &&
          j->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        Add(At(field), "integer out of range");
        return false;
      }
      *out = j->get<int64_t>();
      return true;
    }
    if (j->is_number_float()) {
      double d = j->get<double>();
      if (std::floor(d) == d && std::fabs(d) < 9e15) {
        *out = static_cast<int64_t>(d);
        return true;
      }
      Add(At(field), absl::StrCat("expected an integer, got ", j->dump()));
      return false;
    }
    return TypeError(field, "an integer", *j);
  }
  bool Int32(const std::string& field, int* out, bool required) {
    int64_t v = 0;
    if (!Int(field, &v, required)) return false;
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
      Add(At(field), "integer out of range");
      return false;
    }
    *out = static_cast<int>(v);
    return true;
  }
  bool Uint(const std::string& field, uint64_t* out, bool required) {
    const Json* j = Get(field, required);
    if (!j) return false;
    if (j->is_number_unsigned()) {
      *out = j->get<uint64_t>();
      return true;
    }
    if (j->is_number_integer()) {
      Add(At(field), absl::StrCat("must be non-negative, got ", j->dump()));
      return false;
    }
    return TypeError(field, "a non-negative integer", *j);
  }
  bool Bool(const std::string& field, bool* out, bool required) {
    const Json* j = Get(field, required);
    if (!j) return false;
    if (!j->is_boolean()) return TypeError(field, "a boolean", *j);
    *out = j->get<bool>();
    return true;
  }
  bool StringArray(const std::string& field, std::vector<std::string>* out, bool required) {
    const Json* j = Get(field, required);
    if (!j) return false;
    if (!j->is_array()) return TypeError(field, "an array of strings", *j);
    out->clear();
    bool all = true;
    for (size_t i = 0; i < j->size(); ++i) {
      const Json& e = (*j)[i];
      if (!e.is_string()) {
        Add(absl::StrCat(At(field), "[", i, "]"),
            absl::StrCat("expected a string, got ", TypeName(e)));
        all = false;
        continue;
      }
      out->push_back(e.get<std::string>());
    }
    return all;
  }
  // Array field: returns nullptr when absent or not an array (problem added for the latter).
  const Json* Array(const std::string& field, bool required) {
    const Json* j = Get(field, required);
    if (!j) return nullptr;
    if (!j->is_array()) {
      TypeError(field, "an array", *j);
      return nullptr;
    }
    return j;
  }
  const Json* Object(const std::string& field, bool required) {
    const Json* j = Get(field, required);
    if (!j) return nullptr;
    if (!j->is_object()) {
      TypeError(field, "an object", *j);
      return nullptr;
    }
    return j;
  }

  void Add(const std::string& path, const std::string& message) {
    problems_->push_back({path, message});
  }

  void Finish() {
    if (finished_ || !ok_) return;
    finished_ = true;
    for (auto it = json_.begin(); it != json_.end(); ++it) {
      if (!known_.count(it.key())) Add(At(it.key()), "unknown field");
    }
  }

 private:
  bool TypeError(const std::string& field, const char* expected, const Json& got) {
    Add(At(field), absl::StrCat("expected ", expected, ", got ", TypeName(got)));
    return false;
  }

  const Json& json_;
  std::string path_;
  std::vector<Problem>* problems_;
  std::set<std::string> known_;
  bool ok_ = false;
  bool finished_ = false;
};

std::string Indexed(const std::string& path, const std::string& field, size_t i) {
  return absl::StrCat(Join(path, field), "[", i, "]");
}

absl::Status ProblemsToStatus(const std::string& what, const std::vector<Problem>& problems) {
  std::vector<std::string> lines;
  for (const Problem& p : problems) lines.push_back(FormatProblem(p));
  return WithField(
      absl::InvalidArgumentError(absl::StrCat("invalid ", what, ": ", absl::StrJoin(lines, "; "))),
      problems.empty() ? "" : problems.front().path);
}

Json AddressJson(uint32_t a) { return FormatIpv4(a); }

bool ReadAddress(Reader& r, const std::string& field, uint32_t* out) {
  std::string s;
  if (!r.String(field, &s, true)) return false;
  if (s == "0.0.0.0") {
    *out = 0;
    return true;
  }
  auto a = ParseIpv4(s);
  if (!a) {
    r.Add(r.At(field), absl::StrCat("not an IPv4 address: \"", s, "\""));
    return false;
  }
  *out = *a;
  return true;
}

}  // namespace

std::string_view AllReduceName(AllReduce mode) { return mode == AllReduce::kPs ? "ps" : "ring"; }

std::string_view LinkStatusName(LinkStatus status) {
  return status == LinkStatus::kUp ? "up" : "down";
}

std::optional<LinkStatus> ParseLinkStatus(std::string_view name) {
  if (name == "up") return LinkStatus::kUp;
  if (name == "down") return LinkStatus::kDown;
  return std::nullopt;
}

namespace {

// SAX handler that builds the same DOM as Json::parse, but refuses a key repeated in one object
// and nesting deeper than kMaxJsonDepth, each as a Problem at the JSON path of the offence.
// Linear in the text: a member is appended to its object directly (ordered_map's own insertion
// searches the object linearly, quadratic for a large object); a repeated key is found by a scan
// of a small object and by a hash set of the keys of a large one. nlohmann's parser is iterative,
// and the depth bound keeps every recursive walk of the result (dump, copy, the decoders) shallow.
class StrictDomBuilder {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  explicit StrictDomBuilder(std::vector<Problem>* problems) : problems_(problems) {}

  Json TakeResult() { return std::move(root_); }

  bool null() { return Put(Json(nullptr)); }
  bool boolean(bool v) { return Put(Json(v)); }
  bool number_integer(number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(number_float_t v, const string_t&) { return Put(Json(v)); }
  bool string(string_t& v) { return Put(Json(std::move(v))); }
  bool binary(binary_t&) {  // not produced by JSON text
    problems_->push_back({Path(stack_.size()), "malformed JSON: binary value"});
    return false;
  }
  bool start_object(std::size_t) { return Open(Json::object()); }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_object() {
    stack_.pop_back();
    return true;
  }
  bool end_array() {
    stack_.pop_back();
    return true;
  }
  bool key(string_t& k) {
    Frame& f = stack_.back();
    Members& members = f.value->get_ref<Json::object_t&>();
    bool repeated = false;
    if (members.size() < kScannedMembers) {
      repeated = std::any_of(members.begin(), members.end(),
                             [&](const auto& member) { return member.first == k; });
    } else {
      if (f.keys.empty()) {
        for (const auto& member : members) f.keys.insert(member.first);
      }
      repeated = !f.keys.insert(k).second;
    }
    if (repeated) {
      problems_->push_back(
          {Join(Path(stack_.size() - 1), k), absl::StrCat("duplicate key ", QuoteForMessage(k))});
      return false;
    }
    members.emplace_back(std::move(k), Json());
    f.member = &members.back().second;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    problems_->push_back({"", absl::StrCat("malformed JSON: ", e.what())});
    return false;
  }

 private:
  // The object's vector of members, without ordered_map's searching emplace.
  using Members = Json::object_t::Container;
  // Objects up to this size are scanned for a repeated key; larger ones get a hash set.
  static constexpr size_t kScannedMembers = 16;

  struct Frame {
    Json* value;                           // the open array or object; stable while it is open
    Json* member = nullptr;                // object: the value slot of the last key
    std::unordered_set<std::string> keys;  // object of kScannedMembers or more: its keys
  };

  // Places a scalar or a new container where the parser is; returns its slot.
  Json* Place(Json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.value->is_array()) {
      Json::array_t& elements = f.value->get_ref<Json::array_t&>();
      elements.push_back(std::move(v));
      return &elements.back();
    }
    *f.member = std::move(v);
    return f.member;
  }
  bool Put(Json&& v) {
    Place(std::move(v));
    return true;
  }
  bool Open(Json&& container) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      problems_->push_back({Path(stack_.size()), absl::StrCat("nested deeper than ", kMaxJsonDepth,
                                                              " levels of arrays and objects")});
      return false;
    }
    Json* slot = Place(std::move(container));
    stack_.push_back(Frame{slot});
    return true;
  }

  // The JSON path through the first `depth` open containers: each one's open child (its last
  // element or member), except that the innermost open array contributes its next index.
  std::string Path(size_t depth) const {
    std::string path;
    for (size_t i = 0; i < depth; ++i) {
      const Json& c = *stack_[i].value;
      if (c.is_array()) {
        const bool next = i + 1 == stack_.size();
        absl::StrAppend(&path, "[", c.size() - (next ? 0 : 1), "]");
      } else if (!c.empty()) {
        path = Join(path, c.get_ref<const Json::object_t&>().back().first);
      }
    }
    return path;
  }

  std::vector<Problem>* problems_;
  Json root_;
  std::vector<Frame> stack_;
};

}  // namespace

std::optional<Json> ParseJsonText(std::string_view text, std::vector<Problem>* problems) {
  const size_t before = problems->size();
  StrictDomBuilder builder(problems);
  try {
    if (Json::sax_parse(text.begin(), text.end(), &builder)) return builder.TakeResult();
  } catch (const std::exception& e) {
    problems->push_back({"", absl::StrCat("malformed JSON: ", e.what())});
  }
  if (problems->size() == before) problems->push_back({"", "malformed JSON"});
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Topology

Json TopologyToJson(const Topology& t) {
  Json switches = Json::array();
  for (const Switch& s : t.switches) {
    Json j = {{"id", s.id},
              {"ina",
               {{"capable", s.ina.capable},
                {"processing_gbps", s.ina.processing_gbps},
                {"aggregators", s.ina.aggregators},
                {"aggregator_bytes", s.ina.aggregator_bytes}}}};
    if (s.p4runtime) {
      j["p4runtime"] = {{"address", s.p4runtime->address},
                        {"device_id", s.p4runtime->device_id},
                        {"target", TargetKindName(s.p4runtime->target)}};
    }
    switches.push_back(std::move(j));
  }
  Json hosts = Json::array();
  for (const Host& h : t.hosts) {
    Json j = {{"id", h.id}};
    if (h.ingress_gbps) j["ingress_gbps"] = *h.ingress_gbps;
    if (h.address) j["address"] = *h.address;
    hosts.push_back(std::move(j));
  }
  Json links = Json::array();
  for (const Link& l : t.links) {
    Json j = {{"id", l.id}, {"a", l.a}, {"b", l.b}, {"gbps", l.gbps}};
    if (l.latency_us) j["latency_us"] = *l.latency_us;
    j["status"] = std::string(LinkStatusName(l.status));
    if (l.a_port) j["a_port"] = *l.a_port;
    if (l.b_port) j["b_port"] = *l.b_port;
    links.push_back(std::move(j));
  }
  return {{"switches", switches}, {"hosts", hosts}, {"links", links}};
}

Topology TopologyFromJson(const Json& json, std::vector<Problem>* problems) {
  Topology t;
  Reader r(json, "", problems);
  if (!r.ok()) return t;
  if (const Json* arr = r.Array("switches", false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      Reader s((*arr)[i], Indexed("", "switches", i), problems);
      Switch sw;
      if (s.ok()) {
        s.String("id", &sw.id, true);
        if (const Json* ina = s.Object("ina", false)) {
          Reader ri(*ina, s.At("ina"), problems);
          ri.Bool("capable", &sw.ina.capable, false);
          ri.Number("processing_gbps", &sw.ina.processing_gbps, sw.ina.capable);
          ri.Int("aggregators", &sw.ina.aggregators, false);
          ri.Int32("aggregator_bytes", &sw.ina.aggregator_bytes, false);
        }
        if (const Json* p4 = s.Object("p4runtime", false)) {
          Reader rp(*p4, s.At("p4runtime"), problems);
          P4RuntimeEndpoint ep;
          rp.String("address", &ep.address, true);
          rp.Uint("device_id", &ep.device_id, true);
          std::string target;
          if (rp.String("target", &target, false)) {
            if (auto kind = ParseTargetKind(target)) {
              ep.target = *kind;
            } else {
              rp.Add(rp.At("target"),
                     absl::StrCat("must be \"emulator\", \"bmv2\" or \"tofino\", got ",
                                  QuoteForMessage(target)));
            }
          }
          sw.p4runtime = ep;
        }
      }
      t.switches.push_back(std::move(sw));
    }
  }
  if (const Json* arr = r.Array("hosts", false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      Reader h((*arr)[i], Indexed("", "hosts", i), problems);
      Host host;
      if (h.ok()) {
        h.String("id", &host.id, true);
        h.OptNumber("ingress_gbps", &host.ingress_gbps);
        h.OptString("address", &host.address);
      }
      t.hosts.push_back(std::move(host));
    }
  }
  if (const Json* arr = r.Array("links", false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      Reader l((*arr)[i], Indexed("", "links", i), problems);
      Link link;
      if (l.ok()) {
        l.String("a", &link.a, true);
        l.String("b", &link.b, true);
        if (!l.String("id", &link.id, false)) link.id = DefaultLinkId(link.a, link.b);
        l.Number("gbps", &link.gbps, true);
        l.OptNumber("latency_us", &link.latency_us);
        std::string status;
        if (l.String("status", &status, false)) {
          auto st = ParseLinkStatus(status);
          if (st) {
            link.status = *st;
          } else {
            l.Add(l.At("status"),
                  absl::StrCat("must be \"up\" or \"down\", got ", QuoteForMessage(status)));
          }
        }
        uint64_t port = 0;
        if (l.Uint("a_port", &port, false))
          link.a_port = static_cast<uint32_t>(std::min<uint64_t>(port, 1u << 20));
        if (l.Uint("b_port", &port, false))
          link.b_port = static_cast<uint32_t>(std::min<uint64_t>(port, 1u << 20));
      }
      t.links.push_back(std::move(link));
    }
  }
  return t;
}

std::optional<Topology> ParseTopology(std::string_view text, std::vector<Problem>* problems) {
  size_t before = problems->size();
  auto json = ParseJsonText(text, problems);
  if (!json) return std::nullopt;
  Topology t = TopologyFromJson(*json, problems);
  const bool structural = problems->size() != before;
  std::vector<Problem> semantic = ValidateTopology(t);
  if (structural) {
    // Semantic checks still run on what decoded, so one pass reports both kinds; a problem inside
    // an element that already failed to decode (same top-level element, e.g. "links[3]") would
    // only echo it and is left out. A whole-document problem leaves nothing to check.
    auto element = [](const std::string& path) {
      const size_t bracket = path.find(']');
      const size_t dot = path.find('.');
      if (bracket != std::string::npos && (dot == std::string::npos || bracket < dot)) {
        return path.substr(0, bracket + 1);
      }
      return dot == std::string::npos ? path : path.substr(0, dot);
    };
    std::set<std::string> broken;
    for (size_t i = before; i < problems->size(); ++i) broken.insert(element((*problems)[i].path));
    if (broken.contains("")) return std::nullopt;
    for (const Problem& p : semantic) {
      if (!broken.contains(element(p.path))) problems->push_back(p);
    }
    return std::nullopt;
  }
  if (!semantic.empty()) {
    problems->insert(problems->end(), semantic.begin(), semantic.end());
    return std::nullopt;
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// Jobs

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
  // InGo (docs/batch-size.md): the convergence inputs, and batch_sizes as a range
  // {"min": m, "max": M, "step": k} (step defaults to min), expanded to its values.
  r.OptNumber("steps_min", &s.steps_min);
  r.OptNumber("noise_scale", &s.noise_scale);
  r.OptNumber("target_epochs", &s.target_epochs);
  {
    int64_t dataset = 0;
    if (r.Int("dataset_size", &dataset, false)) s.dataset_size = dataset;
  }
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
        for (int64_t b = lo; b <= hi; b += step) s.batch_sizes.push_back(static_cast<int>(b));
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
      s.batch_sizes.push_back(static_cast<int>(v));
    }
  }
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

// ---------------------------------------------------------------------------------------------
// Plans

Json JobPlanToJson(const JobPlan& p) {
  Json j = Json::object();
  j["job_id"] = p.job_id;
  Json& shares = j["ps_shares"] = Json::object();
  for (const auto& [ps, x] : p.ps_shares) shares[ps] = x;
  Json& flows = j["flows"] = Json::array();
  for (const FlowPlan& f : p.flows) {
    Json e = Json::object();
    e["worker"] = f.worker;
    e["ps"] = f.ps;
    e["aggregation_node"] = f.aggregation_node;
    e["path"] = f.path;
    if (f.fraction != 1) e["fraction"] = f.fraction;
    flows.push_back(std::move(e));
  }
  Json& aggs = j["aggregator_paths"] = Json::array();
  for (const AggregatorPlan& a : p.aggregator_paths) {
    Json e = Json::object();
    e["switch"] = a.switch_id;
    e["ps"] = a.ps;
    e["path"] = a.path;
    aggs.push_back(std::move(e));
  }
  Json& counts = j["aggregators"] = Json::object();
  for (const auto& [sw, n] : p.aggregators) counts[sw] = n;
  if (!p.ring.empty()) j["ring"] = p.ring;
  j["batch_size"] = p.batch_size;
  j["priority"] = p.priority;
  if (p.generation != 0) j["generation"] = p.generation;
  j["rate_gbps"] = p.rate_gbps;
  if (p.lp_bound_gbps) j["lp_bound_gbps"] = *p.lp_bound_gbps;
  j["comm_ms"] = p.comm_ms;
  j["iteration_ms"] = p.iteration_ms;
  return j;
}

namespace {

JobPlan ReadJobPlan(const Json& json, const std::string& path, std::vector<Problem>* problems) {
  JobPlan p;
  Reader r(json, path, problems);
  if (!r.ok()) return p;
  r.Int("job_id", &p.job_id, true);
  if (const Json* shares = r.Object("ps_shares", false)) {
    for (auto it = shares->begin(); it != shares->end(); ++it) {
      if (!it->is_number()) {
        r.Add(Join(r.At("ps_shares"), it.key()), "expected a number");
        continue;
      }
      p.ps_shares[it.key()] = it->get<double>();
    }
  }
  if (const Json* arr = r.Array("flows", false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      Reader f((*arr)[i], Indexed(path, "flows", i), problems);
      FlowPlan fp;
      f.String("worker", &fp.worker, true);
      f.String("ps", &fp.ps, true);
      f.String("aggregation_node", &fp.aggregation_node, true);
      f.StringArray("path", &fp.path, true);
      f.Number("fraction", &fp.fraction, false);
      p.flows.push_back(std::move(fp));
    }
  }
  if (const Json* arr = r.Array("aggregator_paths", false)) {
    for (size_t i = 0; i < arr->size(); ++i) {
      Reader a((*arr)[i], Indexed(path, "aggregator_paths", i), problems);
      AggregatorPlan ap;
      a.String("switch", &ap.switch_id, true);
      a.String("ps", &ap.ps, true);
      a.StringArray("path", &ap.path, true);
      p.aggregator_paths.push_back(std::move(ap));
    }
  }
  if (const Json* counts = r.Object("aggregators", false)) {
    for (auto it = counts->begin(); it != counts->end(); ++it) {
      if (!it->is_number_integer()) {
        r.Add(Join(r.At("aggregators"), it.key()), "expected an integer");
        continue;
      }
      p.aggregators[it.key()] = it->get<int64_t>();
    }
  }
  r.StringArray("ring", &p.ring, false);
  r.Int32("batch_size", &p.batch_size, false);
  r.Int32("priority", &p.priority, false);
  int64_t generation = 0;
  r.Int("generation", &generation, false);
  if (generation < 0 || generation > UINT32_MAX) {
    r.Add(r.At("generation"), "must be in [0, 2^32)");
  } else {
    p.generation = static_cast<uint32_t>(generation);
  }
  r.Number("rate_gbps", &p.rate_gbps, false);
  r.OptNumber("lp_bound_gbps", &p.lp_bound_gbps);
  r.Number("comm_ms", &p.comm_ms, false);
  r.Number("iteration_ms", &p.iteration_ms, false);
  return p;
}

}  // namespace

absl::StatusOr<JobPlan> JobPlanFromJson(const Json& json) {
  std::vector<Problem> problems;
  JobPlan p = ReadJobPlan(json, "", &problems);
  if (!problems.empty()) return ProblemsToStatus("job plan", problems);
  return p;
}

Json PlanToJson(const Plan& plan) {
  Json jobs = Json::array();
  for (const JobPlan& j : plan.jobs) jobs.push_back(JobPlanToJson(j));
  Json j = Json::object();
  j["version"] = plan.version;
  j["algorithm"] = plan.algorithm;
  if (!plan.memory_policy.empty()) j["memory_policy"] = plan.memory_policy;
  if (!plan.fingerprint.empty()) j["fingerprint"] = plan.fingerprint;
  j["solve_ms"] = plan.solve_ms;
  j["jobs"] = std::move(jobs);
  return j;
}

absl::StatusOr<Plan> PlanFromJson(const Json& json) {
  std::vector<Problem> problems;
  Plan plan;
  {
    Reader r(json, "", &problems);
    if (r.ok()) {
      r.Int("version", &plan.version, true);
      r.String("algorithm", &plan.algorithm, false);
      r.String("memory_policy", &plan.memory_policy, false);
      r.String("fingerprint", &plan.fingerprint, false);
      r.Number("solve_ms", &plan.solve_ms, false);
      if (const Json* arr = r.Array("jobs", false)) {
        for (size_t i = 0; i < arr->size(); ++i) {
          plan.jobs.push_back(ReadJobPlan((*arr)[i], Indexed("", "jobs", i), &problems));
        }
      }
    }
  }
  if (!problems.empty()) return ProblemsToStatus("plan", problems);
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Switch intents

Json SwitchIntentToJson(const SwitchIntent& s) {
  Json jobs = Json::array();
  for (const JobAggregationIntent& j : s.jobs) {
    jobs.push_back({{"tag", j.tag},
                    {"job_id", j.job_id},
                    {"fan_in", j.fan_in},
                    {"input_bitmap", j.input_bitmap},
                    {"multicast_group", j.multicast_group},
                    {"aggregator_base", j.aggregator_base},
                    {"aggregator_count", j.aggregator_count},
                    {"priority", j.priority},
                    {"upstream_address", AddressJson(j.upstream_address)},
                    {"self_address", AddressJson(j.self_address)},
                    {"slot_offset", j.slot_offset},
                    {"window", j.window},
                    {"upstream_slot_shift", j.upstream_slot_shift}});
  }
  Json inputs = Json::array();
  for (const AggregationInputIntent& i : s.inputs) {
    inputs.push_back({{"tag", i.tag},
                      {"job_id", i.job_id},
                      {"source_address", AddressJson(i.source_address)},
                      {"index", i.index}});
  }
  Json routes = Json::array();
  for (const RouteIntent& r : s.routes) {
    routes.push_back({{"tag", r.tag},
                      {"job_id", r.job_id},
                      {"source_address", AddressJson(r.source_address)},
                      {"destination_address", AddressJson(r.destination_address)},
                      {"egress_port", r.egress_port},
                      {"multicast_group", r.multicast_group},
                      {"class", RouteClassName(r.packet_class)}});
  }
  Json hosts = Json::array();
  for (const HostPortIntent& h : s.host_ports) {
    hosts.push_back({{"port", h.port}, {"mac", h.mac}, {"address", AddressJson(h.address)}});
  }
  Json groups = Json::array();
  for (const MulticastGroupIntent& g : s.multicast_groups) {
    groups.push_back(
        {{"group_id", g.group_id}, {"job_id", g.job_id}, {"egress_ports", g.egress_ports}});
  }
  return {{"switch_id", s.switch_id}, {"version", s.version}, {"jobs", jobs},
          {"inputs", inputs},         {"routes", routes},     {"multicast_groups", groups},
          {"host_ports", hosts}};
}

absl::StatusOr<SwitchIntent> SwitchIntentFromJson(const Json& json) {
  std::vector<Problem> problems;
  SwitchIntent s;
  auto u32 = [&](Reader& r, const char* field, uint32_t* out) {
    uint64_t v = 0;
    if (!r.Uint(field, &v, true)) return;
    if (v > 0xFFFFFFFFull) {
      r.Add(r.At(field), "out of 32-bit range");
      return;
    }
    *out = static_cast<uint32_t>(v);
  };
  {
    Reader r(json, "", &problems);
    if (r.ok()) {
      r.String("switch_id", &s.switch_id, true);
      r.Int("version", &s.version, true);
      if (const Json* arr = r.Array("jobs", false)) {
        for (size_t i = 0; i < arr->size(); ++i) {
          Reader e((*arr)[i], Indexed("", "jobs", i), &problems);
          JobAggregationIntent j;
          u32(e, "tag", &j.tag);
          e.Int("job_id", &j.job_id, true);
          u32(e, "fan_in", &j.fan_in);
          e.Uint("input_bitmap", &j.input_bitmap, true);
          u32(e, "multicast_group", &j.multicast_group);
          u32(e, "aggregator_base", &j.aggregator_base);
          u32(e, "aggregator_count", &j.aggregator_count);
          int prio = 0;
          e.Int32("priority", &prio, true);
          j.priority = prio;
          ReadAddress(e, "upstream_address", &j.upstream_address);
          // Absent in intents stored before the contract carried them.
          if (e.Has("self_address")) ReadAddress(e, "self_address", &j.self_address);
          if (e.Has("slot_offset")) u32(e, "slot_offset", &j.slot_offset);
          if (e.Has("window")) u32(e, "window", &j.window);
          if (e.Has("upstream_slot_shift")) {
            e.Int32("upstream_slot_shift", &j.upstream_slot_shift, true);
          }
          s.jobs.push_back(j);
        }
      }
      if (const Json* arr = r.Array("inputs", false)) {
        for (size_t i = 0; i < arr->size(); ++i) {
          Reader e((*arr)[i], Indexed("", "inputs", i), &problems);
          AggregationInputIntent in;
          u32(e, "tag", &in.tag);
          e.Int("job_id", &in.job_id, true);
          ReadAddress(e, "source_address", &in.source_address);
          u32(e, "index", &in.index);
          s.inputs.push_back(in);
        }
      }
      if (const Json* arr = r.Array("routes", false)) {
        for (size_t i = 0; i < arr->size(); ++i) {
          Reader e((*arr)[i], Indexed("", "routes", i), &problems);
          RouteIntent rt;
          u32(e, "tag", &rt.tag);
          e.Int("job_id", &rt.job_id, true);
          ReadAddress(e, "source_address", &rt.source_address);
          ReadAddress(e, "destination_address", &rt.destination_address);
          u32(e, "egress_port", &rt.egress_port);
          u32(e, "multicast_group", &rt.multicast_group);
          std::string cls;
          if (e.String("class", &cls, false)) {
            if (auto parsed = ParseRouteClass(cls)) {
              rt.packet_class = *parsed;
            } else {
              e.Add(e.At("class"),
                    absl::StrCat("must be raw, upstream or result, got \"", cls, "\""));
            }
          }
          s.routes.push_back(rt);
        }
      }
      if (const Json* arr = r.Array("multicast_groups", false)) {
        for (size_t i = 0; i < arr->size(); ++i) {
          Reader e((*arr)[i], Indexed("", "multicast_groups", i), &problems);
          MulticastGroupIntent g;
          u32(e, "group_id", &g.group_id);
          e.Int("job_id", &g.job_id, true);
          if (const Json* ports = e.Array("egress_ports", true)) {
            for (const Json& p : *ports) {
              if (p.is_number_unsigned())
                g.egress_ports.push_back(p.get<uint32_t>());
              else
                e.Add(e.At("egress_ports"), "expected non-negative integers");
            }
          }
          s.multicast_groups.push_back(g);
        }
      }
      if (const Json* arr = r.Array("host_ports", false)) {
        for (size_t i = 0; i < arr->size(); ++i) {
          Reader e((*arr)[i], Indexed("", "host_ports", i), &problems);
          HostPortIntent h;
          u32(e, "port", &h.port);
          e.Uint("mac", &h.mac, true);
          ReadAddress(e, "address", &h.address);
          s.host_ports.push_back(h);
        }
      }
    }
  }
  if (!problems.empty()) return ProblemsToStatus("switch intent", problems);
  return s;
}

}  // namespace inac::core
