#include "scheduler/routing/search_load.h"

#include <algorithm>
#include <cmath>

#include "scheduler/model/flow_model.h"

namespace inac::scheduler {

double UnitLoads::Ratio(int r, double u) const {
  if (u <= 1e-15) return 0;
  return res_[r] > 0 ? u / res_[r] : kUnbounded;
}

void UnitLoads::Bump(int r, double x) {
  if (unit_[r] == 0 && x > 0) touched_.push_back(r);
  unit_[r] += x;
  if (std::abs(unit_[r]) < 1e-12) unit_[r] = 0;
}

double UnitLoads::MaxRatio(int* count_at_max) const {
  double top = 0;
  for (int r : touched_) top = std::max(top, Ratio(r, unit_[r]));
  *count_at_max = 0;
  for (int r : touched_) {
    if (Ratio(r, unit_[r]) >= top * (1 - 1e-9)) ++*count_at_max;
  }
  return top;
}

bool UnitLoads::Bottleneck(double* top, double* limit, std::vector<char>* in_b) const {
  *top = 0;
  for (int r : touched_) *top = std::max(*top, Ratio(r, unit_[r]));
  if (*top <= 0 || std::isinf(*top)) return false;
  *limit = *top * (1 - 1e-9);
  in_b->assign(unit_.size(), 0);
  for (int r : touched_) {
    if (Ratio(r, unit_[r]) >= *limit) (*in_b)[r] = 1;
  }
  return true;
}

bool UnitLoads::Improves(const LoadDelta& d, const std::vector<char>& in_b, double limit,
                         double* score) const {
  bool relieves = false;
  *score = 0;
  for (const auto& [r, v] : d) {
    if (std::abs(v) < 1e-12) continue;
    double after = Ratio(r, unit_[r] + v);
    if (v > 0) {
      if (after >= limit) return false;
      *score = std::max(*score, after);
    } else if (in_b[r] && after < limit) {
      relieves = true;
    }
  }
  return relieves;
}

bool UnitLoads::MoveStream(const Network& net, const std::vector<Path>& paths, double x,
                           const std::vector<char>& in_b, double limit, int* q) {
  bool touches = false;
  for (int a : paths[*q].arcs) touches |= in_b[net.ArcResource(a)] != 0;
  if (!touches) return false;
  int best = -1;
  double best_score = limit;
  for (size_t q2 = 0; q2 < paths.size(); ++q2) {
    if (static_cast<int>(q2) == *q) continue;
    LoadDelta d;
    for (int a : paths[*q].arcs) d[net.ArcResource(a)] -= x;
    for (int a : paths[q2].arcs) d[net.ArcResource(a)] += x;
    double score;
    if (Improves(d, in_b, limit, &score) && score < best_score) {
      best = static_cast<int>(q2);
      best_score = score;
    }
  }
  if (best < 0) return false;
  for (int a : paths[*q].arcs) Bump(net.ArcResource(a), -x);
  for (int a : paths[best].arcs) Bump(net.ArcResource(a), x);
  *q = best;
  return true;
}

}  // namespace inac::scheduler
