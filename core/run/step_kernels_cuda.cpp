// The CUDA side of core/run/step_kernels.h: the fused kernels (kernels/cuda/fused) between cuBLAS
// GEMMs (ATen's mm out=, over the q|k|v and gate|up weights concatenated at load), on ATen's
// current stream. Built only with LUKA_CUDA (library luka_step_kernels_cuda).
#include <c10/cuda/CUDAStream.h>

#include "core/run/step_kernels.h"
#include "core/util/error.h"
#include "kernels/cuda/fused/fused_layer.h"

namespace luka {

namespace {

at::Tensor& out_arg(const at::Tensor& t) { return const_cast<at::Tensor&>(t); }

void* current_stream() { return at::cuda::getCurrentCUDAStream().stream(); }

void check(const std::string& why) {
  if (!why.empty()) fail("cuda step kernels", why);
}

// bias: the cuBLASLt epilogue where ATen takes it, so the product and its bias stay one launch.
void linear(const at::Tensor& out, const at::Tensor& in, const at::Tensor& w, const at::Tensor& b) {
  if (b.defined())
    at::addmm_out(out_arg(out), b, in, w.t());
  else
    at::mm_out(out_arg(out), in, w.t());
}

class CudaStepKernels final : public StepKernels {
 public:
  explicit CudaStepKernels(const StepTensors& t) : t_(t) {
    const at::ScalarType dt = t.x.scalar_type();
    if (!t.x.is_cuda()) fail("cuda step kernels", "the step's tensors are not on a CUDA device");
    if (dt != at::kFloat && dt != at::kBFloat16)
      fail("cuda step kernels", std::string("fp32 and bf16 only, not ") + c10::toString(dt));
    dtype_ = dt == at::kFloat ? fused::ElemDtype::kF32 : fused::ElemDtype::kBF16;
  }
  const char* name() const override { return "cuda-fused"; }

  void rope_tables() override {
    fused::RopeTableArgs a;
    a.dtype = dtype_;
    a.position = t_.position.const_data_ptr<std::int64_t>();
    a.inv_freq = t_.inv_freq.const_data_ptr<float>();
    a.cos = t_.table_cos.mutable_data_ptr<float>();
    a.sin = t_.table_sin.mutable_data_ptr<float>();
    a.half = t_.shape.head_dim / 2;
    check(cuda::fused::rope_tables(a, current_stream()));
  }

  void norm(const at::Tensor& weight) override { norm_of(nullptr, weight); }

  at::Tensor qkv(const StepLayer& o) override {
    const ModelShape& m = t_.shape;
    linear(t_.qkv, t_.h, o.qkv.weight, o.qkv.bias);
    fused::QkvArgs a;
    a.dtype = dtype_;
    a.qkv = t_.qkv.const_data_ptr();
    a.q_out = t_.qkv.mutable_data_ptr();  // q rotated in place
    a.q_norm = o.q_norm.defined() ? o.q_norm.const_data_ptr() : nullptr;
    a.k_norm = o.k_norm.defined() ? o.k_norm.const_data_ptr() : nullptr;
    a.eps = t_.eps;
    a.cos = t_.table_cos.const_data_ptr<float>();
    a.sin = t_.table_sin.const_data_ptr<float>();
    a.position = t_.position.const_data_ptr<std::int64_t>();
    a.k_cache = o.k_cache.mutable_data_ptr();
    a.v_cache = o.v_cache.mutable_data_ptr();
    a.head_stride = o.k_cache.stride(0);
    a.token_stride = o.k_cache.stride(1);
    a.capacity = o.k_cache.size(1);
    a.heads = m.heads;
    a.kv_heads = m.kv_heads;
    a.head_dim = m.head_dim;
    if (o.v_cache.strides() != o.k_cache.strides() || o.k_cache.stride(2) != 1)
      fail("cuda step kernels", "the key and value caches need one [KV, T, D] layout with contiguous rows");
    check(cuda::fused::qkv_norm_rope(a, current_stream()));
    return t_.qkv.narrow(1, 0, m.heads * m.head_dim).view({m.heads, m.head_dim});
  }

  void residual_projection_norm(const at::Tensor& in, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& norm_weight) override {
    linear(t_.projected, in, weight, bias);
    norm_of(t_.projected.const_data_ptr(), norm_weight);
  }

  at::Tensor mlp_activation(const StepLayer& o) override {
    linear(t_.gate_up, t_.h, o.gate_up.weight, o.gate_up.bias);
    fused::SwigluArgs a;
    a.dtype = dtype_;
    a.gate_up = t_.gate_up.const_data_ptr();
    a.out = t_.activation.mutable_data_ptr();
    a.intermediate = t_.shape.intermediate;
    check(cuda::fused::swiglu(a, current_stream()));
    return t_.activation;
  }

 private:
  void norm_of(const void* add, const at::Tensor& weight) {
    fused::NormArgs a;
    a.dtype = dtype_;
    a.x = t_.x.mutable_data_ptr();
    a.add = add;
    a.weight = weight.const_data_ptr();
    a.out = t_.h.mutable_data_ptr();
    a.n = t_.shape.hidden;
    a.eps = t_.eps;
    check(cuda::fused::residual_rms_norm(a, current_stream()));
  }

  const StepTensors& t_;
  fused::ElemDtype dtype_ = fused::ElemDtype::kF32;
};

}  // namespace

std::unique_ptr<StepKernels> make_cuda_step_kernels(const StepTensors& tensors) {
  return std::make_unique<CudaStepKernels>(tensors);
}

}  // namespace luka
