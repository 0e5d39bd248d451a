// Cache-blocked SGEMM in the Goto/BLIS shape: C is cut into MC x NC tiles handed to the pool;
// within a tile, KC-deep slices of A and B are packed into MR-row / NR-column panels so the
// micro-kernel streams both from contiguous memory while an MR x NR accumulator stays in
// registers.
#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/cpu/ops.h"

namespace tessera::engine::cpu {
namespace {

// Tuning constants. MR x NR = 6 x 16 is 12 AVX registers of accumulators (the classic AVX2
// shape); with SSE only the compiler spills a little but still vectorises. KC x NR floats (16 KiB)
// of packed B fit L1, MC x KC floats (96 KiB) of packed A fit L2.
constexpr int64_t kMr = 6;
constexpr int64_t kNr = 16;
constexpr int64_t kKc = 256;
constexpr int64_t kMc = 96;   // multiple of kMr
constexpr int64_t kNc = 512;  // multiple of kNr; shrunk below when that leaves threads idle

// Eight floats; GCC lowers it to one AVX register in the x86-64-v3 clone and two SSE registers in
// the baseline one. Written with explicit vectors because GCC's auto-vectoriser picks the wrong
// loop for this kernel.
typedef float Vec8 __attribute__((vector_size(32)));
static_assert(kNr == 16, "the micro-kernel holds a row of the tile in two Vec8");

// acc[kMr][kNr] = sum over p of a_panel[p][i] * b_panel[p][j]. Compiled for x86-64-v3 (AVX2+FMA)
// and for baseline x86-64; the loader picks by CPU features at start. (Not "arch=haswell": that
// clone is chosen only on CPUs that identify as Haswell, so newer ones fell back to SSE.)
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
void MicroKernel(int64_t kc, const float* __restrict a_panel, const float* __restrict b_panel,
                 float* __restrict acc_out) {
  Vec8 acc[kMr][2] = {};
  for (int64_t p = 0; p < kc; ++p) {
    Vec8 b0, b1;  // memcpy: packed panels are only 16-byte aligned
    std::memcpy(&b0, b_panel + p * kNr, sizeof(b0));
    std::memcpy(&b1, b_panel + p * kNr + 8, sizeof(b1));
    const float* a = a_panel + p * kMr;
    for (int64_t i = 0; i < kMr; ++i) {
      acc[i][0] += b0 * a[i];
      acc[i][1] += b1 * a[i];
    }
  }
  std::memcpy(acc_out, acc, sizeof(acc));
}

struct Operand {
  const float* data;
  int64_t ld;
  bool trans;
  // Element (row, col) of op(X).
  float At(int64_t row, int64_t col) const {
    return trans ? data[col * ld + row] : data[row * ld + col];
  }
};

// Packs rows [i0, i0+mc) x depth [p0, p0+kc) of op(A) into kMr-row panels, zero-padded.
void PackA(const Operand& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t ir = 0; ir < mc; ir += kMr) {
    int64_t rows = std::min(kMr, mc - ir);
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t i = 0; i < rows; ++i) dst[i] = a.At(i0 + ir + i, p0 + p);
      for (int64_t i = rows; i < kMr; ++i) dst[i] = 0.0f;
      dst += kMr;
    }
  }
}

// Packs depth [p0, p0+kc) x columns [j0, j0+nc) of op(B) into kNr-column panels, zero-padded.
void PackB(const Operand& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
  for (int64_t jr = 0; jr < nc; jr += kNr) {
    int64_t cols = std::min(kNr, nc - jr);
    for (int64_t p = 0; p < kc; ++p) {
      if (!b.trans && cols == kNr) {
        std::memcpy(dst, b.data + (p0 + p) * b.ld + j0 + jr, kNr * sizeof(float));
      } else {
        for (int64_t j = 0; j < cols; ++j) dst[j] = b.At(p0 + p, j0 + jr + j);
        for (int64_t j = cols; j < kNr; ++j) dst[j] = 0.0f;
      }
      dst += kNr;
    }
  }
}

struct TileBuffers {
  std::vector<float> a, b;
};

void ComputeTile(const Operand& a, const Operand& b, int64_t k, float alpha, float* c, int64_t ldc,
                 int64_t i0, int64_t mc, int64_t j0, int64_t nc) {
  // One set per thread, reused across tiles and calls: packing buffers are the only scratch.
  thread_local TileBuffers buffers;
  int64_t mc_padded = (mc + kMr - 1) / kMr * kMr;
  int64_t nc_padded = (nc + kNr - 1) / kNr * kNr;
  buffers.a.resize(static_cast<size_t>(mc_padded * kKc));
  buffers.b.resize(static_cast<size_t>(nc_padded * kKc));
  float acc[kMr * kNr];
  for (int64_t p0 = 0; p0 < k; p0 += kKc) {
    int64_t kc = std::min(kKc, k - p0);
    PackA(a, i0, mc, p0, kc, buffers.a.data());
    PackB(b, p0, kc, j0, nc, buffers.b.data());
    for (int64_t jr = 0; jr < nc; jr += kNr) {
      int64_t cols = std::min(kNr, nc - jr);
      const float* b_panel = buffers.b.data() + jr * kc;
      for (int64_t ir = 0; ir < mc; ir += kMr) {
        int64_t rows = std::min(kMr, mc - ir);
        MicroKernel(kc, buffers.a.data() + ir * kc, b_panel, acc);
        for (int64_t i = 0; i < rows; ++i) {
          float* c_row = c + (i0 + ir + i) * ldc + j0 + jr;
          const float* acc_row = acc + i * kNr;
          for (int64_t j = 0; j < cols; ++j) c_row[j] += alpha * acc_row[j];
        }
      }
    }
  }
}

}  // namespace

void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
           ThreadPool* pool, bool onednn) {
  if (m <= 0 || n <= 0) return;
#ifdef TESSERA_HAVE_ONEDNN
  if (onednn) {
    DnnlSgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, pool);
    return;
  }
#else
  (void)onednn;
#endif
  if (beta != 1.0f) {
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      if (beta == 0.0f) {
        std::fill(row, row + n, 0.0f);
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] *= beta;
      }
    }
  }
  if (k <= 0 || alpha == 0.0f) return;

  Operand op_a{a, lda, trans_a};
  Operand op_b{b, ldb, trans_b};
  int threads = pool != nullptr ? pool->usable_threads() : 1;
  int64_t mc = std::min(kMc, m);
  int64_t nc = std::min(kNc, n);
  int64_t m_tiles = (m + mc - 1) / mc;
  // Narrow the column tiles until every thread has a couple of tiles to balance, but keep them at
  // least 4 panels wide so packing A stays amortised.
  while (threads > 1 && m_tiles * ((n + nc - 1) / nc) < 2 * threads && nc > 4 * kNr) {
    nc = std::max(4 * kNr, (nc / 2 + kNr - 1) / kNr * kNr);
  }
  int64_t n_tiles = (n + nc - 1) / nc;
  ParallelFor(pool, m_tiles * n_tiles, [&](int64_t tile) {
    int64_t i0 = (tile / n_tiles) * mc;
    int64_t j0 = (tile % n_tiles) * nc;
    ComputeTile(op_a, op_b, k, alpha, c, ldc, i0, std::min(mc, m - i0), j0, std::min(nc, n - j0));
  });
}

}  // namespace tessera::engine::cpu
