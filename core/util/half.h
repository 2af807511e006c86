// IEEE 754 binary16 ("half") conversion, for capture storage and the fp16 scales of GGUF blocks: round to nearest, ties to even;
// NaN stays NaN, overflow becomes infinity, subnormals are kept. Bulk forms use F16C when the
// CPU has it, with identical results.
#pragma once

#include <cstddef>
#include <cstdint>

namespace luka {

std::uint16_t float_to_half(float value);
float half_to_float(std::uint16_t bits);

void floats_to_halves(const float* in, std::uint16_t* out, std::size_t n);
void halves_to_floats(const std::uint16_t* in, float* out, std::size_t n);

}  // namespace luka
