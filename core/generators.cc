#include "core/generators.h"

#include "core/validation.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace inac::core {

absl::StatusOr<InaPlacement> ParseInaPlacement(const std::string& text) {
  InaPlacement p;
  if (text == "tor") {
    p.kind = InaPlacement::Kind::kTor;
  } else if (text == "all") {
    p.kind = InaPlacement::Kind::kAll;
  } else if (text == "none") {
    p.kind = InaPlacement::Kind::kNone;
  } else if (text.rfind("random:", 0) == 0) {
    double f = 0;
    if (!absl::SimpleAtod(text.substr(7), &f) || !(f >= 0 && f <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ina random:FRACTION needs 0 <= FRACTION <= 1, got \"", text, "\""));
    }
    p.kind = InaPlacement::Kind::kRandom;
    p.fraction = f;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--ina must be tor, all, none or random:FRACTION, got \"", text, "\""));
  }
  return p;
}

absl::Status ParseProcessingRange(const std::string& text, GeneratorOptions* options) {
  double lo = 0, hi = 0;
  auto colon = text.find(':');
  bool ok = colon == std::string::npos ? absl::SimpleAtod(text, &lo) && (hi = lo, true)
                                       : absl::SimpleAtod(text.substr(0, colon), &lo) &&
                                             absl::SimpleAtod(text.substr(colon + 1), &hi);
  if (!ok || !(lo > 0) || !(hi >= lo) || hi > 1e6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--processing-gbps must be G or lo:hi with 0 < lo <= hi <= 10^6, got \"", text, "\""));
  }
  options->processing_gbps_lo = lo;
  options->processing_gbps_hi = hi;
  return absl::OkStatus();
}

namespace {

absl::Status CheckOptions(const GeneratorOptions& o) {
  if (!(o.link_gbps > 0) || o.link_gbps > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrCat("link capacity must be in (0, 10^6] Gbps, got ", o.link_gbps));
  }
  if (!(o.processing_gbps_lo > 0) || o.processing_gbps_hi < o.processing_gbps_lo) {
    return absl::InvalidArgumentError("processing capacity range must satisfy 0 < lo <= hi");
  }
  if (o.aggregators < 0) return absl::InvalidArgumentError("aggregators must be non-negative");
  return absl::OkStatus();
}

// Applies the INA placement: `tor_indices` are the switches "tor" selects.
void PlaceIna(Topology& t, const std::vector<int>& tor_indices, const GeneratorOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::vector<bool> capable(t.switches.size(), false);
  switch (o.ina.kind) {
    case InaPlacement::Kind::kTor:
      for (int i : tor_indices) capable[i] = true;
      break;
    case InaPlacement::Kind::kAll:
      std::fill(capable.begin(), capable.end(), true);
      break;
    case InaPlacement::Kind::kNone:
      break;
    case InaPlacement::Kind::kRandom: {
      std::vector<int> order(t.switches.size());
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      size_t n = static_cast<size_t>(std::llround(o.ina.fraction * t.switches.size()));
      for (size_t i = 0; i < n && i < order.size(); ++i) capable[order[i]] = true;
      break;
    }
  }
  std::uniform_real_distribution<double> cap(o.processing_gbps_lo, o.processing_gbps_hi);
  for (size_t i = 0; i < t.switches.size(); ++i) {
    Switch& s = t.switches[i];
    // Draw for every switch so a switch's capacity does not depend on the placement.
    double c = o.processing_gbps_lo == o.processing_gbps_hi ? o.processing_gbps_lo : cap(rng);
    if (capable[i]) {
      s.ina.capable = true;
      s.ina.processing_gbps = c;
      s.ina.aggregators = o.aggregators;
    }
    if (o.p4runtime_base_port > 0) {
      s.p4runtime =
          P4RuntimeEndpoint{absl::StrCat("127.0.0.1:", o.p4runtime_base_port + i), i + 1, o.target};
    }
  }
}

void AddLink(Topology& t, const std::string& a, const std::string& b, double gbps) {
  Link l;
  l.id = DefaultLinkId(a, b);
  l.a = a;
  l.b = b;
  l.gbps = gbps;
  t.links.push_back(std::move(l));
}

}  // namespace

absl::StatusOr<Topology> GenerateFatTree(int k, const GeneratorOptions& options,
                                         int hosts_per_edge) {
  // k = 64 is the largest whose hosts (k^3/4 = 65536) fit a topology's limits (validation.h).
  if (k < 2 || k % 2 != 0 || k > 64) {
    return absl::InvalidArgumentError(absl::StrCat("fat-tree k must be even, 2..64, got ", k));
  }
  if (hosts_per_edge < 0) hosts_per_edge = k / 2;
  if (hosts_per_edge > 1024)
    return absl::InvalidArgumentError("at most 1024 hosts per edge switch");
  if (auto s = CheckOptions(options); !s.ok()) return s;
  const int half = k / 2;
  Topology t;
  t.switches.reserve(k * k * 5 / 4);
  t.hosts.reserve(static_cast<size_t>(k) * half * hosts_per_edge);
  t.links.reserve(static_cast<size_t>(k) * half * (hosts_per_edge + k));
  for (int i = 0; i < half * half; ++i) t.switches.push_back(Switch{absl::StrCat("c", i), {}, {}});
  for (int p = 0; p < k; ++p) {
    for (int i = 0; i < half; ++i) {
      t.switches.push_back(Switch{absl::StrCat("a", p, "_", i), {}, {}});
    }
  }
  std::vector<int> edges;
  for (int p = 0; p < k; ++p) {
    for (int i = 0; i < half; ++i) {
      edges.push_back(static_cast<int>(t.switches.size()));
      t.switches.push_back(Switch{absl::StrCat("e", p, "_", i), {}, {}});
    }
  }
  // Core c(i*half + j) connects to aggregation switch i of every pod.
  for (int p = 0; p < k; ++p) {
    for (int i = 0; i < half; ++i) {
      std::string agg = absl::StrCat("a", p, "_", i);
      for (int j = 0; j < half; ++j)
        AddLink(t, absl::StrCat("c", i * half + j), agg, options.link_gbps);
    }
  }
  for (int p = 0; p < k; ++p) {
    for (int e = 0; e < half; ++e) {
      std::string edge = absl::StrCat("e", p, "_", e);
      for (int i = 0; i < half; ++i)
        AddLink(t, absl::StrCat("a", p, "_", i), edge, options.link_gbps);
      for (int h = 0; h < hosts_per_edge; ++h) {
        std::string host = absl::StrCat("h", p, "_", e, "_", h);
        t.hosts.push_back(Host{host, std::nullopt, std::nullopt});
        AddLink(t, edge, host, options.link_gbps);
      }
    }
  }
  PlaceIna(t, edges, options);
  return t;
}

absl::StatusOr<Topology> GenerateLeafSpine(int leaves, int spines, int hosts_per_leaf,
                                           const GeneratorOptions& options) {
  if (leaves < 1 || leaves > 4096 || spines < 1 || spines > 1024 || hosts_per_leaf < 0 ||
      hosts_per_leaf > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leaf-spine needs 1..4096 leaves, 1..1024 spines, 0..1024 hosts per leaf; got ", leaves,
        ", ", spines, ", ", hosts_per_leaf));
  }
  if (static_cast<size_t>(leaves) * static_cast<size_t>(hosts_per_leaf) > kMaxHosts) {
    return absl::InvalidArgumentError(absl::StrCat("leaf-spine with ", leaves, " x ",
                                                   hosts_per_leaf, " hosts exceeds the limit of ",
                                                   kMaxHosts, " hosts"));
  }
  if (auto s = CheckOptions(options); !s.ok()) return s;
  Topology t;
  for (int s = 0; s < spines; ++s) t.switches.push_back(Switch{absl::StrCat("sp", s), {}, {}});
  std::vector<int> leaf_indices;
  for (int l = 0; l < leaves; ++l) {
    leaf_indices.push_back(static_cast<int>(t.switches.size()));
    t.switches.push_back(Switch{absl::StrCat("lf", l), {}, {}});
  }
  for (int l = 0; l < leaves; ++l) {
    for (int s = 0; s < spines; ++s) {
      AddLink(t, absl::StrCat("sp", s), absl::StrCat("lf", l), options.link_gbps);
    }
  }
  for (int l = 0; l < leaves; ++l) {
    for (int h = 0; h < hosts_per_leaf; ++h) {
      std::string host = absl::StrCat("h", l, "_", h);
      t.hosts.push_back(Host{host, std::nullopt, std::nullopt});
      AddLink(t, absl::StrCat("lf", l), host, options.link_gbps);
    }
  }
  PlaceIna(t, leaf_indices, options);
  return t;
}

absl::StatusOr<Topology> GenerateStar(int hosts, const GeneratorOptions& options) {
  if (hosts < 1 || hosts > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("a star needs 1..1024 hosts; got ", hosts));
  }
  if (auto s = CheckOptions(options); !s.ok()) return s;
  Topology t;
  t.switches.push_back(Switch{"s0", {}, {}});
  for (int h = 0; h < hosts; ++h) {
    std::string host = absl::StrCat("h", h);
    t.hosts.push_back(Host{host, std::nullopt, std::nullopt});
    AddLink(t, "s0", host, options.link_gbps);
  }
  PlaceIna(t, {0}, options);
  return t;
}

}  // namespace inac::core
