#include "scheduler/lp/linear_program.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>

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

// Row-major form of the triplets with repeated (row, column) entries summed.
struct RowMajor {
  std::vector<int> start;  // per row, into col/val; size rows + 1
  std::vector<int> col;
  std::vector<double> val;
};

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
  static const std::vector<int>& RowIndex(const LinearProgram& p) { return p.row_index_; }
  static const std::vector<int>& ColIndex(const LinearProgram& p) { return p.col_index_; }
  static const std::vector<double>& Elements(const LinearProgram& p) { return p.elements_; }
  static const std::vector<double>& ColUpper(const LinearProgram& p) { return p.col_upper_; }
  static const std::vector<double>& Objective(const LinearProgram& p) { return p.objective_; }
  static const std::vector<double>& RowLower(const LinearProgram& p) { return p.row_lower_; }
  static const std::vector<double>& RowUpper(const LinearProgram& p) { return p.row_upper_; }
  static const std::vector<char>& Integer(const LinearProgram& p) { return p.integer_; }
  static bool Maximize(const LinearProgram& p) { return p.maximize_; }
  static RowMajor Rows(const LinearProgram& p) {
    const int rows = p.num_rows();
    std::vector<int> order(p.elements_.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return p.row_index_[a] != p.row_index_[b] ? p.row_index_[a] < p.row_index_[b]
                                                : p.col_index_[a] < p.col_index_[b];
    });
    RowMajor m;
    std::vector<int> count(rows, 0);
    int last_row = -1, last_col = -1;
    for (int k : order) {
      const int r = p.row_index_[k];
      const int c = p.col_index_[k];
      if (r == last_row && c == last_col) {
        m.val.back() += p.elements_[k];
        continue;
      }
      m.col.push_back(c);
      m.val.push_back(p.elements_[k]);
      ++count[r];
      last_row = r;
      last_col = c;
    }
    m.start.assign(rows + 1, 0);
    for (int r = 0; r < rows; ++r) m.start[r + 1] = m.start[r] + count[r];
    return m;
  }
};

namespace {

// Column bounds with every infinite bound replaced, where the rows imply one, by that implied
// bound (activity-based bound tightening; finite declared bounds are kept as they are).
void ImpliedBounds(const LinearProgram& p, const RowMajor& m, std::vector<double>* lower,
                   std::vector<double>* upper) {
  using A = SolverAccess;
  *lower = A::ColLower(p);
  *upper = A::ColUpper(p);
  const std::vector<double>& rl = A::RowLower(p);
  const std::vector<double>& ru = A::RowUpper(p);
  auto relax = [](double v, int dir) { return v + dir * 1e-9 * std::max(1.0, std::abs(v)); };
  for (int pass = 0; pass < 8; ++pass) {
    bool changed = false;
    for (int r = 0; r < p.num_rows(); ++r) {
      // Finite parts of the smallest / largest activity, and how many entries are infinite.
      double min_sum = 0, max_sum = 0;
      int min_inf = 0, max_inf = 0;
      for (int k = m.start[r]; k < m.start[r + 1]; ++k) {
        const double a = m.val[k];
        const double lo = (*lower)[m.col[k]], hi = (*upper)[m.col[k]];
        if (a == 0) continue;
        const double vmin = a > 0 ? a * lo : a * hi;
        const double vmax = a > 0 ? a * hi : a * lo;
        if (std::isinf(vmin)) {
          ++min_inf;
        } else {
          min_sum += vmin;
        }
        if (std::isinf(vmax)) {
          ++max_inf;
        } else {
          max_sum += vmax;
        }
      }
      for (int k = m.start[r]; k < m.start[r + 1]; ++k) {
        const double a = m.val[k];
        const int c = m.col[k];
        if (a == 0) continue;
        const double lo = (*lower)[c], hi = (*upper)[c];
        const double vmin = a > 0 ? a * lo : a * hi;
        const double vmax = a > 0 ? a * hi : a * lo;
        // a·x_c <= ru - (smallest activity of the others).
        if (!std::isinf(ru[r]) && min_inf - (std::isinf(vmin) ? 1 : 0) == 0) {
          const double rest = min_sum - (std::isinf(vmin) ? 0 : vmin);
          const double v = (ru[r] - rest) / a;
          if (a > 0 && std::isinf((*upper)[c])) {
            (*upper)[c] = relax(v, +1);
            changed = true;
          } else if (a < 0 && std::isinf((*lower)[c])) {
            (*lower)[c] = relax(v, -1);
            changed = true;
          }
        }
        // a·x_c >= rl - (largest activity of the others).
        if (!std::isinf(rl[r]) && max_inf - (std::isinf(vmax) ? 1 : 0) == 0) {
          const double rest = max_sum - (std::isinf(vmax) ? 0 : vmax);
          const double v = (rl[r] - rest) / a;
          if (a > 0 && std::isinf((*lower)[c])) {
            (*lower)[c] = relax(v, -1);
            changed = true;
          } else if (a < 0 && std::isinf((*upper)[c])) {
            (*upper)[c] = relax(v, +1);
            changed = true;
          }
        }
      }
    }
    if (!changed) break;
  }
}

// max over v in [lo, hi] of s·v (+inf when unbounded in the improving direction).
double MaxLinear(double s, double lo, double hi) {
  if (s > 0) return std::isinf(hi) ? kInfinity : s * hi;
  if (s < 0) return std::isinf(lo) ? kInfinity : s * lo;
  return 0;
}

}  // namespace

std::optional<double> LagrangianBound(const LinearProgram& program,
                                      const std::vector<double>& row_duals) {
  using A = SolverAccess;
  if (static_cast<int>(row_duals.size()) != program.num_rows()) return std::nullopt;
  const RowMajor m = A::Rows(program);
  std::vector<double> lower, upper;
  ImpliedBounds(program, m, &lower, &upper);
  // In the maximisation sense: minimise c'x = -maximise (-c)'x.
  const double sense = A::Maximize(program) ? 1.0 : -1.0;
  const std::vector<double>& c = A::Objective(program);
  const std::vector<double>& rl = A::RowLower(program);
  const std::vector<double>& ru = A::RowUpper(program);
  // Each candidate with its safety margin against rounding: the sum of n terms is off by at most
  // about n·eps·Σ|term|, so 1e-10·Σ|term| (n up to 10^5) plus 1e-9 of the result.
  std::optional<double> best;
  for (double sign : {1.0, -1.0}) {
    std::vector<double> y(program.num_rows());
    double bound = 0, magnitude = 0;
    for (int r = 0; r < program.num_rows(); ++r) {
      y[r] = sign * row_duals[r];
      if (!std::isfinite(y[r])) y[r] = 0;
      double term = MaxLinear(y[r], rl[r], ru[r]);
      if (std::isinf(term)) {
        y[r] = 0;  // any multiplier is allowed; this one would make the bound infinite
        term = 0;
      }
      bound += term;
      magnitude += std::abs(term);
    }
    std::vector<double> d(program.num_columns());
    for (int j = 0; j < program.num_columns(); ++j) d[j] = sense * c[j];
    for (int r = 0; r < program.num_rows(); ++r) {
      if (y[r] == 0) continue;
      for (int k = m.start[r]; k < m.start[r + 1]; ++k) d[m.col[k]] -= y[r] * m.val[k];
    }
    for (int j = 0; j < program.num_columns() && !std::isinf(bound); ++j) {
      const double term = MaxLinear(d[j], lower[j], upper[j]);
      bound += term;
      magnitude += std::abs(term);
    }
    if (std::isinf(bound) || std::isnan(bound)) continue;
    const double safe = bound + 1e-10 * magnitude + 1e-9 * std::max(1.0, std::abs(bound));
    if (!best || safe < *best) best = safe;
  }
  if (!best) return std::nullopt;
  return sense * *best;
}

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

namespace {

// FNV-1a over the LP's structure: dimensions, sense, matrix triplets and objective. Row and column
// bounds are left out: a basis is a valid start for any bounds (the simplex repairs feasibility).
uint64_t Fnv(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

// The process-wide basis cache: the last optimal basis per structure key, at most kEntries
// (least recently stored dropped first). Guarded by a mutex: planners on several threads (the
// controller's loop and its background re-plan) share it.
constexpr size_t kBasisCacheEntries = 512;
std::mutex basis_mu;
std::list<uint64_t> basis_order;  // most recent first
std::map<uint64_t, std::pair<std::vector<unsigned char>, std::list<uint64_t>::iterator>> bases;

}  // namespace

uint64_t StructureKey(const LinearProgram& p) {
  using A = SolverAccess;
  uint64_t h = 1469598103934665603ULL;
  const int dims[3] = {p.num_rows(), p.num_columns(), A::Maximize(p) ? 1 : 0};
  h = Fnv(h, dims, sizeof(dims));
  const auto& rows = A::RowIndex(p);
  const auto& cols = A::ColIndex(p);
  const auto& vals = A::Elements(p);
  h = Fnv(h, rows.data(), rows.size() * sizeof(int));
  h = Fnv(h, cols.data(), cols.size() * sizeof(int));
  h = Fnv(h, vals.data(), vals.size() * sizeof(double));
  const auto& c = A::Objective(p);
  h = Fnv(h, c.data(), c.size() * sizeof(double));
  return h;
}

bool BasisCacheFind(uint64_t key, int size, std::vector<unsigned char>* basis) {
  std::lock_guard<std::mutex> lock(basis_mu);
  auto it = bases.find(key);
  if (it == bases.end() || static_cast<int>(it->second.first.size()) != size) return false;
  *basis = it->second.first;
  return true;
}

void BasisCacheStore(uint64_t key, std::vector<unsigned char> basis) {
  std::lock_guard<std::mutex> lock(basis_mu);
  auto it = bases.find(key);
  if (it != bases.end()) {
    basis_order.erase(it->second.second);
    bases.erase(it);
  }
  basis_order.push_front(key);
  bases[key] = {std::move(basis), basis_order.begin()};
  while (bases.size() > kBasisCacheEntries) {
    bases.erase(basis_order.back());
    basis_order.pop_back();
  }
}

namespace {
std::atomic<bool> warm_start_enabled{true};
}  // namespace

void SetWarmStartEnabled(bool enabled) { warm_start_enabled = enabled; }

void ClearBasisCache() {
  std::lock_guard<std::mutex> lock(basis_mu);
  bases.clear();
  basis_order.clear();
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

absl::StatusOr<Solution> SolveLp(const LinearProgram& program, double time_limit_s,
                                 const WarmStart& warm) {
  auto two = SolveLpThenMinimize(program, {}, 0, time_limit_s, warm);
  if (!two.ok()) return two.status();
  return std::move(two->first);
}

absl::StatusOr<TwoStageSolution> SolveLpThenMinimize(const LinearProgram& program,
                                                     const std::vector<double>& secondary,
                                                     double tolerance, double time_limit_s,
                                                     const WarmStart& warm, Simplex simplex) {
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
  const uint64_t key = StructureKey(program);
  std::vector<unsigned char> basis;
  const int basis_size = program.num_columns() + program.num_rows();
  if (warm.use && warm_start_enabled && BasisCacheFind(key, basis_size, &basis)) {
    // Warm start (no presolve: the basis belongs to the full model): dual simplex from the
    // stored basis (the bounds changed, the objective did not, so the basis stays dual
    // feasible); the primal retry below covers a dual simplex that gives up.
    model.copyinStatus(basis.data());
    model.dual(0);
    if (warm.stats != nullptr) ++warm.stats->warm_starts;
  } else {
    ClpSolve options;
    options.setPresolveType(ClpSolve::presolveOn);
    options.setSolveType(simplex == Simplex::kPrimal ? ClpSolve::usePrimal : ClpSolve::automatic);
    model.initialSolve(options);
    if (warm.stats != nullptr) ++warm.stats->cold_starts;
  }
  if (!model.isProvenOptimal() && !model.isProvenPrimalInfeasible() &&
      !model.isProvenDualInfeasible() && model.status() != 3) {
    model.primal();  // dual simplex can give up on degenerate models; retry with primal
  }
  if (model.isProvenOptimal()) {
    const unsigned char* status = model.statusArray();
    if (status != nullptr) {
      BasisCacheStore(key, std::vector<unsigned char>(
                               status, status + program.num_columns() + program.num_rows()));
    }
  }
  TwoStageSolution out;
  Solution& s = out.first;
  // Not optimal: the only bound is the weak-duality bound of the solver's last row duals (its
  // primal objective is a value some feasible point reaches, not a bound).
  auto dual_bound = [&]() -> std::optional<double> {
    const double* y = model.dualRowSolution();
    if (y == nullptr) return std::nullopt;
    return LagrangianBound(program, std::vector<double>(y, y + program.num_rows()));
  };
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
    s.best_bound = dual_bound();
  } else {
    s.status = SolveStatus::kNoSolution;
    s.best_bound = dual_bound();
    return out;
  }
  s.objective = model.objectiveValue();
  if (s.status == SolveStatus::kOptimal) s.best_bound = s.objective;
  const double* x = model.primalColumnSolution();
  s.values.assign(x, x + program.num_columns());
  if (s.status == SolveStatus::kOptimal) {
    if (const double* y = model.dualRowSolution(); y != nullptr) {
      s.row_duals.assign(y, y + program.num_rows());
    }
  }
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

struct ColumnGenerationLp::Model {
  ClpSimplex clp;
};

ColumnGenerationLp::ColumnGenerationLp(const LinearProgram& initial)
    : model_(std::make_unique<Model>()) {
  using A = SolverAccess;
  CoinPackedMatrix matrix = A::Matrix(initial);
  std::vector<double> cl = ToCoin(A::ColLower(initial)), cu = ToCoin(A::ColUpper(initial));
  std::vector<double> rl = ToCoin(A::RowLower(initial)), ru = ToCoin(A::RowUpper(initial));
  ClpSimplex& m = model_->clp;
  m.setLogLevel(0);
  m.messageHandler()->setLogLevel(0);
  m.loadProblem(matrix, cl.data(), cu.data(), A::Objective(initial).data(), rl.data(), ru.data());
  m.setOptimizationDirection(A::Maximize(initial) ? -1 : 1);
}

ColumnGenerationLp::~ColumnGenerationLp() = default;

int ColumnGenerationLp::AddColumn(double lower, double upper, double objective,
                                  const std::vector<int>& rows,
                                  const std::vector<double>& coefficients) {
  ClpSimplex& m = model_->clp;
  auto coin = [](double v) { return std::isinf(v) ? (v > 0 ? COIN_DBL_MAX : -COIN_DBL_MAX) : v; };
  m.addColumn(static_cast<int>(rows.size()), rows.data(), coefficients.data(), coin(lower),
              coin(upper), objective);
  return m.numberColumns() - 1;
}

void ColumnGenerationLp::SetColumnBounds(int column, double lower, double upper) {
  auto coin = [](double v) { return std::isinf(v) ? (v > 0 ? COIN_DBL_MAX : -COIN_DBL_MAX) : v; };
  model_->clp.setColumnBounds(column, coin(lower), coin(upper));
}

int ColumnGenerationLp::num_columns() const { return model_->clp.numberColumns(); }
int ColumnGenerationLp::num_rows() const { return model_->clp.numberRows(); }

absl::StatusOr<Solution> ColumnGenerationLp::Solve(double time_limit_s) {
  ClpSimplex& m = model_->clp;
  if (time_limit_s > 0) m.setMaximumSeconds(time_limit_s);
  if (!solved_) {
    ClpSolve options;
    options.setPresolveType(ClpSolve::presolveOff);
    options.setSolveType(ClpSolve::usePrimal);
    m.initialSolve(options);
    solved_ = true;
  } else {
    m.primal(1);  // from the current basis
  }
  if (!m.isProvenOptimal() && !m.isProvenPrimalInfeasible() && !m.isProvenDualInfeasible() &&
      m.status() != 3) {
    m.primal();
  }
  Solution s;
  if (m.isProvenOptimal()) {
    s.status = SolveStatus::kOptimal;
  } else if (m.isProvenPrimalInfeasible()) {
    s.status = SolveStatus::kInfeasible;
    return s;
  } else if (m.isProvenDualInfeasible()) {
    s.status = SolveStatus::kUnbounded;
    return s;
  } else if (m.status() == 3 && m.primalFeasible()) {
    s.status = SolveStatus::kFeasible;
  } else {
    s.status = SolveStatus::kNoSolution;
    return s;
  }
  s.objective = m.objectiveValue();
  if (s.status == SolveStatus::kOptimal) s.best_bound = s.objective;
  const double* x = m.primalColumnSolution();
  s.values.assign(x, x + m.numberColumns());
  if (s.status == SolveStatus::kOptimal) {
    if (const double* y = m.dualRowSolution(); y != nullptr) {
      s.row_duals.assign(y, y + m.numberRows());
    }
  }
  return s;
}

}  // namespace inac::scheduler::lp
