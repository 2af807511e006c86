// IEEE 754 binary16 ("half") conversion, for capture storage and the fp16 scales of GGUF blocks: round to nearest, ties to even;
// NaN stays NaN, overflow becomes infinity, subnormals are kept. One value: kernels/common/half.h
// (the kernels use it too); the bulk forms here use F16C when the CPU has it, with identical results.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/half.h"  // float_to_half, half_to_float: one value

namespace luka {

void floats_to_halves(const float* in, std::uint16_t* out, std::size_t n);
void halves_to_floats(const std::uint16_t* in, float* out, std::size_t n);

}  // namespace luka
