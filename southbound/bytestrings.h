// Canonical P4Runtime byte strings (P4Runtime spec v1.3, section 8.4 "Bytestrings"): an unsigned
// integer of a P4 field of `bitwidth` bits travels as big-endian bytes; the canonical form is the
// shortest such string, with zero as one zero byte. Targets may answer with padded or empty
// strings, so every value read back is canonicalised before it is compared (docs/southbound.md,
// "Reconciliation"). No protobuf types here; this is plain byte arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace inac::southbound {

// The canonical string of `value` (shortest big-endian, "\x00" for 0).
std::string EncodeCanonical(uint64_t value);

// The canonical string of `value` for a field of `bitwidth` bits (1..64). InvalidArgument when
// the value does not fit.
absl::StatusOr<std::string> EncodeField(uint64_t value, int bitwidth);

// Strips leading zero bytes, keeping at least one byte; "" becomes "\x00". Works for any length.
std::string Canonicalize(std::string_view bytes);

// The value of a big-endian byte string of any length ("" is 0). OutOfRange when the value needs
// more than 64 bits.
absl::StatusOr<uint64_t> DecodeUint(std::string_view bytes);

// True when `bytes` (canonical or not) holds a value that fits in `bitwidth` bits.
bool FitsBitwidth(std::string_view bytes, int bitwidth);

// Lower-case hex of `bytes`, for messages and keys ("0a01").
std::string HexBytes(std::string_view bytes);

}  // namespace inac::southbound
