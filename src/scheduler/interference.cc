// The factor part of the interference model (seed 001 §4.4). The fitting, file and CSV functions
// of interference.h live with the profile tools (branch sched-profiles); this file holds only what
// the planners need to evaluate a plan, so the two can be merged by keeping the fuller file.
#include "tessera/scheduler/interference.h"

#include <algorithm>

namespace tessera::scheduler {

InterferenceModel InterferenceModel::None() { return InterferenceModel(); }

InterferenceModel InterferenceModel::Constant(double slowdown) {
  InterferenceModel model;
  model.kind_ = Kind::kConstant;
  model.constant_ = std::max(1.0, slowdown);
  return model;
}

InterferenceModel InterferenceModel::Linear(InterferenceCoefficients coefficients) {
  InterferenceModel model;
  model.kind_ = Kind::kLinear;
  model.coefficients_ = coefficients;
  return model;
}

double InterferenceModel::Factor(double l2_self, double dram_self, double l2_other,
                                 double dram_other) const {
  switch (kind_) {
    case Kind::kNone:
      return 1;
    case Kind::kConstant:
      return constant_;
    case Kind::kLinear: {
      const InterferenceCoefficients& c = coefficients_;
      // seed 001 §4.4: c1·L2_self + c2·L2_other + c3·DRAM_self + c4·DRAM_other + c5, a slowdown
      // and therefore never below 1 (the artifact clamps the same way).
      const double f = c.l2_self * l2_self + c.l2_other * l2_other + c.dram_self * dram_self +
                       c.dram_other * dram_other + c.constant;
      return std::max(1.0, f);
    }
  }
  return 1;
}

double InterferenceModel::Factor(const ModelProfile& self, int self_batch, int self_partition_pct,
                                 const ModelProfile& other, int other_batch,
                                 int other_partition_pct) const {
  if (kind_ != Kind::kLinear) return Factor(0, 0, 0, 0);
  return Factor(self.L2Util(self_batch, self_partition_pct),
                self.DramUtil(self_batch, self_partition_pct),
                other.L2Util(other_batch, other_partition_pct),
                other.DramUtil(other_batch, other_partition_pct));
}

}  // namespace tessera::scheduler
