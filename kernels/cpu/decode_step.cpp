#include "kernels/cpu/decode_step.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>

#include "kernels/common/fused_ops.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/row_dot.h"

namespace luka::cpu {

namespace {

using gguf::GgmlType;

float load(const void* p, std::int64_t i, StepDtype dt) {
  return dt == StepDtype::kF32 ? static_cast<const float*>(p)[i] : static_cast<float>(static_cast<const c10::BFloat16*>(p)[i]);
}

// Stores a value already rounded to the dtype (exact for bf16).
void store(void* p, std::int64_t i, float v, StepDtype dt) {
  if (dt == StepDtype::kF32)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<c10::BFloat16*>(p)[i] = c10::BFloat16(v);
}

// The dense dot of one row, with the same instructions as linear_row (gemv.cpp).
struct DenseDot {
  StepDtype dt;
  bool avx512;
  float operator()(const RowWeight& w, std::int64_t o, const void* x) const {
    if (dt == StepDtype::kF32) {
      const float* r = static_cast<const float*>(w.data) + o * w.in;
      return avx512 ? detail::dot_f32_avx512(r, static_cast<const float*>(x), w.in)
                    : detail::dot_plain(r, static_cast<const float*>(x), w.in);
    }
    const c10::BFloat16* r = static_cast<const c10::BFloat16*>(w.data) + o * w.in;
    return avx512 ? detail::dot_bf16_avx512(r, static_cast<const c10::BFloat16*>(x), w.in)
                  : detail::dot_plain(r, static_cast<const c10::BFloat16*>(x), w.in);
  }
};

// What one weight needs at run time: its row kernel and row stride when quantized.
struct Reader {
  const RowWeight* w = nullptr;
  bool exact = false;  // Q8_0 against the fp32 input (scratch.x)
  QuantRowDot quant = nullptr;
  std::int64_t row_bytes = 0;
  const QuantizedActivation* xq = nullptr;
};

template <class R>
void run_rows_as(const RowJob* jobs, std::size_t n_jobs, const void* x, StepDtype dt, RowScratch& scratch, R round) {
  const std::int64_t in = jobs[0].weight.in;
  bool need32 = false, need256 = false, need_x = false;
  std::vector<Reader> readers(2 * n_jobs);
  std::vector<std::int64_t> first(n_jobs + 1, 0);
  const GgmlType dense_type = dt == StepDtype::kF32 ? GgmlType::kF32 : GgmlType::kBF16;
  for (std::size_t j = 0; j < n_jobs; ++j) {
    const RowJob& job = jobs[j];
    const bool swiglu = job.epilogue == Epilogue::kSwiGlu;
    for (int part = 0; part < (swiglu ? 2 : 1); ++part) {
      const RowWeight& w = part == 0 ? job.weight : job.up;
      if (w.in != in || (part == 1 && w.out != job.weight.out))
        throw std::invalid_argument("run_rows: the jobs' weights disagree on their shapes");
      if (!w.data) throw std::invalid_argument("run_rows: a job has no weight");
      Reader& r = readers[2 * j + static_cast<std::size_t>(part)];
      r.w = &w;
      if (w.quantized() && w.exact_input && w.type == GgmlType::kQ8_0) {
        r.exact = true;
        r.row_bytes = quant_row_bytes(w.type, in);
        need_x = true;
      } else if (w.quantized()) {
        r.quant = quant_row_dot(w.type);
        r.row_bytes = quant_row_bytes(w.type, in);
        (quant_block_elements(w.type) == 32 ? need32 : need256) = true;
      } else if (w.type != dense_type) {
        throw std::invalid_argument(std::string("run_rows: a dense weight of type ") + gguf::type_name(w.type) +
                                    " in a step of the other dtype");
      }
    }
    if (!job.y) throw std::invalid_argument("run_rows: a job has no output");
    first[j + 1] = first[j] + job.weight.out;
  }
  if (need32 || need256 || need_x) {
    scratch.x.resize(static_cast<std::size_t>(in));
    for (std::int64_t i = 0; i < in; ++i) scratch.x[static_cast<std::size_t>(i)] = load(x, i, dt);
    // Any 32-block type quantizes the same way (likewise for 256), so one quantization serves all.
    if (need32) quantize_activation(GgmlType::kQ8_0, scratch.x.data(), in, scratch.q32);
    if (need256) quantize_activation(GgmlType::kQ6_K, scratch.x.data(), in, scratch.q256);
  }
  for (Reader& r : readers)
    if (r.quant) r.xq = quant_block_elements(r.w->type) == 32 ? &scratch.q32 : &scratch.q256;

  const DenseDot dense{dt, fast_gemv_available(dt == StepDtype::kF32 ? at::kFloat : at::kBFloat16)};
  const auto acc = [&](const Reader& r, std::int64_t o) {
    const auto* row = static_cast<const std::uint8_t*>(r.w->data) + o * r.row_bytes;
    const float a = r.exact ? q8_0_row_f32(row, scratch.x.data(), in) : r.quant ? r.quant(row, *r.xq) : dense(*r.w, o, x);
    return a + (r.w->bias ? load(r.w->bias, o, dt) : 0.0f);
  };
  const std::int64_t total = first[n_jobs];
  // Chunks of at least ~32K weights, so a thread's share outweighs its start-up (as quant_gemv).
  const std::int64_t grain = std::max<std::int64_t>(16, 32768 / std::max<std::int64_t>(in, 1));
  at::parallel_for(0, total, grain, [&](std::int64_t r0, std::int64_t r1) {
    std::size_t j = static_cast<std::size_t>(std::upper_bound(first.begin(), first.end(), r0) - first.begin()) - 1;
    for (std::int64_t r = r0; r < r1; ++r) {
      while (r >= first[j + 1]) ++j;
      const RowJob& job = jobs[j];
      const std::int64_t o = r - first[j];
      switch (job.epilogue) {
        case Epilogue::kStore:
          store(job.y, o, fused::linear_out(acc(readers[2 * j], o), 0.0f, round), dt);
          break;
        case Epilogue::kResidual:
          store(job.y, o, fused::residual_out(load(job.y, o, dt), acc(readers[2 * j], o), 0.0f, round), dt);
          break;
        case Epilogue::kSwiGlu:
          store(job.y, o, fused::swiglu(acc(readers[2 * j], o), acc(readers[2 * j + 1], o), round), dt);
          break;
      }
    }
  });
}

template <class R>
void rms_norm_row_as(const void* x, const void* w, float eps, std::int64_t n, void* y, StepDtype dt, R round) {
  float ss = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = load(x, i, dt);
    ss += v * v;
  }
  const float inv = fused::rms_inverse(ss, n, eps);
  for (std::int64_t i = 0; i < n; ++i) store(y, i, fused::rms_apply(load(x, i, dt), inv, load(w, i, dt), round), dt);
}

template <class R>
void norm_rope_heads_as(void* x, std::int64_t heads, std::int64_t d, const void* norm_w, float eps, const float* cos,
                        const float* sin, StepDtype dt, R round) {
  const std::int64_t half = d / 2;
  for (std::int64_t h = 0; h < heads; ++h) {
    const std::int64_t base = h * d;
    float inv = 0;
    if (norm_w) {
      float ss = 0;
      for (std::int64_t i = 0; i < d; ++i) {
        const float v = load(x, base + i, dt);
        ss += v * v;
      }
      inv = fused::rms_inverse(ss, d, eps);
    }
    for (std::int64_t i = 0; i < half; ++i) {
      float lo = load(x, base + i, dt), hi = load(x, base + half + i, dt);
      if (norm_w) {
        lo = fused::rms_apply(lo, inv, load(norm_w, i, dt), round);
        hi = fused::rms_apply(hi, inv, load(norm_w, half + i, dt), round);
      }
      float out_lo, out_hi;
      fused::rope_pair(lo, hi, cos[i], sin[i], out_lo, out_hi, round);
      store(x, base + i, out_lo, dt);
      store(x, base + half + i, out_hi, dt);
    }
  }
}

}  // namespace

std::size_t step_dtype_bytes(StepDtype dtype) { return dtype == StepDtype::kF32 ? 4 : 2; }

void run_rows(const RowJob* jobs, std::size_t n_jobs, const void* x, StepDtype dtype, RowScratch& scratch) {
  if (n_jobs == 0) return;
  if (dtype == StepDtype::kF32)
    run_rows_as(jobs, n_jobs, x, dtype, scratch, fused::RoundF32{});
  else
    run_rows_as(jobs, n_jobs, x, dtype, scratch, fused::RoundBF16{});
}

void rms_norm_row(const void* x, const void* w, float eps, std::int64_t n, void* y, StepDtype dtype) {
  if (dtype == StepDtype::kF32)
    rms_norm_row_as(x, w, eps, n, y, dtype, fused::RoundF32{});
  else
    rms_norm_row_as(x, w, eps, n, y, dtype, fused::RoundBF16{});
}

void norm_rope_heads(void* x, std::int64_t heads, std::int64_t d, const void* norm_w, float eps, const float* cos,
                     const float* sin, StepDtype dtype) {
  if (dtype == StepDtype::kF32)
    norm_rope_heads_as(x, heads, d, norm_w, eps, cos, sin, dtype, fused::RoundF32{});
  else
    norm_rope_heads_as(x, heads, d, norm_w, eps, cos, sin, dtype, fused::RoundBF16{});
}

void rope_tables(std::int64_t pos, const float* inv_freq, std::int64_t half, StepDtype dtype, float* cos, float* sin) {
  for (std::int64_t i = 0; i < half; ++i) {
    const float a = fused::rope_angle(pos, inv_freq[i]);
    cos[i] = std::cos(a);
    sin[i] = std::sin(a);
    if (dtype == StepDtype::kBF16) {
      cos[i] = fused::RoundBF16{}(cos[i]);
      sin[i] = fused::RoundBF16{}(sin[i]);
    }
  }
}

}  // namespace luka::cpu
