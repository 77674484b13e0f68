// Canonical form, identity and description of P4Runtime entities (P4Runtime spec v1.3, sections
// 8.4 "Bytestrings" and 9 "P4 Entity Messages"). Part of the southbound codec layer: it exposes
// generated protobuf types and is used by the translator, the reconciler and the session only.
//
// Canonical form: byte strings shortest big-endian; match fields sorted by field id; action
// params sorted by param id; read-only or unused fields (counter data, meter config, idle time,
// is_const, controller_metadata) cleared; multicast replicas as `egress_port` (a `port` byte
// string is decoded) sorted by (port, instance). Two canonical entities describe the same switch
// state exactly when their deterministic serializations are equal.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "p4/v1/p4runtime.pb.h"

namespace inac::southbound {

// The canonical copy of `entity`. InvalidArgument for entity kinds the reconciler does not
// handle (only table entries, multicast groups and counter entries are canonicalised) or for a
// replica `port` wider than 32 bits.
absl::StatusOr<p4::v1::Entity> CanonicalEntity(const p4::v1::Entity& entity);

// Canonicalises `entity` in place (no copy; for entities just read back). Same errors as
// CanonicalEntity; on error the entity may be partly canonicalised.
absl::Status CanonicalizeInPlace(p4::v1::Entity& entity);

// The identity of a canonical entity on the switch: table id + match + priority for table
// entries, the group id for multicast groups, counter id + index for counter cells. Entities
// with equal keys occupy the same slot; a write to one replaces the other.
std::string EntityKey(const p4::v1::Entity& canonical);

// Deterministic serialization of a canonical entity: equal strings mean equal state.
std::string EntityFingerprint(const p4::v1::Entity& canonical);

// Replica port helpers. INAC writes the port in `egress_port` (field 1: the only form P4Runtime
// v1.3 targets know; v1.4 keeps it in the `port_kind` oneof, deprecated, beside the `port` byte
// string) and reads either form.
uint32_t ReplicaPort(const p4::v1::Replica& replica);
void SetReplicaPort(p4::v1::Replica& replica, uint32_t port);

// A one-line description for logs and error messages, e.g.
// "table_entry{table=33554433 match=[1:0x07] action=16777217}".
std::string DescribeEntity(const p4::v1::Entity& entity);

}  // namespace inac::southbound
