#include "core/run/step_kernels.h"

#include <stdexcept>

#include "core/util/error.h"
#include "kernels/cpu/fused_layer.h"

namespace luka {

const char* to_string(LaunchKind kind) {
  switch (kind) {
    case LaunchKind::kNorm:
      return "norm";
    case LaunchKind::kGemm:
      return "gemm";
    case LaunchKind::kQkvRope:
      return "qkv";
    case LaunchKind::kAttention:
      return "attention";
    case LaunchKind::kActivation:
      return "activation";
    case LaunchKind::kStep:
      return "step";
  }
  return "?";
}

std::vector<KernelLaunch> layer_launches(int attention_kernels) {
  if (attention_kernels < 1) fail("step kernels", "attention needs at least one kernel");
  // The residual add of the layer before (its down projection) is folded into the input norm,
  // and the output projection's into the post-attention norm: no kernel adds on its own.
  std::vector<KernelLaunch> out = {
      {LaunchKind::kNorm, "input norm (+ the previous layer's residual)"},
      {LaunchKind::kGemm, "q|k|v projection"},
      {LaunchKind::kQkvRope, "q/k norm + RoPE + KV append"},
  };
  for (int i = 0; i < attention_kernels; ++i)
    out.push_back(
        {LaunchKind::kAttention, "attention " + std::to_string(i + 1) + "/" + std::to_string(attention_kernels)});
  out.push_back({LaunchKind::kGemm, "output projection"});
  out.push_back({LaunchKind::kNorm, "post-attention norm (+ the residual)"});
  out.push_back({LaunchKind::kGemm, "gate|up projection"});
  out.push_back({LaunchKind::kActivation, "SwiGLU"});
  out.push_back({LaunchKind::kGemm, "down projection"});
  return out;
}

std::vector<KernelLaunch> step_launches(std::int64_t layers, int attention_kernels) {
  std::vector<KernelLaunch> out = {{LaunchKind::kStep, "embedding row"}, {LaunchKind::kStep, "RoPE tables"}};
  const std::vector<KernelLaunch> layer = layer_launches(attention_kernels);
  for (std::int64_t l = 0; l < layers; ++l) out.insert(out.end(), layer.begin(), layer.end());
  out.push_back({LaunchKind::kNorm, "final norm (+ the last residual)"});
  out.push_back({LaunchKind::kGemm, "lm_head"});
  out.push_back({LaunchKind::kStep, "greedy argmax"});
  out.push_back({LaunchKind::kStep, "id recorded at the step"});
  out.push_back({LaunchKind::kStep, "step counter"});
  out.push_back({LaunchKind::kStep, "position"});
  return out;
}

ConcatenatedProjection concatenate_projections(const std::vector<at::Tensor>& weights,
                                               const std::vector<at::Tensor>& biases, const std::string& what) {
  if (weights.empty()) fail("step kernels", what + ": no projection to concatenate");
  if (!biases.empty() && biases.size() != weights.size())
    fail("step kernels", what + ": " + std::to_string(biases.size()) + " biases for " + std::to_string(weights.size()) +
                             " projections");
  const at::Tensor& first = weights.front();
  ConcatenatedProjection c;
  bool any_bias = false;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const at::Tensor& w = weights[i];
    if (!w.defined() || w.dim() != 2) fail("step kernels", what + ": part " + std::to_string(i) + " is not a matrix");
    if (w.size(1) != first.size(1) || w.scalar_type() != first.scalar_type() || w.device() != first.device())
      fail("step kernels",
           what + ": part " + std::to_string(i) + " differs from the first in its input size, dtype or device");
    c.outs.push_back(w.size(0));
    if (i < biases.size() && biases[i].defined()) {
      if (biases[i].numel() != w.size(0))
        fail("step kernels", what + ": bias " + std::to_string(i) + " has the wrong size");
      any_bias = true;
    }
  }
  c.weight = at::cat(weights, 0).contiguous();
  if (any_bias) {
    std::vector<at::Tensor> parts;
    for (std::size_t i = 0; i < weights.size(); ++i)
      parts.push_back(i < biases.size() && biases[i].defined() ? biases[i].reshape({-1})
                                                               : at::zeros({weights[i].size(0)}, first.options()));
    c.bias = at::cat(parts, 0).contiguous();
  }
  return c;
}

void prepare_step_layer(StepLayer& layer) {
  layer.qkv = concatenate_projections({layer.q, layer.k, layer.v}, {layer.q_b, layer.k_b, layer.v_b}, "q|k|v");
  layer.gate_up = concatenate_projections({layer.gate, layer.up}, {layer.gate_b, layer.up_b}, "gate|up");
}

StepTensors reserve_step_tensors(const ModelShape& m, double eps, const at::Tensor& inv_freq,
                                 const at::TensorOptions& compute) {
  const std::int64_t H = m.heads, KV = m.kv_heads, D = m.head_dim;
  const at::TensorOptions f32 = compute.dtype(at::kFloat);
  StepTensors t;
  t.shape = m;
  t.eps = static_cast<float>(eps);
  t.position = at::zeros({1}, compute.dtype(at::kLong));
  t.inv_freq = inv_freq.to(f32).contiguous();
  t.x = at::zeros({1, m.hidden}, compute);
  t.h = at::zeros({1, m.hidden}, compute);
  t.q = at::zeros({H, D}, compute);
  t.k = at::zeros({KV, D}, compute);
  t.v = at::zeros({KV, D}, compute);
  t.rotated = at::zeros({H, D}, compute);
  t.norm_input = at::zeros({std::max(m.hidden, H * D)}, f32);
  t.norm_square = at::zeros({std::max(m.hidden, H * D)}, f32);
  t.norm_scale = at::zeros({H}, f32);
  t.position_f32 = at::zeros({1}, f32);
  t.rope_angle = at::zeros({D / 2}, f32);
  t.rope_cos = at::zeros({D}, compute);
  t.rope_sin = at::zeros({D}, compute);
  t.gate = at::zeros({1, m.intermediate}, compute);
  t.up = at::zeros({1, m.intermediate}, compute);
  t.constants = at::tensor({static_cast<float>(eps), static_cast<float>(m.hidden), static_cast<float>(D)}).to(f32);
  t.qkv = at::zeros({1, (H + 2 * KV) * D}, compute);
  t.projected = at::zeros({1, m.hidden}, compute);
  t.gate_up = at::zeros({1, 2 * m.intermediate}, compute);
  t.activation = at::zeros({1, m.intermediate}, compute);
  t.table_cos = at::zeros({D / 2}, f32);
  t.table_sin = at::zeros({D / 2}, f32);
  return t;
}

namespace {

at::Tensor& out_arg(const at::Tensor& t) { return const_cast<at::Tensor&>(t); }

// out = in·wᵀ (+ b), w [out, in] as loaded; the bias through the GEMM's epilogue where ATen takes
// it, so a product and its bias stay one launch.
void linear(const at::Tensor& out, const at::Tensor& in, const at::Tensor& w, const at::Tensor& b) {
  if (b.defined())
    at::addmm_out(out_arg(out), b, in, w.t());
  else
    at::mm_out(out_arg(out), in, w.t());
}

// Decoder::decode's ops (Hugging Face's order) as out= ops on the reserved buffers.
class CpuStepKernels final : public StepKernels {
 public:
  explicit CpuStepKernels(const StepTensors& t) : t_(t) {
    eps_ = t.constants.narrow(0, 0, 1);
    hidden_n_ = t.constants.narrow(0, 1, 1);
    head_dim_n_ = t.constants.narrow(0, 2, 1);
  }
  const char* name() const override { return "cpu"; }

  void rope_tables() override {
    const std::int64_t half = t_.shape.head_dim / 2;
    t_.position_f32.copy_(t_.position);
    at::mul_out(out_arg(t_.rope_angle), t_.inv_freq, t_.position_f32);
    at::cos_out(out_arg(t_.rope_cos.narrow(0, 0, half)), t_.rope_angle);
    at::sin_out(out_arg(t_.rope_sin.narrow(0, 0, half)), t_.rope_angle);
    t_.rope_cos.narrow(0, half, half).copy_(t_.rope_cos.narrow(0, 0, half));
    t_.rope_sin.narrow(0, half, half).copy_(t_.rope_sin.narrow(0, 0, half));
  }

  void norm(const at::Tensor& weight) override { rms_norm_rows(t_.x, 1, t_.shape.hidden, weight, t_.h); }

  at::Tensor qkv(const StepLayer& o) override {
    const ModelShape& m = t_.shape;
    const std::int64_t H = m.heads, KV = m.kv_heads, D = m.head_dim;
    linear(t_.q.view({1, H * D}), t_.h, o.q, o.q_b);
    linear(t_.k.view({1, KV * D}), t_.h, o.k, o.k_b);
    linear(t_.v.view({1, KV * D}), t_.h, o.v, o.v_b);
    if (o.q_norm.defined()) {
      rms_norm_rows(t_.q, H, D, o.q_norm, t_.q);
      rms_norm_rows(t_.k, KV, D, o.k_norm, t_.k);
    }
    rope(t_.q, H);
    rope(t_.k, KV);
    o.k_cache.index_copy_(1, t_.position, t_.k.view({KV, 1, D}));
    o.v_cache.index_copy_(1, t_.position, t_.v.view({KV, 1, D}));
    return t_.q;
  }

  void residual_projection_norm(const at::Tensor& in, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& norm_weight) override {
    t_.x.addmm_(in, weight.t());
    if (bias.defined()) t_.x.add_(bias);
    rms_norm_rows(t_.x, 1, t_.shape.hidden, norm_weight, t_.h);
  }

  at::Tensor mlp_activation(const StepLayer& o) override {
    linear(t_.gate, t_.h, o.gate, o.gate_b);
    linear(t_.up, t_.h, o.up, o.up_b);
    at::silu_(out_arg(t_.gate));
    t_.gate.mul_(t_.up);
    return t_.gate;
  }

 private:
  // y[r] = w · (x[r] · rsqrt(mean(x[r]²) + eps)) for `rows` rows of n, in fp32 as Hugging Face's
  // RMSNorm computes it (the normalised row cast to the compute dtype before the weight); the mean
  // as ATen's CPU mean computes it (a sum, then a division by the count), the count and eps held
  // in tensors (an op given a scalar wraps it in a fresh tensor: an allocation per op).
  void rms_norm_rows(const at::Tensor& x, std::int64_t rows, std::int64_t n, const at::Tensor& weight,
                     const at::Tensor& y) {
    at::Tensor in = t_.norm_input.narrow(0, 0, rows * n).view({rows, n});
    at::Tensor sq = t_.norm_square.narrow(0, 0, rows * n).view({rows, n});
    at::Tensor scale = t_.norm_scale.narrow(0, 0, rows).view({rows, 1});
    in.copy_(x.view({rows, n}));
    at::mul_out(sq, in, in);
    const std::int64_t last[] = {1};
    at::sum_out(scale, sq, at::IntArrayRef(last), /*keepdim=*/true);
    scale.div_(n == t_.shape.hidden ? hidden_n_ : head_dim_n_);
    scale.add_(eps_).rsqrt_();
    in.mul_(scale);
    at::Tensor out = y.view({rows, n});
    out.copy_(in);
    out.mul_(weight);
  }

  // Rotate-half RoPE in place on `rows` rows of x [rows, D] with this step's tables.
  void rope(const at::Tensor& x, std::int64_t rows) {
    const std::int64_t half = x.size(1) / 2;
    at::Tensor r = t_.rotated.narrow(0, 0, rows);
    at::neg_out(out_arg(r.narrow(1, 0, half)), x.narrow(1, half, half));
    r.narrow(1, half, half).copy_(x.narrow(1, 0, half));
    r.mul_(t_.rope_sin);
    x.mul_(t_.rope_cos);
    x.add_(r);
  }

  const StepTensors& t_;
  at::Tensor eps_, hidden_n_, head_dim_n_;
};

// The fused ops: one argument packing for whichever device the launchers run on.
class FusedStepKernels final : public StepKernels {
 public:
  FusedStepKernels(const StepTensors& t, FusedLaunchers launchers) : t_(t), launch_(std::move(launchers)) {
    const at::ScalarType dt = t.x.scalar_type();
    if (dt != at::kFloat && dt != at::kBFloat16)
      fail(launch_.name, std::string("fp32 and bf16 only, not ") + c10::toString(dt));
    for (const at::Tensor* b : {&t.qkv, &t.projected, &t.gate_up, &t.activation, &t.table_cos, &t.table_sin, &t.q})
      if (!b->defined() || !b->is_contiguous()) fail(launch_.name, "the fused ops' buffers are not reserved");
    dtype_ = dt == at::kFloat ? fused::ElemDtype::kF32 : fused::ElemDtype::kBF16;
  }
  const char* name() const override { return launch_.name.c_str(); }
  void prepare(StepLayer& layer) const override { prepare_step_layer(layer); }

  void rope_tables() override {
    fused::RopeTableArgs a;
    a.dtype = dtype_;
    a.position = t_.position.const_data_ptr<std::int64_t>();
    a.inv_freq = t_.inv_freq.const_data_ptr<float>();
    a.cos = t_.table_cos.mutable_data_ptr<float>();
    a.sin = t_.table_sin.mutable_data_ptr<float>();
    a.half = t_.shape.head_dim / 2;
    check(launch_.rope_tables(a));
  }

  void norm(const at::Tensor& weight) override { norm_of(nullptr, weight); }

  at::Tensor qkv(const StepLayer& o) override {
    const ModelShape& m = t_.shape;
    if (!o.qkv.weight.defined()) fail(launch_.name, "a layer without its q|k|v concatenation (prepare it first)");
    linear(t_.qkv, t_.h, o.qkv.weight, o.qkv.bias);
    if (o.v_cache.strides() != o.k_cache.strides() || o.k_cache.stride(2) != 1)
      fail(launch_.name, "the key and value caches need one [KV, T, D] layout with contiguous rows");
    fused::QkvArgs a;
    a.dtype = dtype_;
    a.qkv = t_.qkv.const_data_ptr();
    a.q_out = t_.q.mutable_data_ptr();
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
    check(launch_.qkv(a));
    return t_.q;
  }

  void residual_projection_norm(const at::Tensor& in, const at::Tensor& weight, const at::Tensor& bias,
                                const at::Tensor& norm_weight) override {
    linear(t_.projected, in, weight, bias);
    norm_of(t_.projected.const_data_ptr(), norm_weight);
  }

  at::Tensor mlp_activation(const StepLayer& o) override {
    if (!o.gate_up.weight.defined()) fail(launch_.name, "a layer without its gate|up concatenation (prepare it first)");
    linear(t_.gate_up, t_.h, o.gate_up.weight, o.gate_up.bias);
    fused::SwigluArgs a;
    a.dtype = dtype_;
    a.gate_up = t_.gate_up.const_data_ptr();
    a.out = t_.activation.mutable_data_ptr();
    a.intermediate = t_.shape.intermediate;
    check(launch_.swiglu(a));
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
    check(launch_.norm(a));
  }

  void check(const std::string& why) const {
    if (!why.empty()) fail(launch_.name, why);
  }

  const StepTensors& t_;
  FusedLaunchers launch_;
  fused::ElemDtype dtype_ = fused::ElemDtype::kF32;
};

// A CPU twin as a launcher: its refusal (std::invalid_argument) as the message.
template <class Args>
std::function<std::string(const Args&)> twin(void (*op)(const Args&)) {
  return [op](const Args& a) -> std::string {
    try {
      op(a);
      return "";
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
  };
}

}  // namespace

std::unique_ptr<StepKernels> make_cpu_step_kernels(const StepTensors& tensors) {
  return std::make_unique<CpuStepKernels>(tensors);
}

std::unique_ptr<StepKernels> make_fused_step_kernels(const StepTensors& tensors, FusedLaunchers launchers) {
  return std::make_unique<FusedStepKernels>(tensors, std::move(launchers));
}

FusedLaunchers cpu_fused_launchers() {
  return {"cpu-fused", twin<fused::NormArgs>(&cpu::residual_rms_norm), twin<fused::RopeTableArgs>(&cpu::rope_tables),
          twin<fused::QkvArgs>(&cpu::qkv_norm_rope), twin<fused::SwigluArgs>(&cpu::swiglu)};
}

std::unique_ptr<StepKernels> make_cpu_fused_step_kernels(const StepTensors& tensors) {
  if (tensors.x.is_cuda()) fail("cpu-fused step kernels", "the step's tensors are on a CUDA device");
  return make_fused_step_kernels(tensors, cpu_fused_launchers());
}

}  // namespace luka
