// Row-vector linear layers (decode: one token) that stream the weight matrix at memory speed.
// oneDNN/MKL handle M = 1 poorly for bf16 (about a third of the read bandwidth here); a plain
// dot product per output row with AVX-512 (BF16 dot-product instructions for bf16) is
// bandwidth-bound instead. Falls back to at::linear where the CPU or the layout does not fit.
#pragma once

#include <ATen/ATen.h>

namespace luka::cpu {

// True when this CPU runs the AVX-512 paths (bf16 needs AVX512_BF16 as well).
bool fast_gemv_available(at::ScalarType dtype);

// x: [1, in]; w: [out, in] contiguous; b: [out] or undefined. Same result as at::linear up to
// the order of the fp32 accumulation (bf16 output rounded once, after the bias, as oneDNN does).
at::Tensor linear_row(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

}  // namespace luka::cpu
