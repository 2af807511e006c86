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
// One arithmetic, four instruction sets: the integer sums are laid out in 16 fp32 lanes (lane L
// of each 64-value chunk holds values 4L..4L+3; for 32-blocks, even blocks fill lanes 0–7 and odd
// blocks lanes 8–15), each lane is accumulated with one fused multiply-add per block in block
// order, and the 16 lanes are summed in a fixed tree. The scalar path computes exactly that, so
// the AVX2, AVX-512 and VNNI paths equal it bit for bit; tests compare them for equality.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/ggml_type.h"

namespace luka::cpu {

// The kernel paths, by instruction set:
//   scalar  plain C++, the reference;
//   avx2    AVX2 + FMA + F16C (vpmaddubsw, vpmaddwd);
//   avx512  AVX-512 F/BW/DQ/VL without VNNI (vpmaddubsw, vpmaddwd on 64 bytes);
//   vnni    AVX-512 VNNI (vpdpbusd, vpdpwssd);
//   amx     AMX-INT8 tiles for products of several rows (quant_gemm), where the process got the tile
//           state (cpu_features.h); one-row products take the vnni kernels, which measured faster
//           for one row (bench/results/cpu-quant-amx.md).
// Every path gives the scalar path's bits for one-row products (the integer sums are exact and
// the fp32 lanes are accumulated in the same order).
enum class QuantIsa { kScalar, kAvx2, kAvx512, kVnni, kAmx };
const char* quant_isa_name(QuantIsa isa);
std::optional<QuantIsa> parse_quant_isa(const std::string& name);

// True when this CPU (and for amx, this process) runs `isa`.
bool quant_isa_supported(QuantIsa isa);
// Why `isa` cannot run here, in words ("this CPU lacks AVX-512 VNNI"); empty when it can.
std::string quant_isa_why_not(QuantIsa isa);

// The path the products take by default: the widest this CPU runs, or the one the environment
// variable LUKA_QUANT_PATH=scalar|avx2|avx512|vnni|amx forces. Read once; a name this CPU cannot
// run, or an unknown one, throws std::invalid_argument naming the variable and the reason.
QuantIsa quant_isa();
// The same rule for a given value of the variable (null or empty: the widest path).
QuantIsa quant_isa_from(const char* env);

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

// Y[r, o] = Σᵢ W[o, i] · X[r, i] for r < rows (a prefill's linear layer; X and Y row-major,
// [rows, in] and [rows, out]), each X row quantized as quantize_activation does. The amx path
// runs tiles for Q4_0, Q4_1, Q8_0 and Q4_K (the same exact integer sums, scaled in another order:
// within the fp32 rounding of Σ|terms| of the one-row result); every other path and type runs the
// one-row kernel per row, with quant_gemv's bits. Throws like quant_gemv.
bool quant_gemm_uses_tiles(gguf::GgmlType type, QuantIsa isa = quant_isa());
void quant_gemm(gguf::GgmlType type, const void* w, std::int64_t out, std::int64_t in, const float* x, std::int64_t rows,
                float* y, QuantIsa isa = quant_isa());

// Whether a product of `rows` input rows on `type` blocks is best run by quant_gemm (the amx
// tiles) rather than dequantized slices through LibTorch's fp32 matmul: on the amx path, for the
// types the tiles read, from kTileMinRows rows. bench/results/cpu-quant-amx.md: from 128 rows the
// tiles beat dequantize + fp32 matmul clearly, at 16 the gain was mixed; and a short prompt's
// 8-bit rows moved the decode perplexity that follows by +1.5% (16 rows), where 512 rows in one
// prefill scored +0.32%. The decoder's multi-row products (prefill) follow it.
constexpr std::int64_t kTileMinRows = 64;
bool quant_gemm_preferred(gguf::GgmlType type, std::int64_t rows, QuantIsa isa = quant_isa());

// Which kernel path each kind of product takes with `isa` on this CPU, one line each, for
// `luka info`: {product, path}.
struct QuantPathLine {
  std::string product;
  std::string path;
};
std::vector<QuantPathLine> quant_path_report(QuantIsa isa = quant_isa());

// Values per block (32 or 256) and bytes per row of `in` values, for a type quant_gemv reads.
std::int64_t quant_block_elements(gguf::GgmlType type);
std::int64_t quant_row_bytes(gguf::GgmlType type, std::int64_t in);

}  // namespace luka::cpu
