#include "southbound/bytestrings.h"

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace inac::southbound {

std::string EncodeCanonical(uint64_t value) {
  std::string out;
  for (int shift = 56; shift >= 0; shift -= 8) {
    const char byte = static_cast<char>((value >> shift) & 0xff);
    if (out.empty() && byte == 0) continue;
    out.push_back(byte);
  }
  if (out.empty()) out.push_back('\0');
  return out;
}

absl::StatusOr<std::string> EncodeField(uint64_t value, int bitwidth) {
  if (bitwidth < 1 || bitwidth > 64) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported bitwidth ", bitwidth));
  }
  if (bitwidth < 64 && (value >> bitwidth) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("value ", value, " does not fit in ", bitwidth, " bits"));
  }
  return EncodeCanonical(value);
}

std::string Canonicalize(std::string_view bytes) {
  size_t first = 0;
  while (first + 1 < bytes.size() && bytes[first] == '\0') ++first;
  if (bytes.empty()) return std::string(1, '\0');
  return std::string(bytes.substr(first));
}

absl::StatusOr<uint64_t> DecodeUint(std::string_view bytes) {
  const std::string canonical = Canonicalize(bytes);
  if (canonical.size() > 8) {
    return absl::OutOfRangeError(
        absl::StrCat("byte string 0x", HexBytes(bytes), " exceeds 64 bits"));
  }
  uint64_t value = 0;
  for (char c : canonical) value = (value << 8) | static_cast<uint8_t>(c);
  return value;
}

bool FitsBitwidth(std::string_view bytes, int bitwidth) {
  const std::string canonical = Canonicalize(bytes);
  if (canonical == std::string(1, '\0')) return true;
  const int leading = static_cast<uint8_t>(canonical[0]);
  int top_bits = 0;
  for (int v = leading; v != 0; v >>= 1) ++top_bits;
  const int bits = static_cast<int>(canonical.size() - 1) * 8 + top_bits;
  return bits <= bitwidth;
}

std::string HexBytes(std::string_view bytes) {
  return absl::BytesToHexString(absl::string_view(bytes.data(), bytes.size()));
}

}  // namespace inac::southbound
