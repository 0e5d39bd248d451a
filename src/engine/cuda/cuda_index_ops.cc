// CUDA ops: integer arithmetic, comparisons and logic, CumSum, Split (see cuda_ops.h for the plan/launch split).
#include <map>

#include "engine/cuda/cuda_ops.h"

namespace tessera::engine::cuda {

const CudaOpDef* FindIndexOp(const std::string& op_type) {
  static const auto* const kOps = new std::map<std::string, CudaOpDef>{};
  auto it = kOps->find(op_type);
  return it == kOps->end() ? nullptr : &it->second;
}

}  // namespace tessera::engine::cuda
