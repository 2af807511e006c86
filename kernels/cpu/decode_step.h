// The pieces of the decoder's fused one-row step on the CPU (core/model/decoder.cpp, decode of one
// token): RMSNorm in one pass, q/k norm + RoPE in one pass per head, and the linear layers of a
// sub-block run together in one parallel region with their epilogues folded in (bias, residual
// add, SwiGLU), reading dense fp32/bf16 rows or GGUF blocks as stored.
//
// The element math comes from kernels/common/fused_ops.h (shared with device kernels), rounding
// to the compute dtype exactly where the unfused ATen path writes a tensor, so the fused step
// equals the unfused one up to the order of fp32 sums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/ggml_type.h"
#include "kernels/cpu/quant_gemv.h"

namespace luka::cpu {

enum class StepDtype { kF32, kBF16 };
std::size_t step_dtype_bytes(StepDtype dtype);

// A [out, in] weight as a one-row step reads it: dense rows in the compute dtype (type kF32 or
// kBF16, matching the step's dtype) or GGUF blocks of a type quant_gemv reads.
struct RowWeight {
  const void* data = nullptr;
  gguf::GgmlType type = gguf::GgmlType::kF32;
  std::int64_t out = 0, in = 0;
  const void* bias = nullptr;  // [out] in the compute dtype, or null
  // Q8_0 blocks read against the fp32 input itself rather than its 8-bit quantization
  // (cpu::q8_0_row_f32): the lm_head, whose logits pick the token. Other types ignore it.
  bool exact_input = false;
  bool quantized() const { return type != gguf::GgmlType::kF32 && type != gguf::GgmlType::kBF16; }
};

enum class Epilogue {
  kStore,     // y[o] = R(acc + bias)
  kResidual,  // y[o] = R(y[o] + R(acc + bias)): y is the residual stream, updated in place
  kSwiGlu,    // y[o] = R(R(silu(R(gate))) · R(up)): `weight` is the gate projection, `up` the up one
};

struct RowJob {
  RowWeight weight;
  RowWeight up;  // kSwiGlu only: same shape as weight
  Epilogue epilogue = Epilogue::kStore;
  void* y = nullptr;  // [weight.out], compute dtype
};

// Buffers kept from step to step: the input row in fp32 and its quantized forms.
struct RowScratch {
  std::vector<float> x;
  QuantizedActivation q32, q256;
};

// Runs every job over the same input row x ([in], compute dtype) in one parallel region: the
// jobs' rows are split over the threads together, so q, k and v (or gate and up) cost one
// fork/join, and a quantized input is quantized once per block size for all of them. The result
// does not depend on the thread count. Throws std::invalid_argument for jobs that disagree on
// `in`, a dense weight of another dtype than the step's, or a type quant_gemv cannot read.
void run_rows(const RowJob* jobs, std::size_t n_jobs, const void* x, StepDtype dtype, RowScratch& scratch);

// y = R(w · R(x · r)), r = 1 / sqrt(mean(x²) + eps): Hugging Face's RMSNorm on one row of n.
void rms_norm_row(const void* x, const void* w, float eps, std::int64_t n, void* y, StepDtype dtype);

// In place on `heads` consecutive vectors of d values: the per-head RMSNorm when norm_w is not
// null (qwen3's q_norm / k_norm, weight [d]), then RoPE rotate-half with the tables cos, sin [d/2]
// (fp32 values already rounded to the compute dtype; the second half of transformers' tables
// repeats the first).
void norm_rope_heads(void* x, std::int64_t heads, std::int64_t d, const void* norm_w, float eps, const float* cos,
                     const float* sin, StepDtype dtype);

// The RoPE tables of one position: cos/sin of pos · inv_freq[i] for i < d/2, rounded to the
// compute dtype (as transformers builds them: fp32 angles, cast once).
void rope_tables(std::int64_t pos, const float* inv_freq, std::int64_t half, StepDtype dtype, float* cos, float* sin);

}  // namespace luka::cpu
