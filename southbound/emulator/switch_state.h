// SwitchState: the control-plane state of one P4 pipeline as a P4Runtime server keeps it (table
// entries, multicast groups, counter cells), with the validation the P4Runtime specification v1.3
// asks of a server for each update (section 9 "P4 Entity Messages", section 8.4 "Bytestrings").
// The emulated switch (emulated_switch.h) owns one per installed pipeline.
//
// Contract:
//  - Built from a P4Info that passed VerifyP4Info. Tables, counters and the multicast groups of the
//    packet replication engine are supported; action profiles, meters, direct resources, value
//    sets, clone sessions, digests and registers are not (their updates and reads answer
//    UNIMPLEMENTED: registers are data-plane state of ina.p4, and BMv2's server refuses them too).
//  - Byte strings are accepted canonical or zero-padded, must fit their P4Info bitwidth, and are
//    stored canonical (shortest big-endian, "\x00" for 0), so reads return canonical strings.
//  - Apply() is all-or-nothing per update: on error nothing of that update is applied.
//  - Not thread-safe: the owner serialises every call.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "p4/config/v1/p4info.pb.h"
#include "p4/v1/p4runtime.pb.h"
#include "southbound/emulator/p4info_check.h"

namespace inac::southbound::emulator {

class SwitchState {
 public:
  // Precondition: VerifyP4Info(p4info).ok().
  explicit SwitchState(const p4::config::v1::P4Info& p4info);
  // Holds pointers into its own copy of the P4Info: neither copyable nor movable.
  SwitchState(const SwitchState&) = delete;
  SwitchState& operator=(const SwitchState&) = delete;

  // Applies one update. Codes: INVALID_ARGUMENT (unknown id, bad width, malformed entity),
  // ALREADY_EXISTS (INSERT of a present key), NOT_FOUND (MODIFY / DELETE of an absent key),
  // RESOURCE_EXHAUSTED (INSERT into a full table: P4Info size), UNIMPLEMENTED (unsupported
  // entity kinds).
  absl::Status Apply(const p4::v1::Update& update);

  // Appends every entity matching `query` (wildcards as in the spec: table_id 0 = all tables,
  // empty match = whole table, counter_id 0 = all counters, index unset = all cells, multicast
  // group id 0 = all groups) to `out`, in a stable order (by id, then by key).
  absl::Status Read(const p4::v1::Entity& query, std::vector<p4::v1::Entity>* out) const;

  // Number of table entries held (all tables).
  int64_t num_table_entries() const;

 private:
  struct Table {
    const p4::config::v1::Table* info = nullptr;
    std::map<uint32_t, const p4::config::v1::MatchField*> fields;
    bool needs_priority = false;  // has ternary / range / optional fields
    // Canonical key -> canonical entry.
    std::map<std::string, p4::v1::TableEntry> entries;
    bool has_default = false;
    p4::v1::TableEntry default_entry;
  };
  struct Counter {
    const p4::config::v1::Counter* info = nullptr;
    int64_t size = 0;  // cells 0 .. size-1
    // The cells written so far; the others read as zero. Sparse: ina.p4's counters hold about
    // 190,000 cells, which as a dense vector cost ~7.7 MiB per device (9.8 GiB for the 1,280
    // devices of a k=32 fat-tree in one `inac switch --devices`).
    std::map<int64_t, p4::v1::CounterData> cells;
    const p4::v1::CounterData& Cell(int64_t index) const;
  };

  absl::Status ApplyTableEntry(p4::v1::Update::Type type, const p4::v1::TableEntry& entry);
  absl::Status ApplyCounterEntry(p4::v1::Update::Type type, const p4::v1::CounterEntry& entry);
  absl::Status ApplyMulticastGroup(p4::v1::Update::Type type,
                                   const p4::v1::MulticastGroupEntry& group);
  // Validates `entry` against `table` and fills `canonical` and its key.
  absl::Status CanonicalTableEntry(const Table& table, const p4::v1::TableEntry& entry,
                                   bool need_action, p4::v1::TableEntry* canonical,
                                   std::string* key) const;
  absl::Status CanonicalAction(const Table& table, const p4::v1::Action& action, bool default_entry,
                               p4::v1::Action* canonical) const;
  void ReadTable(const Table& table, const p4::v1::TableEntry& query,
                 std::vector<p4::v1::Entity>* out) const;

  p4::config::v1::P4Info p4info_;
  std::map<uint32_t, Table> tables_;
  std::map<uint32_t, const p4::config::v1::Action*> actions_;
  std::map<uint32_t, Counter> counters_;
  std::map<uint32_t, p4::v1::MulticastGroupEntry> groups_;
};

}  // namespace inac::southbound::emulator
