// The fused per-layer kernels of a batch-1 decode step (issue 44): RMSNorm with the residual add
// folded in, the RoPE tables of the step's position, q/k norm + RoPE + KV append over the fused
// q|k|v row, and SwiGLU over the fused gate|up row. With the four GEMMs (cuBLAS, through ATen) and
// the attention kernels, a layer is at most 10 launches (core/run/step_kernels.h plans them).
//
// Arguments: kernels/common/fused_layer.h; element math: kernels/common/fused_ops.h; the CPU twins
// (kernels/cpu/fused_layer.h) sum in the same order, and these kernels are compiled without FMA
// contraction so that the two agree bit for bit outside cosf/sinf/expf. Every kernel reads the
// position from device memory and has a fixed grid, so a step of them can be recorded in a CUDA
// graph. Plain CUDA C++ API: each launches on `stream` (a cudaStream_t; nullptr = the default
// stream), returns "" or what is wrong, and never synchronizes.
#pragma once

#include <string>

#include "kernels/common/fused_layer.h"

namespace luka::cuda::fused {

std::string residual_rms_norm(const luka::fused::NormArgs& args, void* stream);
std::string rope_tables(const luka::fused::RopeTableArgs& args, void* stream);
std::string qkv_norm_rope(const luka::fused::QkvArgs& args, void* stream);
std::string swiglu(const luka::fused::SwigluArgs& args, void* stream);

}  // namespace luka::cuda::fused
