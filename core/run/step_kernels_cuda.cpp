// The CUDA side of core/run/step_kernels.h: the fused kernels (kernels/cuda/fused) as launchers on
// ATen's current stream, behind the same argument packing the CPU twins run under
// (make_fused_step_kernels). Built only with LUKA_CUDA (library luka_step_kernels_cuda).
#include <c10/cuda/CUDAStream.h>

#include "core/run/step_kernels.h"
#include "core/util/error.h"
#include "kernels/cuda/fused/fused_layer.h"

namespace luka {

namespace {

void* current_stream() { return at::cuda::getCurrentCUDAStream().stream(); }

template <class Args>
std::function<std::string(const Args&)> on_stream(std::string (*kernel)(const Args&, void*)) {
  return [kernel](const Args& a) { return kernel(a, current_stream()); };
}

}  // namespace

std::unique_ptr<StepKernels> make_cuda_step_kernels(const StepTensors& tensors) {
  if (!tensors.x.is_cuda()) fail("cuda step kernels", "the step's tensors are not on a CUDA device");
  return make_fused_step_kernels(
      tensors, {"cuda-fused", on_stream<fused::NormArgs>(&cuda::fused::residual_rms_norm),
                on_stream<fused::RopeTableArgs>(&cuda::fused::rope_tables),
                on_stream<fused::QkvArgs>(&cuda::fused::qkv_norm_rope), on_stream<fused::SwigluArgs>(&cuda::fused::swiglu)});
}

}  // namespace luka
