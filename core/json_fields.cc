#include "core/json_fields.h"

#include "absl/strings/str_join.h"
#include "core/status.h"

namespace inac::core::json_fields {

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

}  // namespace inac::core::json_fields
