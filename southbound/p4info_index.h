// P4Info loading and name -> id resolution (P4Runtime spec v1.3, section 6 "The P4Info Message").
// Part of the southbound codec layer: it exposes the generated P4Info type. Names resolve by
// fully qualified name ("IngressImpl.ina_job") or by alias ("ina_job"); ids are never hard-coded
// elsewhere in INAC, so a P4Info with other ids (p4c's own output) works unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "p4/config/v1/p4info.pb.h"

namespace inac::southbound {

// A match field or action parameter: its id within its table / action and its width in bits.
struct FieldInfo {
  uint32_t id = 0;
  int bitwidth = 0;
};

// An immutable index over one P4Info. Copying is cheap (shared, immutable state).
// Thread safety: all methods are const and safe to call concurrently.
class P4InfoIndex {
 public:
  // Parses P4Info protobuf text format. InvalidArgument on a parse error or on duplicate ids.
  static absl::StatusOr<P4InfoIndex> FromText(absl::string_view text);
  // Reads and parses a text-format file. NotFound when the file cannot be read.
  static absl::StatusOr<P4InfoIndex> FromFile(const std::string& path);
  // Indexes an already parsed P4Info.
  static absl::StatusOr<P4InfoIndex> FromProto(p4::config::v1::P4Info p4info);
  // The P4Info of api/p4/ina.p4 embedded into the binary at build time.
  static absl::StatusOr<P4InfoIndex> EmbeddedIna();

  const p4::config::v1::P4Info& p4info() const { return *state_->p4info; }

  // Ids by (fully qualified or alias) name; NotFound names the kind and the name.
  absl::StatusOr<uint32_t> TableId(absl::string_view name) const;
  absl::StatusOr<uint32_t> ActionId(absl::string_view name) const;
  absl::StatusOr<uint32_t> CounterId(absl::string_view name) const;
  // A match field of a table / a parameter of an action, by name. NotFound when the table or
  // action id is unknown or it has no such field.
  absl::StatusOr<FieldInfo> MatchField(uint32_t table_id, absl::string_view field) const;
  absl::StatusOr<FieldInfo> ActionParam(uint32_t action_id, absl::string_view param) const;

  // Lookups by id; nullptr when absent.
  const p4::config::v1::Table* FindTable(uint32_t id) const;
  const p4::config::v1::Action* FindAction(uint32_t id) const;
  const p4::config::v1::Counter* FindCounter(uint32_t id) const;

  // A stable 64-bit fingerprint of the P4Info (FNV-1a over its deterministic serialization),
  // the default pipeline cookie.
  uint64_t Fingerprint() const { return state_->fingerprint; }

 private:
  struct State {
    std::unique_ptr<p4::config::v1::P4Info> p4info;
    absl::flat_hash_map<std::string, uint32_t> tables, actions, counters;  // name and alias
    absl::flat_hash_map<uint32_t, const p4::config::v1::Table*> table_by_id;
    absl::flat_hash_map<uint32_t, const p4::config::v1::Action*> action_by_id;
    absl::flat_hash_map<uint32_t, const p4::config::v1::Counter*> counter_by_id;
    uint64_t fingerprint = 0;
  };
  explicit P4InfoIndex(std::shared_ptr<const State> state) : state_(std::move(state)) {}

  std::shared_ptr<const State> state_;
};

// The embedded text of api/p4/ina.p4info.txtpb (generated at build time).
std::string_view EmbeddedInaP4InfoText();

}  // namespace inac::southbound
