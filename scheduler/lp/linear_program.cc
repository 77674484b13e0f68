#include "scheduler/lp/linear_program.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "CbcModel.hpp"
#include "CbcStrategy.hpp"
#include "ClpSimplex.hpp"
#include "ClpSolve.hpp"
#include "CoinMessageHandler.hpp"
#include "CoinPackedMatrix.hpp"
#include "OsiClpSolverInterface.hpp"

namespace inac::scheduler::lp {
namespace {

double ToCoin(double v) {
  if (std::isinf(v)) return v > 0 ? COIN_DBL_MAX : -COIN_DBL_MAX;
  return v;
}

std::vector<double> ToCoin(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToCoin(v[i]);
  return out;
}

}  // namespace

class SolverAccess {
 public:
  static CoinPackedMatrix Matrix(const LinearProgram& p) {
    CoinPackedMatrix m(true, p.row_index_.data(), p.col_index_.data(), p.elements_.data(),
                       static_cast<CoinBigIndex>(p.elements_.size()));
    // Trailing empty rows/columns are not implied by the triplets.
    m.setDimensions(p.num_rows(), p.num_columns());
    return m;
  }
  static const LinearProgram& P(const LinearProgram& p) { return p; }
  static const std::vector<double>& ColLower(const LinearProgram& p) { return p.col_lower_; }
  static const std::vector<double>& ColUpper(const LinearProgram& p) { return p.col_upper_; }
  static const std::vector<double>& Objective(const LinearProgram& p) { return p.objective_; }
  static const std::vector<double>& RowLower(const LinearProgram& p) { return p.row_lower_; }
  static const std::vector<double>& RowUpper(const LinearProgram& p) { return p.row_upper_; }
  static const std::vector<char>& Integer(const LinearProgram& p) { return p.integer_; }
  static bool Maximize(const LinearProgram& p) { return p.maximize_; }
};

int LinearProgram::AddColumn(double lower, double upper, double objective) {
  col_lower_.push_back(lower);
  col_upper_.push_back(upper);
  objective_.push_back(objective);
  integer_.push_back(0);
  return num_columns() - 1;
}

void LinearProgram::SetInteger(int column) { integer_[column] = 1; }

int LinearProgram::AddRow(double lower, double upper, const std::vector<int>& columns,
                          const std::vector<double>& coefficients) {
  assert(columns.size() == coefficients.size());
  int row = num_rows();
  row_lower_.push_back(lower);
  row_upper_.push_back(upper);
  for (size_t i = 0; i < columns.size(); ++i) {
    if (coefficients[i] == 0) continue;
    row_index_.push_back(row);
    col_index_.push_back(columns[i]);
    elements_.push_back(coefficients[i]);
  }
  return row;
}

std::string SolveStatusName(SolveStatus status) {
  switch (status) {
    case SolveStatus::kOptimal:
      return "optimal";
    case SolveStatus::kFeasible:
      return "feasible";
    case SolveStatus::kInfeasible:
      return "infeasible";
    case SolveStatus::kUnbounded:
      return "unbounded";
    case SolveStatus::kNoSolution:
      return "no_solution";
  }
  return "unknown";
}

absl::StatusOr<Solution> SolveLp(const LinearProgram& program, double time_limit_s) {
  auto two = SolveLpThenMinimize(program, {}, 0, time_limit_s);
  if (!two.ok()) return two.status();
  return std::move(two->first);
}

absl::StatusOr<TwoStageSolution> SolveLpThenMinimize(const LinearProgram& program,
                                                     const std::vector<double>& secondary,
                                                     double tolerance, double time_limit_s) {
  using A = SolverAccess;
  CoinPackedMatrix matrix = A::Matrix(program);
  std::vector<double> cl = ToCoin(A::ColLower(program)), cu = ToCoin(A::ColUpper(program));
  std::vector<double> rl = ToCoin(A::RowLower(program)), ru = ToCoin(A::RowUpper(program));
  ClpSimplex model;
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.loadProblem(matrix, cl.data(), cu.data(), A::Objective(program).data(), rl.data(),
                    ru.data());
  model.setOptimizationDirection(A::Maximize(program) ? -1 : 1);
  if (time_limit_s > 0) model.setMaximumSeconds(time_limit_s);
  ClpSolve options;
  options.setPresolveType(ClpSolve::presolveOn);
  options.setSolveType(ClpSolve::automatic);
  model.initialSolve(options);
  if (!model.isProvenOptimal() && !model.isProvenPrimalInfeasible() &&
      !model.isProvenDualInfeasible() && model.status() != 3) {
    model.primal();  // dual simplex can give up on degenerate models; retry with primal
  }
  TwoStageSolution out;
  Solution& s = out.first;
  if (model.isProvenOptimal()) {
    s.status = SolveStatus::kOptimal;
  } else if (model.isProvenPrimalInfeasible()) {
    s.status = SolveStatus::kInfeasible;
    return out;
  } else if (model.isProvenDualInfeasible()) {
    s.status = SolveStatus::kUnbounded;
    return out;
  } else if (model.status() == 3 && model.primalFeasible()) {
    s.status = SolveStatus::kFeasible;
  } else {
    s.status = SolveStatus::kNoSolution;
    return out;
  }
  s.objective = model.objectiveValue();
  s.best_bound = s.objective;
  const double* x = model.primalColumnSolution();
  s.values.assign(x, x + program.num_columns());
  if (secondary.empty() || s.status != SolveStatus::kOptimal) return out;

  // Stage 2: objective row, new objective, primal simplex from the current basis.
  const std::vector<double>& c = A::Objective(program);
  std::vector<int> idx;
  std::vector<double> val;
  for (int j = 0; j < program.num_columns(); ++j) {
    if (c[j] != 0) {
      idx.push_back(j);
      val.push_back(c[j]);
    }
  }
  double slack = tolerance * std::max(1.0, std::abs(s.objective));
  if (A::Maximize(program)) {
    model.addRow(static_cast<int>(idx.size()), idx.data(), val.data(), s.objective - slack,
                 COIN_DBL_MAX);
  } else {
    model.addRow(static_cast<int>(idx.size()), idx.data(), val.data(), -COIN_DBL_MAX,
                 s.objective + slack);
  }
  for (int j = 0; j < program.num_columns(); ++j) {
    model.setObjectiveCoefficient(j, j < static_cast<int>(secondary.size()) ? secondary[j] : 0.0);
  }
  model.setOptimizationDirection(1);
  model.primal(1);
  if (model.isProvenOptimal()) {
    const double* y = model.primalColumnSolution();
    out.second_values.assign(y, y + program.num_columns());
  }
  return out;
}

absl::StatusOr<Solution> SolveMip(const LinearProgram& program, double time_limit_s,
                                  const std::vector<double>& start, int64_t node_limit) {
  using A = SolverAccess;
  CoinPackedMatrix matrix = A::Matrix(program);
  std::vector<double> cl = ToCoin(A::ColLower(program)), cu = ToCoin(A::ColUpper(program));
  std::vector<double> rl = ToCoin(A::RowLower(program)), ru = ToCoin(A::RowUpper(program));
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.getModelPtr()->setLogLevel(0);
  solver.loadProblem(matrix, cl.data(), cu.data(), A::Objective(program).data(), rl.data(),
                     ru.data());
  solver.setObjSense(A::Maximize(program) ? -1 : 1);
  const std::vector<char>& integer = A::Integer(program);
  for (int c = 0; c < program.num_columns(); ++c) {
    if (integer[c]) solver.setInteger(c);
  }
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.solver()->messageHandler()->setLogLevel(0);
  if (time_limit_s > 0) model.setMaximumSeconds(time_limit_s);
  if (node_limit > 0)
    model.setMaximumNodes(static_cast<int>(std::min<int64_t>(node_limit, INT32_MAX)));
  model.setNumberThreads(0);
  // CBC's default strategy: its standard cut generators (probing, Gomory, knapsack cover,
  // clique, flow cover, MIR) at the root and its primal heuristics; no preprocessing (which
  // would have to map the start solution).
  CbcStrategyDefault strategy(1, 5, 5);
  strategy.setupPreProcessing(0);
  model.setStrategy(strategy);
  if (static_cast<int>(start.size()) == program.num_columns()) {
    // check = true: CBC verifies feasibility and computes the objective itself.
    model.setBestSolution(start.data(), program.num_columns(), COIN_DBL_MAX, true);
  }
  model.branchAndBound();
  Solution s;
  const double* best = model.bestSolution();
  if (model.isProvenInfeasible()) {
    s.status = SolveStatus::kInfeasible;
    return s;
  }
  if (best == nullptr) {
    s.status = SolveStatus::kNoSolution;
    return s;
  }
  s.status = model.isProvenOptimal() ? SolveStatus::kOptimal : SolveStatus::kFeasible;
  s.values.assign(best, best + program.num_columns());
  s.objective = 0;
  const std::vector<double>& c = A::Objective(program);
  for (size_t i = 0; i < s.values.size(); ++i) s.objective += c[i] * s.values[i];
  s.best_bound = model.getBestPossibleObjValue();  // in the model's sense
  if (s.status == SolveStatus::kOptimal) s.best_bound = s.objective;
  return s;
}

}  // namespace inac::scheduler::lp
