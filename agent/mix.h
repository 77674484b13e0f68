// splitmix64 (Steele, Lea, Flood 2014): the mixing function behind the agents' deterministic
// choices (synthetic gradients, the loss test hook). Pure; the same on every host.
#pragma once

#include <cstdint>

namespace inac::agent {

inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace inac::agent
