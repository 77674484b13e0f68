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

#include <limits>
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
  double objective = 0;
  std::vector<double> values;  // per column; empty without a solution
  // MIP only: the best bound proven by branch and bound (equal to objective when optimal).
  double best_bound = 0;
};

// Solves the LP relaxation with CLP. Internal when CLP fails unexpectedly; infeasible/unbounded
// models are reported in Solution::status, not as errors.
absl::StatusOr<Solution> SolveLp(const LinearProgram& program, double time_limit_s);

// Two stages on one CLP model: solves `program`, then keeps its objective within a relative
// `tolerance` of the optimum (one extra row) and minimises Σ secondary[c] · x[c] from the optimal
// basis (warm-started primal simplex). `first` is the first stage's solution; `second_values` the
// second stage's primal values (empty when the second stage did not reach optimality, or the
// first was not optimal).
struct TwoStageSolution {
  Solution first;
  std::vector<double> second_values;
};
absl::StatusOr<TwoStageSolution> SolveLpThenMinimize(const LinearProgram& program,
                                                     const std::vector<double>& secondary,
                                                     double tolerance, double time_limit_s);

// Solves the MIP with CBC. `start` (optional, may be empty) is a feasible solution handed to CBC
// as its first incumbent. `node_limit` > 0 stops branch and bound after that many nodes: unlike
// the wall-clock limit it gives the same result on every machine (CBC runs single-threaded).
absl::StatusOr<Solution> SolveMip(const LinearProgram& program, double time_limit_s,
                                  const std::vector<double>& start, int64_t node_limit = 0);

}  // namespace inac::scheduler::lp
