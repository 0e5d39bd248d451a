// How the CPU model hands values of mixed layouts (value.h Layout) to a kernel, by what the
// kernel accepts (cpu::LayoutSupport), and how it labels the kernel's outputs.
//
// Thread-safety: pure functions over the caller's values.
#pragma once

#include <vector>

#include "engine/cpu/ops.h"
#include "engine/value.h"

namespace tessera::engine {

// What AdaptInputLayouts decided, for LabelOutputLayouts.
struct KernelLayout {
  // An element-wise kernel ran on channels-last inputs of one shape: its outputs are too.
  bool outputs_channels_last = false;
  // An element-wise kernel ran on [N, H, W, C] bytes, with per-image-and-channel operands
  // broadcast over them: its outputs are channels-last values of this shape. Null otherwise.
  const Shape* broadcast_shape = nullptr;
};

// Called when some input is channels-last. For a kernel that reads only row-major values, the
// channels-last inputs are replaced by row-major copies (one transpose each). For an element-wise
// kernel they are kept when all non-scalar inputs are channels-last and of one shape. They are
// also kept when the other inputs vary only per image and channel ([N or 1, C or 1, 1, 1]: a
// squeeze-excitation gate, a per-channel scale); then every input is replaced by a view of its
// bytes as [N, H, W, C] or [N or 1, 1, 1, C or 1], which broadcast alike. `*storage` holds the
// copies and views; `*inputs` then points into it. Copies are split over `pool` (may be null).
KernelLayout AdaptInputLayouts(cpu::LayoutSupport support, cpu::Inputs* inputs,
                               std::vector<Value>* storage, ThreadPool* pool);

// Labels the kernel's outputs as `layout` says.
void LabelOutputLayouts(const KernelLayout& layout, std::vector<Value>* outputs);

}  // namespace tessera::engine
