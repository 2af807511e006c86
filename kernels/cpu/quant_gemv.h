// One-row linear layers (decode: one token) that read GGUF-quantized weights as stored — Q4_0,
// Q4_1, Q8_0, Q4_K and Q6_K blocks — instead of a dequantized fp32/bf16 copy, so a step streams
// 4.5–8.5 bits per weight instead of 16 or 32.
//
// Weight layout: `out` rows, each row `in / block_elements` consecutive blocks exactly as in the
// GGUF file (core/gguf/ggml_types.cpp documents every block). Not repacked: a mapped tensor is
// used in place, and rows are independent, so any row range is a valid matrix.
//
// Activations: the input row is first quantized to 8 bits per block, the way ggml pairs its
// formats with q8 activations (written here from the formats, not from ggml):
//   - 32-element blocks (for Q4_0, Q4_1, Q8_0): d = amax / 127, q = round(x · 127 / amax);
//     Q4_1's offset term also needs d · (sum of each 4 consecutive q).
//   - 256-element blocks (for Q4_K, Q6_K): the same per 256 values, with the integer sums of each
//     16 consecutive q for the K-formats' per-sub-block offsets.
// A block's dot product is then an integer sum (exact), scaled once by weight scale × activation
// scale. The error against the unquantized activations is at most Σᵢ |wᵢ| · dₓ(i) / 2.
//
// One arithmetic, three instruction sets: the integer sums are laid out in 16 fp32 lanes (lane L
// of each 64-value chunk holds values 4L..4L+3; for 32-blocks, even blocks fill lanes 0–7 and odd
// blocks lanes 8–15), each lane is accumulated with one fused multiply-add per block in block
// order, and the 16 lanes are summed in a fixed tree. The scalar path computes exactly that, so
// the AVX2 and AVX-512 paths equal it bit for bit; tests compare them for equality.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/ggml_type.h"

namespace luka::cpu {

enum class QuantIsa { kScalar, kAvx2, kAvx512 };
const char* quant_isa_name(QuantIsa isa);

// True when this CPU runs `isa`: kAvx512 needs AVX-512 F/BW/DQ/VL and VNNI (plus F16C, FMA),
// kAvx2 needs AVX2, FMA and F16C; kScalar always.
bool quant_isa_supported(QuantIsa isa);

// The path quant_gemv takes by default: the widest this CPU runs, lowered by the environment
// variable LUKA_CPU_ISA=avx512|avx2|scalar (never raised beyond the CPU; an unknown value throws
// std::invalid_argument naming the variable).
QuantIsa quant_isa();

// Weight types quant_gemv reads: Q4_0, Q4_1, Q8_0, Q4_K, Q6_K.
bool quant_gemv_supports(gguf::GgmlType type);

// An input row quantized for one weight type (see above). Reusable: quantize_activation resizes.
struct QuantizedActivation {
  std::int64_t block = 0;             // 32 or 256
  std::int64_t in = 0;
  std::vector<std::int8_t> q;         // in values, |q| ≤ 127
  std::vector<float> d;               // one scale per block
  std::vector<float> lane_sums;       // 32-blocks: d · (q[4j] + … + q[4j+3]), 8 per block
  std::vector<std::int16_t> sums16;   // 256-blocks: q[16g] + … + q[16g+15], 16 per block
};

// Quantizes x[0, in) for weights of `type`; `in` must be a multiple of the type's block size.
// Every `isa` gives the same values.
void quantize_activation(gguf::GgmlType type, const float* x, std::int64_t in, QuantizedActivation& out,
                         QuantIsa isa = quant_isa());

// y[o] = Σᵢ W[o, i] · x[i] for o in [0, out). Throws std::invalid_argument for an unsupported
// type, an `in` that is no multiple of the block size, or an `isa` this CPU lacks. Rows run in
// parallel (at::parallel_for); the result does not depend on the thread count.
void quant_gemv(gguf::GgmlType type, const void* w, std::int64_t out, std::int64_t in, const float* x, float* y,
                QuantIsa isa = quant_isa());

// The same with the activation already quantized (one quantization shared by several matrices
// that read the same input, e.g. q/k/v or gate/up).
void quant_gemv(const QuantizedActivation& xq, gguf::GgmlType type, const void* w, std::int64_t out, float* y,
                QuantIsa isa = quant_isa());

// One row's dot product with an activation quantized for its block size: the kernel quant_gemv
// runs per row, for callers that split rows themselves (the fused decode step). Throws like
// quant_gemv for an unsupported type or an ISA this CPU lacks.
using QuantRowDot = float (*)(const std::uint8_t* row, const QuantizedActivation& x);
QuantRowDot quant_row_dot(gguf::GgmlType type, QuantIsa isa = quant_isa());
// Q8_0 rows against an fp32 input row with no activation quantization: y[o] = Σ_b d_b Σ_i w_i x_i,
// the dequantized product up to the order of fp32 sums (every ISA gives the same bits; AVX-512 or
// scalar). For the lm_head, whose logits pick the next token directly: there an 8-bit input
// moves logits by about 0.1 on the default model and flips near ties (its chat answer's first
// token, whose top two logits are 0.08 apart). `in` must be a multiple of 32.
float q8_0_row_f32(const std::uint8_t* row, const float* x, std::int64_t in, QuantIsa isa = quant_isa());
void q8_0_gemv_f32(const void* w, std::int64_t out, std::int64_t in, const float* x, float* y, QuantIsa isa = quant_isa());

// Values per block (32 or 256) and bytes per row of `in` values, for a type quant_gemv reads.
std::int64_t quant_block_elements(gguf::GgmlType type);
std::int64_t quant_row_bytes(gguf::GgmlType type, std::int64_t in);

}  // namespace luka::cpu
