// Numpy-broadcast iteration shared by the element-wise kernels (binary arithmetic, comparisons,
// Where, Max/Min, Expand).
//
// BroadcastRows walks the output of a broadcast as rows: it first coalesces adjacent dims that
// every operand walks contiguously (or all broadcast), so the common cases collapse to one long
// row (equal shapes), a row against a scalar, or [rows, inner] against a trailing-dim operand
// ([b, s, 768] + [768]). The row callback gets per-operand offsets and an inner stride of 0 or 1,
// which lets it write a tight loop the compiler vectorises. Rows (or chunks of a single long row)
// are spread over the ThreadPool when there is enough work.
// Thread-safety: the callback runs concurrently on disjoint output ranges.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "engine/cpu/ops.h"
#include "engine/thread_pool.h"
#include "tessera/common/tensor.h"

namespace tessera::engine::cpu {

// Elements per parallel task for cheap element-wise loops; below two of these we stay inline.
inline constexpr int64_t kElementwiseGrain = 1 << 15;

// Runs fn(begin, end) over [0, total) in chunks of about kElementwiseGrain elements.
template <typename Fn>
void ParallelChunks(ThreadPool* pool, int64_t total, Fn fn) {
  const int64_t tasks = std::max<int64_t>(1, total / kElementwiseGrain);
  if (tasks == 1) {
    fn(int64_t{0}, total);
    return;
  }
  ParallelFor(pool, tasks, [&](int64_t t) { fn(total * t / tasks, total * (t + 1) / tasks); });
}

// out[i] = f(in[i]) over a whole value, into the node's output 0 typed `out_dtype`: the unary
// element-wise kernels.
template <typename In, typename Out, typename F>
Value MapElements(const OpContext& ctx, const Value& x, DataType out_dtype, F f) {
  Value y = ctx.NewOutput(0, out_dtype, x.shape());
  const In* in = x.data<In>();
  Out* out = y.mutable_data<Out>();
  ParallelChunks(ctx.pool, x.num_elements(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = f(in[i]);
  });
  return y;
}

// Per-operand element strides of `shape` seen as broadcast to `out` (0 on broadcast dims).
inline std::vector<int64_t> BroadcastStrides(const Shape& shape, const Shape& out) {
  const int rank = static_cast<int>(out.size());
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    const int od = d + rank - static_cast<int>(shape.size());
    strides[od] = shape[d] == 1 ? 0 : stride;
    stride *= shape[d];
  }
  return strides;
}

// Calls row(out_offset, offsets, inner_strides, length) for every row of `out`; each
// inner_strides[i] is 0 (operand i is constant along the row) or 1. Every shape in `shapes` must
// broadcast to `out` (the caller checked with BroadcastShapes).
template <size_t N, typename RowFn>
void BroadcastRows(const std::array<const Shape*, N>& shapes, const Shape& out, ThreadPool* pool,
                   RowFn row) {
  const int64_t total = ElementCount(out);
  if (total == 0) return;
  std::array<std::vector<int64_t>, N> full;
  for (size_t i = 0; i < N; ++i) full[i] = BroadcastStrides(*shapes[i], out);
  // Coalesce, innermost first; size-1 output dims are dropped (every operand has stride 0 there).
  Shape dims;                                   // innermost first
  std::array<std::vector<int64_t>, N> strides;  // innermost first
  for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
    if (out[d] == 1) continue;
    bool merge = !dims.empty();
    for (size_t i = 0; merge && i < N; ++i) {
      merge = full[i][d] == strides[i].back() * dims.back();
    }
    if (merge) {
      dims.back() *= out[d];
    } else {
      dims.push_back(out[d]);
      for (size_t i = 0; i < N; ++i) strides[i].push_back(full[i][d]);
    }
  }
  if (dims.empty()) {  // every dim is 1: a single element
    dims.push_back(1);
    for (size_t i = 0; i < N; ++i) strides[i].push_back(0);
  }
  // The inner stride must be 0 or 1 for the callback; otherwise iterate with an inner dim of 1.
  bool unit_inner = true;
  for (size_t i = 0; i < N; ++i) unit_inner = unit_inner && strides[i][0] <= 1;
  if (!unit_inner) {
    dims.insert(dims.begin(), 1);
    for (size_t i = 0; i < N; ++i) strides[i].insert(strides[i].begin(), 0);
  }
  const int64_t inner = dims[0];
  const int64_t rows = total / inner;
  std::array<int64_t, N> inner_strides;
  for (size_t i = 0; i < N; ++i) inner_strides[i] = strides[i][0];
  if (rows == 1) {
    // One long row: split it into chunks.
    ParallelChunks(pool, inner, [&](int64_t begin, int64_t end) {
      std::array<int64_t, N> offsets;
      for (size_t i = 0; i < N; ++i) offsets[i] = begin * inner_strides[i];
      row(begin, offsets, inner_strides, end - begin);
    });
    return;
  }
  const int64_t rows_per_task = std::max<int64_t>(1, kElementwiseGrain / inner);
  const int64_t tasks = (rows + rows_per_task - 1) / rows_per_task;
  auto run_rows = [&](int64_t t) {
    const int64_t end = std::min(rows, (t + 1) * rows_per_task);
    for (int64_t r = t * rows_per_task; r < end; ++r) {
      std::array<int64_t, N> offsets{};
      int64_t rest = r;
      for (size_t d = 1; d < dims.size(); ++d) {
        const int64_t c = rest % dims[d];
        rest /= dims[d];
        for (size_t i = 0; i < N; ++i) offsets[i] += c * strides[i][d];
      }
      row(r * inner, offsets, inner_strides, inner);
    }
  };
  if (tasks == 1) {
    run_rows(0);
  } else {
    ParallelFor(pool, tasks, run_rows);
  }
}

// out[k] = f(a[k], b[k]) under broadcasting, with the 0/1 inner strides specialised so the
// compiler vectorises each case.
template <typename A, typename B, typename Out, typename F>
void BroadcastBinary(const A* a, const Shape& a_shape, const B* b, const Shape& b_shape, Out* out,
                     const Shape& out_shape, ThreadPool* pool, F f) {
  BroadcastRows<2>({&a_shape, &b_shape}, out_shape, pool,
                   [&](int64_t o, const std::array<int64_t, 2>& off,
                       const std::array<int64_t, 2>& st, int64_t len) {
                     const A* pa = a + off[0];
                     const B* pb = b + off[1];
                     Out* y = out + o;
                     if (st[0] == 1 && st[1] == 1) {
                       for (int64_t i = 0; i < len; ++i) y[i] = f(pa[i], pb[i]);
                     } else if (st[0] == 1) {
                       const B vb = pb[0];
                       for (int64_t i = 0; i < len; ++i) y[i] = f(pa[i], vb);
                     } else if (st[1] == 1) {
                       const A va = pa[0];
                       for (int64_t i = 0; i < len; ++i) y[i] = f(va, pb[i]);
                     } else {
                       const Out v = f(pa[0], pb[0]);
                       for (int64_t i = 0; i < len; ++i) y[i] = v;
                     }
                   });
}

}  // namespace tessera::engine::cpu
