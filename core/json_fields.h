// Strict field access shared by the JSON codecs of core/json.h (json_topology.cc, json_jobs.cc,
// json_plan.cc) and the path helpers of the strict reader (json_reader.cc). Internal to core/: no
// other layer includes it.
//
// Contract: a Reader wraps one JSON value expected to be an object at a JSON path. Every accessor
// records its field as known; the destructor (or Finish()) appends an "unknown field" Problem for
// each member nobody asked for. A wrong type, a missing required field or a value out of range is
// appended as a Problem at the field's path and the accessor returns false (nullptr); nothing is
// thrown. Problem order is the order of the calls, then the unknown fields.
//
// Thread safety: a Reader is used by one thread; the free functions are pure.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "core/validation.h"

namespace inac::core::json_fields {

// "null", "object", "array", "string", "boolean", "number" (or "value"), for messages.
std::string TypeName(const Json& j);

// `path.field`, or `field` at the root.
inline std::string Join(const std::string& path, const std::string& field) {
  return path.empty() ? field : path + "." + field;
}

// `path.field[i]`.
std::string Indexed(const std::string& path, const std::string& field, size_t i);

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

// InvalidArgument "invalid <what>: <problems>", with the first problem's path as its field
// (core/status.h WithField).
absl::Status ProblemsToStatus(const std::string& what, const std::vector<Problem>& problems);

// A dotted-quad IPv4 address; 0 is "0.0.0.0".
Json AddressJson(uint32_t a);

// Reads the required dotted-quad `field` ("0.0.0.0" is 0); false with a Problem otherwise.
bool ReadAddress(Reader& r, const std::string& field, uint32_t* out);

}  // namespace inac::core::json_fields
