// Topology generation speed (target: `inac topo generate fat-tree --k 32`, 1280 switches
// and 8192 hosts, in under a second). Measures what the CLI does: generate, validate, encode to
// JSON text. Prints one JSON line per k.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <vector>

#include "core/generators.h"
#include "core/json.h"
#include "core/validation.h"

namespace {

double Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace

int main() {
  using Clock = std::chrono::steady_clock;
  for (int k : {8, 16, 32}) {
    std::vector<double> generate, validate, encode, total;
    size_t bytes = 0, switches = 0, hosts = 0;
    for (int rep = 0; rep < 5; ++rep) {
      auto t0 = Clock::now();
      auto topo = inac::core::GenerateFatTree(k, inac::core::GeneratorOptions{});
      auto t1 = Clock::now();
      auto problems = inac::core::ValidateTopology(*topo);
      auto t2 = Clock::now();
      std::string text = inac::core::TopologyToJson(*topo).dump(2);
      auto t3 = Clock::now();
      if (!problems.empty()) {
        std::cerr << "generated topology is invalid\n";
        return 1;
      }
      bytes = text.size();
      switches = topo->switches.size();
      hosts = topo->hosts.size();
      generate.push_back(Ms(t1 - t0));
      validate.push_back(Ms(t2 - t1));
      encode.push_back(Ms(t3 - t2));
      total.push_back(Ms(t3 - t0));
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::cout << "{\"bench\":\"topo_generate_fat_tree\",\"k\":" << k << ",\"switches\":" << switches
              << ",\"hosts\":" << hosts << ",\"json_bytes\":" << bytes
              << ",\"generate_ms\":" << median(generate) << ",\"validate_ms\":" << median(validate)
              << ",\"encode_ms\":" << median(encode) << ",\"total_ms\":" << median(total) << "}"
              << std::endl;
  }
  return 0;
}
