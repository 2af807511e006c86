// Prefill on the GPU (the device side of core/luka/prefill.cpp's exact causal attention): the
// rows pass (softmax and output per query) and the columns pass (accumulators and pooled map).
#include "kernels/cuda/luka_decode.h"

#include "kernels/cuda/luka/step.cuh"

namespace luka::cuda {
namespace {

constexpr int kKeyTile = 32;  // keys per block in the column pass (one per lane)

struct PrefillParams {
  const void* q;
  const void* k;
  const void* v;
  long long hs, ts;
  int heads, group, queries, tokens, q_pos0, pool;
  float scale;
  void* out;             // [queries, H * D]
  float* stats;          // [H, queries, 2]: (max, sum) of each query's softmax
  float* importance;
  float* h2o;
  long long ld;
  float* pooled;         // [H, rows, cols] or null
  int rows, cols;
};

// Block (KV head, query): the online softmax of the group's query heads over keys 0 .. pos.
template <class T, int PER>
__global__ void __launch_bounds__(kWarps * 32) prefill_rows_kernel(PrefillParams p) {
  constexpr int D = PER * 32;
  const int i = blockIdx.x, g = blockIdx.y;  // queries in x: up to 2^31 of them
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int keys = min(p.tokens, p.q_pos0 + i + 1);
  const T* q = static_cast<const T*>(p.q);
  float qr[kMaxGroup][PER], m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][PER];
#pragma unroll
  for (int gg = 0; gg < kMaxGroup; ++gg) {
    m[gg] = kEmptyMax;
    l[gg] = 0.f;
    for (int j = 0; j < PER; ++j) {
      acc[gg][j] = 0.f;
      qr[gg][j] = gg < p.group ? to_float(q[(static_cast<long long>(g * p.group + gg) * p.queries + i) * D + lane + 32 * j]) * p.scale : 0.f;
    }
  }
  const T* kh = static_cast<const T*>(p.k) + g * p.hs;
  const T* vh = static_cast<const T*>(p.v) + g * p.hs;
  for (int t = warp; t < keys; t += kWarps) {
    float kr[PER], vr[PER];
    for (int j = 0; j < PER; ++j) {
      kr[j] = to_float(kh[static_cast<long long>(t) * p.ts + lane + 32 * j]);
      vr[j] = to_float(vh[static_cast<long long>(t) * p.ts + lane + 32 * j]);
    }
#pragma unroll
    for (int gg = 0; gg < kMaxGroup; ++gg) {
      if (gg >= p.group) break;
      float s = 0.f;
      for (int j = 0; j < PER; ++j) s += qr[gg][j] * kr[j];
      online_update(warp_sum(s), vr, m[gg], l[gg], acc[gg], PER);
    }
  }
  __shared__ WarpMerge<PER> sm;
  __shared__ float part[D + 2];
  store_state<PER>(sm, p.group, m, l, acc);
  __syncthreads();
  if (warp != 0) return;
  for (int gg = 0; gg < p.group; ++gg) {
    merge_state<PER>(sm, gg, part);
    __syncwarp();
    const int h = g * p.group + gg;
    T* o = static_cast<T*>(p.out) + (static_cast<long long>(i) * p.heads + h) * D;
    for (int j = 0; j < PER; ++j) o[lane + 32 * j] = from_float<T>(part[2 + lane + 32 * j] / part[1]);
    if (lane == 0) {
      p.stats[(static_cast<long long>(h) * p.queries + i) * 2] = part[0];
      p.stats[(static_cast<long long>(h) * p.queries + i) * 2 + 1] = part[1];
    }
    __syncwarp();
  }
}

// Block (KV head, tile of 32 keys; lane = key): every query that sees the tile, by chunks of
// C = max(pool, kWarps) rows (warps take rows in turn). Probabilities are summed per key over the
// queries in a fixed order (per warp, then warps in order) and max-pooled through shared memory
// into the pooled cells, flushed with atomicMax on the fp32 bits (exact, order-independent:
// probabilities are ≥ 0).
template <class T, int PER>
__global__ void __launch_bounds__(kWarps * 32) prefill_columns_kernel(PrefillParams p) {
  constexpr int D = PER * 32;
  constexpr int kCellRows = kWarps;  // row cells per chunk at most (pool < kWarps)
  __shared__ float ks[kKeyTile][D + 1];
  __shared__ float qs[kWarps][kMaxGroup][D];
  __shared__ unsigned cell[kMaxGroup][kCellRows][kKeyTile];
  __shared__ float colsum[kWarps][kMaxGroup][kKeyTile];
  const int t0 = blockIdx.x * kKeyTile, g = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tid = threadIdx.x;
  const T* kh = static_cast<const T*>(p.k) + g * p.hs;
  for (int x = tid; x < kKeyTile * D; x += blockDim.x) {
    const int r = x / D, d = x % D;
    ks[r][d] = t0 + r < p.tokens ? to_float(kh[static_cast<long long>(t0 + r) * p.ts + d]) : 0.f;
  }
  float cs[kMaxGroup];
#pragma unroll
  for (int gg = 0; gg < kMaxGroup; ++gg) cs[gg] = 0.f;
  const int t = t0 + lane;
  const int first = max(0, t0 - p.q_pos0);  // the first query that sees key t0
  const int C = max(p.pool, kWarps);
  const T* q = static_cast<const T*>(p.q);
  for (int r0 = first / C * C; r0 < p.queries; r0 += C) {
    if (p.pooled)
      for (int x = tid; x < kMaxGroup * kCellRows * kKeyTile; x += blockDim.x) (&cell[0][0][0])[x] = 0u;
    __syncthreads();
    for (int i = r0 + warp; i < min(r0 + C, p.queries); i += kWarps) {
      if (i < first) continue;
      for (int gg = 0; gg < p.group; ++gg)
        for (int d = lane; d < D; d += 32)
          qs[warp][gg][d] = to_float(q[(static_cast<long long>(g * p.group + gg) * p.queries + i) * D + d]) * p.scale;
      __syncwarp();
      const bool visible = t < p.tokens && t <= p.q_pos0 + i;
#pragma unroll
      for (int gg = 0; gg < kMaxGroup; ++gg) {
        if (gg >= p.group) break;
        float s = 0.f;
        for (int d = 0; d < D; ++d) s += qs[warp][gg][d] * ks[lane][d];
        const float* st = p.stats + (static_cast<long long>(g * p.group + gg) * p.queries + i) * 2;
        const float prob = visible ? expf(s - st[0]) / st[1] : 0.f;
        cs[gg] += prob;
        if (p.pooled) atomicMax(&cell[gg][(i - r0) / p.pool][lane], __float_as_uint(prob));
      }
      __syncwarp();
    }
    __syncthreads();
    if (p.pooled) {
      // Cells of this chunk: C / pool row cells × (32 / pool, or 1) column cells.
      const int row_cells = C / p.pool, col_width = min(p.pool, kKeyTile), col_cells = kKeyTile / col_width;
      for (int x = tid; x < p.group * row_cells * col_cells; x += blockDim.x) {
        const int gg = x / (row_cells * col_cells), rc = (x / col_cells) % row_cells, cc = x % col_cells;
        const int row = r0 / p.pool + rc, col = (t0 + cc * col_width) / p.pool;
        if (row >= p.rows || col >= p.cols) continue;
        unsigned v = 0;
        for (int j = 0; j < col_width; ++j) v = max(v, cell[gg][rc][cc * col_width + j]);
        atomicMax(reinterpret_cast<unsigned*>(p.pooled) + (static_cast<long long>(g * p.group + gg) * p.rows + row) * p.cols + col, v);
      }
      __syncthreads();
    }
  }
#pragma unroll
  for (int gg = 0; gg < kMaxGroup; ++gg)
    if (gg < p.group) colsum[warp][gg][lane] = cs[gg];
  __syncthreads();
  if (warp != 0 || t >= p.tokens) return;
  float imp = 0.f;
  for (int gg = 0; gg < p.group; ++gg) {
    float sum = 0.f;
    for (int w = 0; w < kWarps; ++w) sum += colsum[w][gg][lane];
    float* h = p.h2o + static_cast<long long>(g * p.group + gg) * p.ld + t;
    *h = __fadd_rn(*h, sum);
    imp = __fadd_rn(imp, sum);
  }
  p.importance[g * p.ld + t] = rules::importance_update(p.importance[g * p.ld + t], imp, p.group);
}

}  // namespace

std::size_t prefill_workspace_bytes(const PrefillArgs& a) {
  Bump b(nullptr);
  b.take<float>(2 * a.heads * a.queries);
  return b.bytes();
}

std::string prefill_attention(const PrefillArgs& a, void* workspace, std::size_t workspace_bytes, void* stream) {
  DecodeCommon c;
  c.kv = a.kv;
  c.q = a.q;
  c.out = a.out;
  c.heads = a.heads;
  c.acc = a.acc;
  if (std::string e = check_common(c); !e.empty()) return e;
  if (a.queries <= 0 || a.q_pos0 < 0 || a.q_pos0 + a.queries != a.kv.tokens) return "queries must be the cache's last tokens";
  if (a.acc.decay != 1.0f) return "the prefill kernel accumulates without decay (decay 1)";
  if (a.pool < 1 || (a.pool & (a.pool - 1)) != 0) return "pool must be a power of two";
  if (!workspace || workspace_bytes < prefill_workspace_bytes(a)) return "workspace missing or too small";
  const auto s = static_cast<cudaStream_t>(stream);
  const int H = static_cast<int>(a.heads), KV = static_cast<int>(a.kv.kv_heads);
  const int rows = static_cast<int>((a.queries + a.pool - 1) / a.pool), cols = static_cast<int>((a.kv.tokens + a.pool - 1) / a.pool);
  if (a.pooled)
    if (const cudaError_t e = cudaMemsetAsync(a.pooled, 0, static_cast<std::size_t>(H) * rows * cols * sizeof(float), s); e != cudaSuccess)
      return cudaGetErrorString(e);
  Bump b(workspace);
  PrefillParams p{a.q, a.kv.k, a.kv.v, a.kv.head_stride, a.kv.token_stride, H, H / KV, static_cast<int>(a.queries),
                  static_cast<int>(a.kv.tokens), static_cast<int>(a.q_pos0), static_cast<int>(a.pool), a.scale, a.out,
                  b.take<float>(2 * a.heads * a.queries), a.acc.importance, a.acc.h2o, a.acc.ld, a.pooled, rows, cols};
  std::string err = by_type(a.kv.type, [&](auto tag) {
    using T_ = decltype(tag);
    return by_dim(a.kv.head_dim, [&](auto per) {
      constexpr int PER = decltype(per)::value;
      prefill_rows_kernel<T_, PER><<<dim3(static_cast<unsigned>(a.queries), static_cast<unsigned>(KV)), kWarps * 32, 0, s>>>(p);
      prefill_columns_kernel<T_, PER>
          <<<dim3(static_cast<unsigned>((a.kv.tokens + kKeyTile - 1) / kKeyTile), static_cast<unsigned>(KV)), kWarps * 32, 0, s>>>(p);
      return std::string();
    });
  });
  if (!err.empty()) return err;
  return launch_error();
}

}  // namespace luka::cuda
