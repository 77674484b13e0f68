// TreePlanner: one family's column generation of the trees algorithm (scheduler/routing/trees.h
// describes the algorithm). Internal to scheduler/routing/: TreeRouting::Route (trees.cc) runs
// one planner per family. The master LP, the kept trees and their realisation are in trees.cc;
// the pricing (candidate trees under given prices, the shards' streams, the chains' parents) in
// tree_pricing.cc; the path helpers in tree_paths.h.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/lp/linear_program.h"
#include "scheduler/memory/aggregator_model.h"
#include "scheduler/routing/routing_algorithm.h"
#include "scheduler/routing/tree_paths.h"

namespace inac::scheduler::trees_internal {

inline constexpr int kMaxFanIn = 64;  // ina.p4's input bitmap
// Objective weight of a tree's arc load per unit of its rate (negative): among plans of equal
// rates the LP keeps the one that loads the links least, so a job leaves room for the next
// (1e-10 per Gbps-hop: far below what would trade any rate).
inline constexpr double kLoadCost = 1e-10;
// A tree kept in the plan carries at least this share of its shard (the largest always): every
// tree is a tag with entries on each switch it uses and a window on each aggregating switch, and
// a tiny tag's window is mostly rounding.
inline constexpr double kMinTreeShare = 0.005;
// Work units (arc relaxations and worker scans) the pricing rounds of one family may take.
inline constexpr double kWorkPerPlan = 1e8;

enum class Family { kSingle, kChains };

// One shard: a (job, PS) pair.
struct Shard {
  int job = -1;              // index into network.input().jobs
  int ps = -1;               // PS node
  std::vector<int> workers;  // worker nodes that send over the network (not the PS itself)
  std::vector<int> local;    // workers that are this PS (send nothing)
  // Stream of each aggregating switch, fixed at first use: its path and its parent (-1: the PS).
  std::map<int, std::vector<int>> stream_arcs;
  std::map<int, int> parent;
  int cov_row = -1;
  int share_col = -1;
};

struct Tree {
  int shard = -1;
  std::vector<int> agg;                      // per shard worker: node (switch or the PS)
  std::vector<std::vector<int>> arcs;        // per shard worker: path to agg
  std::vector<int> active;                   // aggregating switches, sorted
  std::vector<std::pair<int, double>> load;  // resource row -> coefficient per unit rate
  int column = -1;
};

class TreePlanner {
 public:
  TreePlanner(const Network& net, Family family);

  absl::StatusOr<RoutingResult> Run();

  int iterations() const { return iterations_; }
  int num_trees() const { return static_cast<int>(trees_.size()); }
  double objective() const { return objective_; }
  int lp_rows() const { return lp_rows_; }
  int lp_columns() const { return lp_columns_; }

 private:
  class ShardPricer;  // one shard's pricing (tree_pricing.cc)

  // --- Run's steps (trees.cc). ---
  void BuildShards(int n_jobs);
  // The first trees, priced with utilisation costs; returns those costs per resource row.
  std::vector<double> AddInitialTrees();
  // The number of pricing rounds the work budget allows.
  int MaxIterations() const;
  // One pricing round under the duals of `sol`: adds the trees below their shard's price and
  // returns how many.
  int PricingRound(const lp::Solution& sol, const std::vector<double>& util);

  // --- Rows: per job a fairness row, per shard a coverage row, then one row per resource (every
  // network resource with positive residual, and with a memory policy one per INA switch's
  // aggregators) (trees.cc). ---
  void BuildRows(int n_jobs);
  double RowCapacity(int r) const;
  double MeanCapacity() const;
  // Σ over the tree's arcs of its load per unit rate.
  double ArcLoad(const Tree& t) const;

  // --- The master LP and the realisation (trees.cc). ---
  // Adds a tree unless an equal one exists; true when added.
  bool AddTree(Tree t);
  absl::StatusOr<lp::Solution> Solve(const std::vector<char>* restrict_to);
  void BuildMaster();
  void KeepTrees(const lp::Solution& sol, std::vector<char>* keep);
  absl::StatusOr<RoutingResult> Realise(const lp::Solution& sol, const std::vector<char>& keep);
  void RealiseShard(const lp::Solution& sol, int s, const std::vector<int>& list, double total,
                    RoutedJob* rj) const;

  // --- Pricing, streams and chains (tree_pricing.cc). ---
  double HoldUs(int v, const std::vector<int>& route_arcs) const;
  int CandidateCount(const Shard& sh) const;
  void ComputeParents();
  std::vector<Tree> Price(int s, const std::vector<double>& steer, const std::vector<double>& cost);
  double MemoryCoefficient(int s, int v);
  std::vector<int> StreamRoute(int s, int v);
  void FinishTree(Tree* t);
  const std::vector<int>& Stream(int s, int v, int* parent);

  const Network& net_;
  const core::Graph& g_;
  Family family_;
  std::optional<MemoryPolicy> policy_;
  std::vector<std::vector<int>> in_arcs_;
  std::vector<Shard> shards_;
  std::vector<Tree> trees_;
  std::set<std::vector<int64_t>> seen_;
  std::vector<int> rows_resource_;  // LP resource row -> network resource, or -1 - switch (memory)
  std::vector<int> resource_row_;   // network resource -> resource row index
  std::vector<int> mem_row_;        // switch -> memory row index, -1 if none
  int first_resource_row_ = 0;
  std::map<int, std::vector<int>> parents_of_ps_;
  std::map<int, std::map<int, int>> parent_of_ps_;
  std::map<int, std::map<int, int>> stream_arc_use_;  // per shard: streams per arc
  std::vector<double> share_value_;
  mutable double mean_capacity_ = 0;
  std::unique_ptr<lp::ColumnGenerationLp> master_;
  int t_col_ = -1;
  int iterations_ = 0;
  int price_round_ = 0;  // bumped whenever the prices change (the distance cache's key)
  int cache_round_ = -1;
  std::map<int, ToTarget> dist_cache_;
  double objective_ = 0;
  int lp_rows_ = 0;
  int lp_columns_ = 0;
};

}  // namespace inac::scheduler::trees_internal
