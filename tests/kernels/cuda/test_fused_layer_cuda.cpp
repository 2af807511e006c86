// The fused per-layer kernels (kernels/cuda/fused/fused_layer.h) on the GPU against their CPU twins
// (kernels/cpu/fused_layer.h) on the same inputs, fp32 and bf16, at Qwen3-0.6B's and Qwen3-4B's
// layer shapes and odd ones: the residual add + RMSNorm, the RoPE tables, q/k norm + RoPE + KV
// append (with and without q/k norm, in place, past the capacity, and the position moved in
// device memory between two launches of the same arguments, as a replayed graph sees it), SwiGLU.
//
// Tolerances: the twins sum in the kernels' order and the kernels are compiled without FMA
// contraction, so the norm and the q|k|v recipe are expected bit for bit; they are held to 2 fp32
// ulps (1 bf16 step) so a libdevice rounding difference shows as a number, not a crash. The RoPE
// tables call cosf/sinf, which CUDA gives within 2 ulps: 4 fp32 ulps (or 4e-7 absolute near a zero
// of cos/sin), one bf16 step. SwiGLU calls expf (2 ulps), then divides and multiplies, each
// rounding what may already differ: 8 fp32 ulps, two bf16 steps (a step in silu, then the product). Skips without a CUDA device (scripts/gpu_run.sh
// fused runs it on a GPU machine).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/fused_layer.h"
#include "kernels/common/fused_ops.h"
#include "kernels/cpu/fused_layer.h"
#include "kernels/cuda/fused/fused_layer.h"

namespace {

using luka::fused::ElemDtype;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// Host arrays of either dtype as raw bytes: fp32 values, or bf16 bits.
struct Host {
  ElemDtype dt;
  std::vector<std::uint8_t> bytes;
  Host(ElemDtype d, std::int64_t n) : dt(d), bytes(static_cast<std::size_t>(n) * (d == ElemDtype::kF32 ? 4 : 2)) {}
  std::int64_t size() const { return static_cast<std::int64_t>(bytes.size()) / (dt == ElemDtype::kF32 ? 4 : 2); }
  float get(std::int64_t i) const {
    if (dt == ElemDtype::kF32) {
      float v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      return v;
    }
    std::uint16_t b;
    std::memcpy(&b, bytes.data() + 2 * i, 2);
    return luka::fused::bf16_value(b);
  }
  void set(std::int64_t i, float v) {
    if (dt == ElemDtype::kF32) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      const std::uint16_t b = luka::fused::bf16_bits(v);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    }
  }
  void* data() { return bytes.data(); }
};

Host random(ElemDtype dt, std::int64_t n, std::uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n01(0.0f, scale);
  Host h(dt, n);
  for (std::int64_t i = 0; i < n; ++i) h.set(i, n01(rng));
  return h;
}

// Device copy of host bytes, freed at scope end.
struct Device {
  void* p = nullptr;
  std::size_t n = 0;
  explicit Device(std::size_t bytes) : n(bytes) {
    EXPECT_EQ(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)), cudaSuccess);
  }
  explicit Device(const Host& h) : Device(h.bytes.size()) { upload(h.bytes.data()); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device() { cudaFree(p); }
  void upload(const void* src) { EXPECT_EQ(cudaMemcpy(p, src, n, cudaMemcpyHostToDevice), cudaSuccess); }
  void download(void* dst) const { EXPECT_EQ(cudaMemcpy(dst, p, n, cudaMemcpyDeviceToHost), cudaSuccess); }
  Host to_host(ElemDtype dt) const {
    Host h(dt, static_cast<std::int64_t>(n / (dt == ElemDtype::kF32 ? 4 : 2)));
    download(h.data());
    return h;
  }
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

// Distance in representable values (fp32 ulps or bf16 steps); NaN against NaN is 0.
std::int64_t steps_apart(float a, float b, ElemDtype dt) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  if (std::isnan(a) || std::isnan(b)) return 1 << 30;
  const auto ordered = [&](float x) {
    std::int32_t i;
    std::memcpy(&i, &x, 4);
    const std::int64_t v = i < 0 ? -static_cast<std::int64_t>(i & 0x7fffffff) : i;
    return dt == ElemDtype::kF32 ? v : v / 65536;  // bf16 values are fp32 with 16 zero bits
  };
  return std::llabs(ordered(a) - ordered(b));
}

void expect_near_twin(const Host& gpu, const Host& cpu, std::int64_t max_steps, double abs_floor,
                      const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  std::int64_t worst = 0, exact = 0;
  for (std::int64_t i = 0; i < gpu.size(); ++i) {
    const float g = gpu.get(i), c = cpu.get(i);
    const std::int64_t d = std::fabs(g - c) <= abs_floor ? 0 : steps_apart(g, c, gpu.dt);
    worst = std::max(worst, d);
    exact += g == c || (std::isnan(g) && std::isnan(c));
  }
  EXPECT_LE(worst, max_steps) << what << ": " << exact << " of " << gpu.size() << " equal";
}

std::string name(ElemDtype dt) { return dt == ElemDtype::kF32 ? "f32" : "bf16"; }

class FusedLayerCuda : public ::testing::TestWithParam<ElemDtype> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

TEST_P(FusedLayerCuda, ResidualRmsNormEqualsItsCpuTwin) {
  const ElemDtype dt = GetParam();
  for (const std::int64_t n : {1, 33, 1024, 2560, 5120}) {
    for (const bool residual : {false, true}) {
      const std::int64_t rows = 3;
      Host x = random(dt, rows * n, 1 + n, 3.0f), add = random(dt, rows * n, 2 + n, 1.0f);
      Host w = random(dt, n, 3 + n, 1.0f);
      Device dx(x), dadd(add), dw(w), dout(x.bytes.size());
      luka::fused::NormArgs a;
      a.dtype = dt;
      a.x = dx.p;
      a.add = residual ? dadd.p : nullptr;
      a.weight = dw.p;
      a.out = dout.p;
      a.rows = rows;
      a.n = n;
      ASSERT_EQ(luka::cuda::fused::residual_rms_norm(a, nullptr), "");
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      Host out(dt, rows * n);
      a.x = x.data();
      a.add = residual ? add.data() : nullptr;
      a.weight = w.data();
      a.out = out.data();
      luka::cpu::residual_rms_norm(a);
      const std::string what = name(dt) + " n " + std::to_string(n) + (residual ? " residual" : "");
      expect_near_twin(dx.to_host(dt), x, 0, 0, what + ": x written back");
      expect_near_twin(dout.to_host(dt), out, dt == ElemDtype::kF32 ? 2 : 1, 0, what);
    }
  }
}

std::vector<float> inverse_frequencies(std::int64_t d) {
  std::vector<float> inv(static_cast<std::size_t>(d / 2));
  for (std::int64_t i = 0; i < d / 2; ++i)
    inv[static_cast<std::size_t>(i)] = static_cast<float>(std::pow(1e6, -2.0 * i / d));
  return inv;
}

TEST_P(FusedLayerCuda, RopeTablesEqualTheirCpuTwin) {
  const ElemDtype dt = GetParam();
  const std::int64_t half = 64;
  const std::vector<float> inv = inverse_frequencies(2 * half);
  Host inv_h(ElemDtype::kF32, half);
  std::memcpy(inv_h.data(), inv.data(), inv.size() * 4);
  Device dinv(inv_h), dpos(sizeof(std::int64_t)), dcos(half * 4), dsin(half * 4);
  for (std::int64_t pos : {0, 1, 4095, 32767, 131071}) {
    dpos.upload(&pos);
    luka::fused::RopeTableArgs a;
    a.dtype = dt;
    a.position = dpos.as<std::int64_t>();
    a.inv_freq = dinv.as<float>();
    a.cos = dcos.as<float>();
    a.sin = dsin.as<float>();
    a.half = half;
    ASSERT_EQ(luka::cuda::fused::rope_tables(a, nullptr), "");
    Host cos(ElemDtype::kF32, half), sin(ElemDtype::kF32, half);
    a.position = &pos;
    a.inv_freq = inv.data();
    a.cos = static_cast<float*>(cos.data());
    a.sin = static_cast<float*>(sin.data());
    luka::cpu::rope_tables(a);
    // Tables are fp32 arrays of values rounded to the dtype: compare as fp32 with the dtype's step.
    Host gc = dcos.to_host(ElemDtype::kF32), gs = dsin.to_host(ElemDtype::kF32);
    const std::int64_t steps = dt == ElemDtype::kF32 ? 4 : 65536;  // one bf16 step is 2^16 fp32 ulps
    expect_near_twin(gc, cos, steps, 4e-7, name(dt) + " cos at " + std::to_string(pos));
    expect_near_twin(gs, sin, steps, 4e-7, name(dt) + " sin at " + std::to_string(pos));
  }
}

struct QkvCase {
  std::int64_t heads, kv_heads, head_dim, capacity;
  bool norm, in_place;
};

// One q|k|v row through the kernel and the twin at three positions (the first, the last, one past
// the capacity), each written to device memory between launches of the same arguments.
void check_qkv(ElemDtype dt, const QkvCase& c) {
  const std::int64_t H = c.heads, KV = c.kv_heads, D = c.head_dim, half = D / 2, T = c.capacity;
  const std::vector<float> inv = inverse_frequencies(D);
  Host qn = random(dt, D, 11, 1.0f), kn = random(dt, D, 12, 1.0f);
  Host kc = random(dt, KV * T * D, 13, 1.0f), vc = random(dt, KV * T * D, 14, 1.0f);
  Device dqn(qn), dkn(kn), dkc(kc), dvc(vc), dpos(sizeof(std::int64_t)), dcos(half * 4), dsin(half * 4);
  const std::size_t elem = dt == ElemDtype::kF32 ? 4 : 2;
  Device dqkv(static_cast<std::size_t>((H + 2 * KV) * D) * elem), dq(static_cast<std::size_t>(H * D) * elem);
  // The same arguments for every launch: only the memory they point at changes.
  luka::fused::QkvArgs dev;
  dev.dtype = dt;
  dev.qkv = dqkv.p;
  dev.q_out = c.in_place ? dqkv.p : dq.p;
  dev.q_norm = c.norm ? dqn.p : nullptr;
  dev.k_norm = c.norm ? dkn.p : nullptr;
  dev.cos = dcos.as<float>();
  dev.sin = dsin.as<float>();
  dev.position = dpos.as<std::int64_t>();
  dev.k_cache = dkc.p;
  dev.v_cache = dvc.p;
  dev.head_stride = T * D;
  dev.token_stride = D;
  dev.capacity = T;
  dev.heads = H;
  dev.kv_heads = KV;
  dev.head_dim = D;
  for (const std::int64_t pos : {std::int64_t{0}, T - 1, T}) {
    Host qkv = random(dt, (H + 2 * KV) * D, static_cast<std::uint32_t>(15 + pos), 2.0f);
    std::vector<float> cos(static_cast<std::size_t>(half)), sin(static_cast<std::size_t>(half));
    luka::fused::RopeTableArgs t;
    t.dtype = dt;
    t.position = &pos;
    t.inv_freq = inv.data();
    t.cos = cos.data();
    t.sin = sin.data();
    t.half = half;
    luka::cpu::rope_tables(t);  // the same tables on both sides: this checks the q|k|v recipe alone
    dcos.upload(cos.data());
    dsin.upload(sin.data());
    dpos.upload(&pos);
    dqkv.upload(qkv.bytes.data());
    ASSERT_EQ(luka::cuda::fused::qkv_norm_rope(dev, nullptr), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    Host q(dt, H * D);
    luka::fused::QkvArgs a = dev;
    a.qkv = qkv.data();
    a.q_out = c.in_place ? qkv.data() : q.data();
    a.q_norm = c.norm ? qn.data() : nullptr;
    a.k_norm = c.norm ? kn.data() : nullptr;
    a.cos = cos.data();
    a.sin = sin.data();
    a.position = &pos;
    a.k_cache = kc.data();
    a.v_cache = vc.data();
    luka::cpu::qkv_norm_rope(a);
    const std::string what = name(dt) + " H" + std::to_string(H) + " KV" + std::to_string(KV) + " D" +
                             std::to_string(D) + (c.norm ? " norm" : "") + (c.in_place ? " in place" : "") +
                             " at " + std::to_string(pos);
    const std::int64_t steps = dt == ElemDtype::kF32 ? 2 : 1;
    expect_near_twin(c.in_place ? dqkv.to_host(dt) : dq.to_host(dt), c.in_place ? qkv : q, steps, 0, what + ": q");
    expect_near_twin(dkc.to_host(dt), kc, steps, 0, what + ": key cache");
    expect_near_twin(dvc.to_host(dt), vc, 0, 0, what + ": value cache");
  }
}

TEST_P(FusedLayerCuda, QkvNormRopeAppendEqualsItsCpuTwin) {
  for (const QkvCase& c : {QkvCase{16, 8, 128, 37, true, false}, QkvCase{16, 8, 128, 37, true, true},
                           QkvCase{32, 8, 128, 5, true, true}, QkvCase{4, 2, 64, 9, false, false},
                           QkvCase{4, 1, 256, 3, true, false}, QkvCase{2, 2, 16, 4, true, true}})
    check_qkv(GetParam(), c);
}

TEST_P(FusedLayerCuda, SwigluEqualsItsCpuTwin) {
  const ElemDtype dt = GetParam();
  for (const std::int64_t I : {1, 257, 3072, 9728}) {
    Host gu = random(dt, 2 * I, static_cast<std::uint32_t>(21 + I), 4.0f);
    Device dgu(gu), dout(I * (dt == ElemDtype::kF32 ? 4 : 2));
    luka::fused::SwigluArgs a;
    a.dtype = dt;
    a.gate_up = dgu.p;
    a.out = dout.p;
    a.intermediate = I;
    ASSERT_EQ(luka::cuda::fused::swiglu(a, nullptr), "");
    Host out(dt, I);
    a.gate_up = gu.data();
    a.out = out.data();
    luka::cpu::swiglu(a);
    expect_near_twin(dout.to_host(dt), out, dt == ElemDtype::kF32 ? 8 : 2, 0, name(dt) + " I " + std::to_string(I));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedLayerCuda, ::testing::Values(ElemDtype::kF32, ElemDtype::kBF16),
                         [](const auto& info) { return info.param == ElemDtype::kF32 ? "f32" : "bf16"; });

// Refusals need no GPU: the kernels check their arguments before launching anything.
TEST(FusedLayerCudaArgs, MisuseIsRefusedBeforeAnyLaunch) {
  EXPECT_EQ(luka::cuda::fused::qkv_norm_rope(luka::fused::QkvArgs{}, nullptr),
            "qkv: qkv, q_out, cos, sin, position and both caches are required");
  EXPECT_EQ(luka::cuda::fused::residual_rms_norm(luka::fused::NormArgs{}, nullptr),
            "norm: x, weight and out are required");
  EXPECT_EQ(luka::cuda::fused::swiglu(luka::fused::SwigluArgs{}, nullptr), "swiglu: gate_up and out are required");
  EXPECT_EQ(luka::cuda::fused::rope_tables(luka::fused::RopeTableArgs{}, nullptr),
            "rope tables: position, inv_freq, cos, sin are required");
}

}  // namespace
