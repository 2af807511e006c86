// The arguments of the fused per-layer ops of a batch-1 decode step (issue 44), shared by the CUDA
// kernels (kernels/cuda/fused/fused_layer.h) and their CPU twins (kernels/cpu/fused_layer.h): the
// same struct names the same buffers on either side, and both compute with
// kernels/common/fused_ops.h. Pointers are device memory for the kernels, host memory for the
// twins; every array is contiguous unless a stride says otherwise.
//
// One layer of the step, with the GEMMs in between left to cuBLAS/ATen:
//   residual_rms_norm  x <- x + y (the previous layer's down projection), h = RMSNorm(x)
//   GEMM               q|k|v = h · W_qkv (the three projections concatenated at load)
//   qkv_norm_rope      q/k per-head norm + RoPE, k and v appended to the caches at the position
//   attention          (its own kernels)
//   GEMM               o = attention · W_o
//   residual_rms_norm  x <- x + o, h = RMSNorm(x)
//   GEMM               gate|up = h · W_gate|up
//   swiglu             a = silu(gate) · up
//   GEMM               y = a · W_down (added to x by the next layer's norm, or the final norm)
#pragma once

#include <cstdint>
#include <string>

namespace luka::fused {

enum class ElemDtype { kF32, kBF16 };  // the compute dtype of every non-float array below

// x <- R(x + add) when `add` is given (x is the residual stream, written back), then
// out = RMSNorm(x)·weight, per row of n. `rows` rows of n, one after the other.
struct NormArgs {
  ElemDtype dtype = ElemDtype::kF32;
  void* x = nullptr;            // [rows, n]; read only when add is null
  const void* add = nullptr;    // [rows, n] or null
  const void* weight = nullptr; // [n]
  void* out = nullptr;          // [rows, n]; may not alias x when add is given
  std::int64_t rows = 1, n = 0;
  float eps = 1e-6f;
};

// The RoPE tables of the step's position: cos[i], sin[i] of position · inv_freq[i] for i < half,
// rounded to the dtype (fp32 arrays). The position is read from memory (the step advances it).
struct RopeTableArgs {
  ElemDtype dtype = ElemDtype::kF32;
  const std::int64_t* position = nullptr;  // [1]
  const float* inv_freq = nullptr;         // [half]
  float* cos = nullptr;                    // [half]
  float* sin = nullptr;                    // [half]
  std::int64_t half = 0;
};

// The fused q|k|v row after its GEMM: each q head normed (q_norm) and rotated into q_out, each k
// head normed (k_norm) and rotated into the key cache at *position, each v head copied into the
// value cache at *position. A position at or past `capacity` appends nothing (grids are fixed;
// the caller's plan reserves the run's context, so this guards a misuse, not a normal step).
struct QkvArgs {
  ElemDtype dtype = ElemDtype::kF32;
  const void* qkv = nullptr;     // [(heads + 2·kv_heads) · head_dim]
  void* q_out = nullptr;         // [heads · head_dim]; may be qkv itself
  const void* q_norm = nullptr;  // [head_dim] or null: no per-head norm (then k_norm is null too)
  const void* k_norm = nullptr;  // [head_dim] or null
  float eps = 1e-6f;
  const float* cos = nullptr;  // [head_dim / 2], already rounded to the dtype (RopeTableArgs)
  const float* sin = nullptr;  // [head_dim / 2]
  const std::int64_t* position = nullptr;  // [1]
  void* k_cache = nullptr;                 // element (g, t, d) at g·head_stride + t·token_stride + d
  void* v_cache = nullptr;                 // same layout
  std::int64_t head_stride = 0, token_stride = 0, capacity = 0;
  std::int64_t heads = 0, kv_heads = 0, head_dim = 0;  // head_dim even
};

// out[i] = swiglu(gate_up[i], gate_up[intermediate + i]) for i < intermediate.
struct SwigluArgs {
  ElemDtype dtype = ElemDtype::kF32;
  const void* gate_up = nullptr;  // [2 · intermediate]
  void* out = nullptr;            // [intermediate]
  std::int64_t intermediate = 0;
};

// What is wrong with the arguments ("" when nothing): both sides refuse the same calls.
inline std::string check(const NormArgs& a) {
  if (!a.x || !a.weight || !a.out) return "norm: x, weight and out are required";
  if (a.rows < 1 || a.n < 1) return "norm: rows and n must be positive";
  if (a.add && a.out == a.x) return "norm: out may not alias x when a residual is added";
  return "";
}
inline std::string check(const RopeTableArgs& a) {
  if (!a.position || !a.inv_freq || !a.cos || !a.sin) return "rope tables: position, inv_freq, cos, sin are required";
  if (a.half < 1) return "rope tables: half must be positive";
  return "";
}
// The kernel runs one block of head_dim / 2 threads per head, one pair each.
constexpr std::int64_t kMaxQkvHeadDim = 512;
inline std::string check(const QkvArgs& a) {
  if (!a.qkv || !a.q_out || !a.cos || !a.sin || !a.position || !a.k_cache || !a.v_cache)
    return "qkv: qkv, q_out, cos, sin, position and both caches are required";
  if (a.heads < 1 || a.kv_heads < 1 || a.heads % a.kv_heads != 0) return "qkv: heads must be a multiple of kv_heads";
  if (a.head_dim < 2 || a.head_dim % 2 != 0 || a.head_dim > kMaxQkvHeadDim)
    return "qkv: head_dim must be even and at most " + std::to_string(kMaxQkvHeadDim);
  if ((a.q_norm == nullptr) != (a.k_norm == nullptr)) return "qkv: q_norm and k_norm go together";
  if (a.capacity < 1 || a.token_stride < a.head_dim || (a.kv_heads > 1 && a.head_stride < a.capacity * a.token_stride))
    return "qkv: the cache strides must hold [kv_heads, capacity, head_dim]";
  return "";
}
inline std::string check(const SwigluArgs& a) {
  if (!a.gate_up || !a.out) return "swiglu: gate_up and out are required";
  if (a.intermediate < 1) return "swiglu: intermediate must be positive";
  return "";
}

}  // namespace luka::fused
