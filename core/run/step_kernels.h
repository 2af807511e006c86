// The per-layer ops of a batch-1 decode step behind one seam (issue 44): the norms, the q|k|v
// projections with their q/k norm, RoPE and KV append, the output and down projections with the
// residual add folded into the norm after them, and the MLP's activation. Attention stays the
// caller's (core/run/static_step.cpp runs every step through this seam). Two kinds:
//   - "cpu": ATen out= ops on the step's reserved buffers, in the order Decoder::decode's ops
//     compute them (the static step's logits stay within 2e-6 of the decoder's);
//   - fused (make_fused_step_kernels): the four fused kernels between GEMMs (ATen's mm out=) over
//     the q|k|v and gate|up weights concatenated at load, at most 10 launches per layer
//     (layer_launches below). The same argument packing drives either the CUDA kernels of
//     kernels/cuda/fused (make_cuda_step_kernels, built with LUKA_CUDA) or their CPU twins
//     (kernels/cpu/fused_layer.h; make_cpu_fused_step_kernels), so the CUDA path's host code runs
//     and is tested on CPU tensors, a whole static step against Decoder::decode.
// Neither allocates or reads back to the host in a step: the position is a device tensor.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/run/step_plan.h"
#include "kernels/common/fused_layer.h"

namespace luka {

// [SECTION] The launches of one layer (plain C++)
enum class LaunchKind { kNorm, kGemm, kQkvRope, kAttention, kActivation, kStep };
const char* to_string(LaunchKind kind);
struct KernelLaunch {
  LaunchKind kind;
  std::string what;
};
constexpr std::size_t kMaxLayerLaunches = 10;
// The kernels one layer of the fused step launches, in order, with `attention_kernels` for its
// attention (2 for every attention path the GPU has: split + combine, or clustered A + B). Each
// GEMM is counted as one launch: what cuBLAS runs for one row (a GEMV, or a split-K GEMM with its
// reduction) is what the graph's node count (scripts/gpu_run.sh graph) measures.
std::vector<KernelLaunch> layer_launches(int attention_kernels);
// The whole step: the token's embedding and the RoPE tables, every layer, the final norm (with
// the last layer's residual), the lm_head, the greedy argmax and the device counters.
std::vector<KernelLaunch> step_launches(std::int64_t layers, int attention_kernels);

// [SECTION] Weights concatenated at load
// Projections that read the same input, stacked along their outputs: weight [Σ out, in] (one
// GEMM computes all of them), bias [Σ out] (zeros for a part without one; undefined when no part
// has one), and each part's output count. Throws luka::Error (naming `what`) when the parts
// disagree on the input size, dtype or device.
struct ConcatenatedProjection {
  at::Tensor weight, bias;
  std::vector<std::int64_t> outs;
};
ConcatenatedProjection concatenate_projections(const std::vector<at::Tensor>& weights,
                                               const std::vector<at::Tensor>& biases, const std::string& what);

// [SECTION] The seam
// One layer's weights as the ops read them. Projections are [out, in] (as loaded); biases are
// [out] or undefined; q_norm/k_norm undefined for a model without them.
struct StepLayer {
  at::Tensor input_norm, post_norm, q_norm, k_norm;
  at::Tensor q, k, v, o, gate, up, down;
  at::Tensor q_b, k_b, v_b, o_b, gate_b, up_b, down_b;
  ConcatenatedProjection qkv, gate_up;  // the fused GEMMs' (prepare_step_layer)
  at::Tensor k_cache, v_cache;          // [KV, T, D]
};
// Fills qkv and gate_up from the separate projections (the CUDA ops read only those).
void prepare_step_layer(StepLayer& layer);

// The step's buffers the ops share, reserved once (reserve_step_tensors): x is the residual
// stream and h the normed row ([1, hidden]), position an int64 [1] the step advances.
struct StepTensors {
  ModelShape shape;
  float eps = 1e-6f;
  at::Tensor position, inv_freq;  // int64 [1]; fp32 [D/2]
  at::Tensor x, h;
  // The CPU ops' buffers (core/run/step_plan.cpp's of the same names).
  at::Tensor q, k, v, rotated, norm_input, norm_square, norm_scale, position_f32, rope_angle, rope_cos, rope_sin, gate,
      up, constants;  // constants: [eps, hidden, head_dim] fp32
  // The fused ops' buffers: the q|k|v row (q rotated in place), a projection's output, the
  // gate|up row, the activation, the RoPE tables (fp32 [D/2], rounded to the compute dtype).
  at::Tensor qkv, projected, gate_up, activation, table_cos, table_sin;
};
StepTensors reserve_step_tensors(const ModelShape& shape, double eps, const at::Tensor& inv_freq,
                                 const at::TensorOptions& compute);

class StepKernels {
 public:
  virtual ~StepKernels() = default;
  virtual const char* name() const = 0;
  // What the ops need of a layer beyond its separate weights, made once at load (the fused ops:
  // the q|k|v and gate|up concatenations).
  virtual void prepare(StepLayer& layer) const { (void)layer; }
  // The RoPE tables of the position (once per step, before the layers).
  virtual void rope_tables() = 0;
  // h = RMSNorm(x)·weight (the first layer's input norm).
  virtual void norm(const at::Tensor& weight) = 0;
  // h·W_q, h·W_k, h·W_v; q and k normed per head (q_norm, k_norm) and rotated; k and v appended to
  // the layer's caches at the position. Returns q, [H, D]: the tensors' q.
  virtual at::Tensor qkv(const StepLayer& layer) = 0;
  // x += in·Wᵀ (+ bias), then h = RMSNorm(x)·norm_weight: the output projection with the post
  // attention norm, or the down projection with the next layer's input norm (or the final norm).
  virtual void residual_projection_norm(const at::Tensor& in, const at::Tensor& weight, const at::Tensor& bias,
                                        const at::Tensor& norm_weight) = 0;
  // silu(h·W_gate) · (h·W_up), [1, I].
  virtual at::Tensor mlp_activation(const StepLayer& layer) = 0;
};

// The ATen ops on `tensors` (held by reference: keep them alive).
std::unique_ptr<StepKernels> make_cpu_step_kernels(const StepTensors& tensors);

// The four fused ops as one device runs them: each returns "" or why it refused its arguments
// (fused::check's message).
struct FusedLaunchers {
  std::string name;
  std::function<std::string(const fused::NormArgs&)> norm;
  std::function<std::string(const fused::RopeTableArgs&)> rope_tables;
  std::function<std::string(const fused::QkvArgs&)> qkv;
  std::function<std::string(const fused::SwigluArgs&)> swiglu;
};
// The fused ops on `tensors` (fp32 or bf16, on the launchers' device). Throws luka::Error for
// another dtype, or when a launcher refuses (naming the op).
std::unique_ptr<StepKernels> make_fused_step_kernels(const StepTensors& tensors, FusedLaunchers launchers);
// The CPU twins of the fused kernels (kernels/cpu/fused_layer.h), for CPU tensors: "cpu-fused".
FusedLaunchers cpu_fused_launchers();
std::unique_ptr<StepKernels> make_cpu_fused_step_kernels(const StepTensors& tensors);
// The fused CUDA kernels on ATen's current stream, for CUDA tensors: "cuda-fused". In the build
// with LUKA_CUDA only (core/run/step_kernels_cuda.cpp, library luka_step_kernels_cuda).
std::unique_ptr<StepKernels> make_cuda_step_kernels(const StepTensors& tensors);

}  // namespace luka
