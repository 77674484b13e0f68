// A small linear / mixed-integer program builder and its solvers: COIN-OR CLP (dual simplex) for
// LPs and COIN-OR CBC (branch and cut over OsiClpSolverInterface) for MIPs. No hand-written
// simplex. The model is built sparsely (rows as (column, coefficient) lists) and handed to the
// solver as one CoinPackedMatrix.
//
// Determinism: CLP is deterministic for a given model. The time limits are wall-clock time inside
// the solver (the only clock the scheduler touches, and only through COIN-OR): an LP stopped by
// its limit, or a MIP not proven optimal within its limit, may differ between runs. Solvers print
// nothing (log level 0). Not thread-safe per instance; separate instances are independent.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace inac::scheduler::lp {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

class LinearProgram {
 public:
  // Adds a column (variable) lower <= x <= upper with objective coefficient `objective`; returns
  // its index. Bounds may be ±kInfinity.
  int AddColumn(double lower, double upper, double objective);
  // Marks a column integer (MIP only; SolveLp ignores it).
  void SetInteger(int column);
  // Adds a row lower <= Σ coefficients[i] · x[columns[i]] <= upper; returns its index. Repeated
  // columns are summed. Precondition: columns.size() == coefficients.size(), indices valid.
  int AddRow(double lower, double upper, const std::vector<int>& columns,
             const std::vector<double>& coefficients);
  void SetMaximize(bool maximize) { maximize_ = maximize; }
  void SetObjective(int column, double objective) { objective_[column] = objective; }
  void SetColumnBounds(int column, double lower, double upper) {
    col_lower_[column] = lower;
    col_upper_[column] = upper;
  }

  int num_columns() const { return static_cast<int>(col_lower_.size()); }
  int num_rows() const { return static_cast<int>(row_lower_.size()); }
  int64_t num_elements() const { return static_cast<int64_t>(elements_.size()); }

 private:
  friend class SolverAccess;
  bool maximize_ = false;
  std::vector<double> col_lower_, col_upper_, objective_;
  std::vector<char> integer_;
  std::vector<double> row_lower_, row_upper_;
  std::vector<int> row_index_, col_index_;
  std::vector<double> elements_;
};

enum class SolveStatus {
  kOptimal,   // proven optimal
  kFeasible,  // a solution, not proven optimal (time limit hit)
  kInfeasible,
  kUnbounded,
  kNoSolution,  // limit hit before any feasible solution
};

std::string SolveStatusName(SolveStatus status);

struct Solution {
  SolveStatus status = SolveStatus::kNoSolution;
  double objective = 0;        // of `values` (a primal point): never a bound unless kOptimal
  std::vector<double> values;  // per column; empty without a solution
  // The best PROVEN bound on the optimum (maximise: an upper bound; minimise: a lower bound).
  // kOptimal: the objective. An LP stopped by its time limit: the weak-duality bound of the
  // solver's last row duals (LagrangianBound), nullopt when that is not finite. A MIP: CBC's best
  // possible objective. nullopt when nothing is proven (infeasible, unbounded, no solution).
  std::optional<double> best_bound;
  // Shadow prices of the rows when an LP is solved to optimality (SolveLp only; empty otherwise):
  // the rate at which the optimum rises as row i's bounds are relaxed, in the objective's own
  // sense (maximise: >= 0 on a binding upper bound, <= 0 on a binding lower bound). Column
  // generation prices new columns with them: a column c improves the optimum when
  // objective_c - Σ_i row_duals[i] · a_ic > 0 (maximise).
  std::vector<double> row_duals;
};

// A bound on the optimum of `program` (maximise: upper; minimise: lower) from ANY row multipliers
// `row_duals` (one per row), by weak duality (Lagrangian relaxation of the rows):
//   max c'x  <=  Σ_i max_{v in [rl_i, ru_i]} y_i·v  +  Σ_j max_{x_j in [l_j, u_j]} (c - A'y)_j·x_j
// valid for every y, whatever the solver's state or sign convention, because every feasible x
// satisfies rl <= Ax <= ru and l <= x <= u. Infinite column bounds are first replaced by bounds the
// rows imply (up to 8 passes of activity-based bound tightening, relaxed by 1e-9 relative); a
// multiplier whose row term would be infinite is set to 0. Both y and -y are tried (solvers differ
// in the sign of a maximisation's duals); the smaller (maximise) finite result is returned, with a
// safety margin against rounding (1e-10 of the sum of the terms' magnitudes plus 1e-9 of the
// result), nullopt when neither is finite. O(passes · nnz).
std::optional<double> LagrangianBound(const LinearProgram& program,
                                      const std::vector<double>& row_duals);

// Solves the LP relaxation with CLP. Internal when CLP fails unexpectedly; infeasible/unbounded
// models are reported in Solution::status, not as errors. Stopped by `time_limit_s`: kFeasible
// with the last primal point when it is primal feasible (its objective is NOT a bound), otherwise
// kNoSolution; in both cases best_bound is the LagrangianBound of the last row duals, or nullopt.
// Warm start. Every LP solved to optimality stores its optimal basis in a
// process-wide cache keyed by StructureKey -- the program's dimensions, sense, matrix and
// objective, NOT its row and column bounds -- (at most 512 structures, least recently stored
// dropped; thread-safe). A solve with `use` set starts from the stored basis of its structure,
// when there is one, with CLP's dual simplex (no presolve), instead of a cold presolved solve:
// it applies when the same LP is solved again with other bounds -- e.g. a job's routing LP over
// the residual capacities and its standalone bound over the full capacities (same candidates),
// or the same job's LP in the next re-plan when its candidates did not change. The optimum VALUE
// is the same either way (up to CLP's tolerances); the optimal POINT of a degenerate LP may
// differ, which is why callers enable it only where they use the optimum's value (the routing's
// standalone bounds), so that plans stay deterministic for their inputs.
struct WarmStartStats {
  int64_t warm_starts = 0;
  int64_t cold_starts = 0;
};
struct WarmStart {
  bool use = false;
  WarmStartStats* stats = nullptr;  // not owned; nullable: counts warm and cold starts
};
uint64_t StructureKey(const LinearProgram& program);
bool BasisCacheFind(uint64_t key, int size, std::vector<unsigned char>* basis);
void BasisCacheStore(uint64_t key, std::vector<unsigned char> basis);
void ClearBasisCache();
// Process-wide switch (default on; benchmarks compare both): off, WarmStart::use is ignored.
void SetWarmStartEnabled(bool enabled);

absl::StatusOr<Solution> SolveLp(const LinearProgram& program, double time_limit_s,
                                 const WarmStart& warm = {});

// How a cold (not warm-started) solve runs: kAutomatic is CLP's choice after presolve (the dual
// simplex on INAC's LPs); kPrimal the primal simplex after presolve. The optimum value is the
// same; the optimal point of a degenerate LP may differ, and so may the time: grid-split's
// per-job LPs (max-min λ, 1,400-3,300 columns) take 100-1,300 ms with the dual simplex and
// 6-60 ms with the primal one (docs/routing.md).
enum class Simplex { kAutomatic, kPrimal };

// Two stages on one CLP model: solves `program`, then keeps its objective within a relative
// `tolerance` of the optimum (one extra row) and minimises Σ secondary[c] · x[c] from the optimal
// basis (warm-started primal simplex). `first` is the first stage's solution; `second_values` the
// second stage's primal values (empty when the second stage did not reach optimality, or the
// first was not optimal). `simplex`: how the first stage runs when it is not warm-started.
struct TwoStageSolution {
  Solution first;
  std::vector<double> second_values;
};
absl::StatusOr<TwoStageSolution> SolveLpThenMinimize(const LinearProgram& program,
                                                     const std::vector<double>& secondary,
                                                     double tolerance, double time_limit_s,
                                                     const WarmStart& warm = {},
                                                     Simplex simplex = Simplex::kAutomatic);

// Solves the MIP with CBC. `start` (optional, may be empty) is a feasible solution handed to CBC
// as its first incumbent. `node_limit` > 0 stops branch and bound after that many nodes: unlike
// the wall-clock limit it gives the same result on every machine (CBC runs single-threaded).
// A master LP for column generation: the rows of `initial` (and its columns) are loaded once;
// columns are added between solves and every solve continues from the previous basis with the
// primal simplex (new columns keep the last point primal feasible), which is what makes repeated
// pricing rounds cheap. Solutions as SolveLp's (row_duals when optimal). Not thread-safe.
class ColumnGenerationLp {
 public:
  explicit ColumnGenerationLp(const LinearProgram& initial);
  ~ColumnGenerationLp();
  ColumnGenerationLp(const ColumnGenerationLp&) = delete;
  ColumnGenerationLp& operator=(const ColumnGenerationLp&) = delete;
  // Adds a column lower <= x <= upper with `objective` and entries (rows[i], coefficients[i]);
  // returns its index. Precondition: valid row indices, equal sizes.
  int AddColumn(double lower, double upper, double objective, const std::vector<int>& rows,
                const std::vector<double>& coefficients);
  void SetColumnBounds(int column, double lower, double upper);
  int num_columns() const;
  int num_rows() const;
  absl::StatusOr<Solution> Solve(double time_limit_s);

 private:
  struct Model;
  std::unique_ptr<Model> model_;
  bool solved_ = false;
};

absl::StatusOr<Solution> SolveMip(const LinearProgram& program, double time_limit_s,
                                  const std::vector<double>& start, int64_t node_limit = 0);

}  // namespace inac::scheduler::lp
