// The strict JSON reader of core/json.h: ParseJsonText.
#include <algorithm>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "core/json.h"
#include "core/json_fields.h"

namespace inac::core {

namespace {

using json_fields::Join;

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

}  // namespace inac::core
