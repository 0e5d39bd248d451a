// The first step of a CPU load: a file's graph imported, checked node by node against the CPU
// kernels, and through the graph passes. The CUDA backend starts from the same graph.
#pragma once

#include <string>
#include <vector>

#include "engine/graph.h"
#include "tessera/common/status.h"

namespace tessera::engine {

// Everything about a file that does not depend on the ModelOptions but the initializers kept as
// inputs (`kept`: ModelOptions::overridable_initializers). Errors name the path: the import's,
// INVALID_ARGUMENT for nodes that break their operator's spec, UNIMPLEMENTED listing every node
// the kernels cannot run.
StatusOr<Graph> PrepareCpuGraph(const std::string& path, const std::vector<std::string>& kept);

}  // namespace tessera::engine
