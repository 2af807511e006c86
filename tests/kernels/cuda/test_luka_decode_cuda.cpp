// The GPU LuKA decode step (kernels/cuda/luka_layer) against the CPU LukaAttention, the
// reference: the same random sequence is prefilled on the CPU, its accumulators handed to the
// GPU state, and then both decode step by step. Every step compares the attention output, the
// effective attention row, the refined pages / heavy hitters and the page schedule; the
// accumulators and summaries are compared along the way. Runs only where a CUDA device exists.
//
// Tolerances: both sides read the same rounded inputs and compute in fp32, so rows and
// accumulators agree to fp32 rounding (2e-5 absolute on probabilities, 1e-4 relative on
// accumulators); outputs to 2e-4 in fp32 and to bf16 rounding (1e-2) in bf16. Selections must be
// identical except where the masses deciding them tie to within 1e-5.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/luka/cuda_attention.h"
#include "core/luka/luka_attention.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/luka/state.h"

namespace luka {
namespace {

#define SKIP_WITHOUT_GPU()                                                                  \
  do {                                                                                      \
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device: the GPU kernels are not run here"; \
  } while (0)

// Device memory for one tensor or scratch array.
struct Dev {
  void* p = nullptr;
  std::size_t bytes = 0;
  explicit Dev(std::size_t n) : bytes(n) { EXPECT_EQ(cudaMalloc(&p, std::max<std::size_t>(n, 1)), cudaSuccess); }
  explicit Dev(const at::Tensor& t) : Dev(t.nbytes()) {
    const at::Tensor c = t.contiguous();
    EXPECT_EQ(cudaMemcpy(p, c.const_data_ptr(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

at::Tensor download(const void* p, at::IntArrayRef shape, at::ScalarType type) {
  at::Tensor t = at::empty(shape, type);
  EXPECT_EQ(cudaMemcpy(t.mutable_data_ptr(), p, t.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  return t;
}

double max_abs(const at::Tensor& a, const at::Tensor& b) { return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(); }
double max_rel(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  return ((x - y).abs() / y.abs().clamp_min(1e-3)).max().item<double>();
}

// True when two selections agree. When they differ only on entries whose scores tie (with each
// other, or with the rule's threshold `boundary`) to within 1e-5, false: the sides then rightly
// diverge and the case stops comparing. Any other difference is a failure.
bool same_selection(const std::vector<std::int64_t>& cpu, const std::vector<std::int64_t>& gpu, const std::vector<float>& score,
                    float boundary, const std::string& what) {
  if (cpu == gpu) return true;
  const std::set<std::int64_t> a(cpu.begin(), cpu.end()), b(gpu.begin(), gpu.end());
  std::vector<std::int64_t> differ;
  std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(differ));
  float lo = 1e30f, hi = -1e30f;
  bool near_boundary = !std::isnan(boundary);
  for (auto i : differ) {
    lo = std::min(lo, score[i]);
    hi = std::max(hi, score[i]);
    near_boundary = near_boundary && std::abs(score[i] - boundary) <= 1e-5f;
  }
  const bool tied = near_boundary || (a.size() == b.size() && hi - lo <= 1e-5f * std::max(1.0f, std::abs(hi)));
  if (!tied) ADD_FAILURE() << what << ": selections differ on untied entries";
  return false;
}

struct Case {
  std::string name;
  LayerConfig config;
  std::int64_t H = 4, KV = 2, D = 64, N = 120, prompt = 60;
  at::ScalarType type = at::kFloat;
  int splits = 0;
  cuda::ElemType summary_type = cuda::ElemType::kF32;
  bool reserve = true;  // false: the state grows step by step (the regrow path)
  // Switches to this config (both sides) at decode step `switch_step` when set.
  std::int64_t switch_step = 0;
  LayerConfig switch_to;
  // Real-model inputs instead of random ones when defined ([H, N, D], [KV, N, D] fp32).
  at::Tensor q, k, v;
};

// The post-RoPE q/k/v of SmolLM2-135M-Instruct's layer 12 over the first 256 tokens of emma.txt
// (tests/fixtures/make_qkv_fixture.cpp wrote it): 9 heads, 3 KV heads, head_dim 64.
struct QkvFixture {
  std::int64_t layer = 0, H = 0, KV = 0, D = 0, N = 0;
  at::Tensor q, k, v;
};

QkvFixture read_qkv_fixture() {
  QkvFixture f;
  // LUKA_SOURCE_DIR in the environment: the checkout on a GPU machine that runs binaries built
  // elsewhere (scripts/gpu_pack.sh).
  const char* root = std::getenv("LUKA_SOURCE_DIR");
  std::ifstream in(std::string(root ? root : LUKA_SOURCE_DIR) + "/tests/fixtures/smollm2_qkv_layer12.bin", std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  if (!in || std::string(magic, 8) != "LUKAQKV1") return f;
  for (std::int64_t* x : {&f.layer, &f.H, &f.KV, &f.D, &f.N}) in.read(reinterpret_cast<char*>(x), 8);
  f.q = at::empty({f.H, f.N, f.D});
  f.k = at::empty({f.KV, f.N, f.D});
  f.v = at::empty({f.KV, f.N, f.D});
  for (at::Tensor* t : {&f.q, &f.k, &f.v}) in.read(static_cast<char*>(t->mutable_data_ptr()), static_cast<std::streamsize>(t->nbytes()));
  if (!in) return QkvFixture{};
  return f;
}

// The heads [first, first + count) that share head h's selection.
std::pair<std::int64_t, std::int64_t> unit_of(Selection s, std::int64_t h, std::int64_t group, std::int64_t heads) {
  if (s == Selection::kPerHead) return {h, 1};
  if (s == Selection::kPerGroup) return {h / group * group, group};
  return {0, heads};
}

cuda::ElemType elem(at::ScalarType t) { return t == at::kFloat ? cuda::ElemType::kF32 : cuda::ElemType::kBF16; }

void run_case(const Case& c) {
  SCOPED_TRACE(c.name);
  c10::InferenceMode guard;
  at::manual_seed(17 + c.H * 7 + c.D);
  const at::Tensor q = (c.q.defined() ? c.q : at::randn({c.H, c.N, c.D}) * 1.5).to(c.type);
  const at::Tensor k = (c.k.defined() ? c.k : at::randn({c.KV, c.N, c.D})).to(c.type);
  const at::Tensor v = (c.v.defined() ? c.v : at::randn({c.KV, c.N, c.D})).to(c.type);
  const std::int64_t G = c.H / c.KV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  const auto inputs = [&](std::int64_t pos0, std::int64_t n) {
    AttentionInputs in;
    in.q = q.narrow(1, pos0, n).contiguous();
    in.k = k.narrow(1, 0, pos0 + n);
    in.v = v.narrow(1, 0, pos0 + n);
    in.q_pos0 = pos0;
    in.group_size = G;
    in.scale = scale;
    return in;
  };

  LukaAttention cpu(3, c.config);
  cpu.forward(inputs(0, c.prompt));

  cuda::LayerParams params;
  ASSERT_EQ(to_cuda_params(c.config, &params), "");
  params.splits = c.splits;
  cuda::LayerState gpu(3, c.H, c.KV, c.D, c.summary_type);
  gpu.set_params(params);
  const Dev dk(k), dv(v);
  const at::Tensor qt = q.transpose(0, 1).contiguous();  // [N, H, D]: one step's query is contiguous
  const Dev dq(qt);
  const std::size_t es = c.type == at::kFloat ? 4 : 2;
  const auto kv_view = [&](std::int64_t tokens) {
    cuda::KvView kv;
    kv.type = elem(c.type);
    kv.k = dk.p;
    kv.v = dv.p;
    kv.kv_heads = c.KV;
    kv.tokens = tokens;
    kv.head_dim = c.D;
    kv.head_stride = c.N * c.D;
    kv.token_stride = c.D;
    return kv;
  };
  if (c.reserve) ASSERT_EQ(gpu.reserve(c.N, nullptr), "");
  {
    const Dev imp(cpu.importance().contiguous()), h2o(cpu.h2o_score().contiguous());
    ASSERT_EQ(gpu.load_prefill(imp.as<float>(), h2o.as<float>(), c.prompt, kv_view(c.prompt), nullptr), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }

  const auto compare_state = [&](const std::string& when) {
    SCOPED_TRACE(when);
    const std::int64_t T = cpu.tokens(), ld = gpu.ld();
    const at::Tensor imp = download(gpu.importance(), {c.KV, ld}, at::kFloat).narrow(1, 0, T);
    const at::Tensor h2o = download(gpu.h2o(), {c.H, ld}, at::kFloat).narrow(1, 0, T);
    // The CPU keeps fp32 summaries. bf16 summaries on the GPU move each summary logit by up to
    // about 2^-9 of |q|·|k|, and with it every probability of the row: accumulators then agree
    // to 2e-3 relative rather than fp32's 1e-4.
    const double acc_tol = c.summary_type == cuda::ElemType::kF32 ? 1e-4 : 2e-3;
    EXPECT_LT(max_rel(imp, cpu.importance()), acc_tol);
    EXPECT_LT(max_rel(h2o, cpu.h2o_score()), acc_tol);
    ASSERT_EQ(gpu.pages().size(), cpu.pages().size());
    for (std::size_t i = 0; i < cpu.pages().size(); ++i) {
      EXPECT_EQ(gpu.pages()[i].first, cpu.pages()[i].start);
      EXPECT_EQ(gpu.pages()[i].second, cpu.pages()[i].end);
    }
    const std::int64_t P = static_cast<std::int64_t>(cpu.pages().size());
    if (P == 0) return;
    const at::ScalarType st = c.summary_type == cuda::ElemType::kF32 ? at::kFloat : at::kBFloat16;
    const double tol = st == at::kFloat ? 1e-5 : 1e-2;
    const std::int64_t pc = gpu.summary_capacity();
    EXPECT_LT(max_abs(download(gpu.summary_keys(), {c.KV, pc, c.D}, st).narrow(1, 0, P), cpu.summary_keys()), tol);
    EXPECT_LT(max_abs(download(gpu.summary_values(), {c.KV, pc, c.D}, st).narrow(1, 0, P), cpu.summary_values()), tol);
    EXPECT_LT(max_abs(download(gpu.summary_bias(), {c.KV, pc}, at::kFloat).narrow(1, 0, P), cpu.summary_bias()), 1e-5);
    const std::int64_t E = cpu.paged_end();
    EXPECT_LT(max_abs(download(gpu.spread(), {c.KV, ld}, at::kFloat).narrow(1, 0, E), cpu.spread()), 1e-6);
  };
  compare_state("after prefill");

  // bf16 outputs: one step of bf16 in [2, 4) is 1.6e-2, so a rounding flip costs that much.
  const double out_tol = c.type == at::kFloat ? (c.summary_type == cuda::ElemType::kF32 ? 2e-4 : 2e-2) : 3.2e-2;
  const double row_tol = c.summary_type == cuda::ElemType::kF32 ? 2e-5 : 5e-3;
  for (std::int64_t pos = c.prompt; pos < c.N; ++pos) {
    const std::int64_t T = pos + 1, step = pos - c.prompt + 1;
    SCOPED_TRACE("decode step " + std::to_string(step) + ", T = " + std::to_string(T));
    if (c.switch_step > 0 && step == c.switch_step) {
      cpu.set_config(c.switch_to);
      ASSERT_EQ(to_cuda_params(c.switch_to, &params), "");
      params.splits = c.splits;
      gpu.set_params(params);
    }
    const std::int64_t P = static_cast<std::int64_t>(gpu.pages().size());
    const std::int64_t max_refined = std::max<std::int64_t>(gpu.max_refined(T), 1);
    const std::int64_t heavy = std::max<std::int64_t>(gpu.heavy_count(T), 0);
    Dev out(c.H * c.D * es), eff(c.H * T * 4), mass(std::max<std::int64_t>(c.H * P, 1) * 4), refined(c.H * max_refined * 4),
        count(c.H * 4), heavy_out(std::max<std::int64_t>(c.H * heavy, 1) * 4);
    cuda::StepOutputs o;
    o.effective = eff.as<float>();
    o.summary_mass = mass.as<float>();
    o.refined = refined.as<int>();
    o.refined_count = count.as<int>();
    o.heavy = heavy_out.as<int>();
    const at::Tensor cpu_out = cpu.forward(inputs(pos, 1)).view({c.H, c.D});
    const LukaStep& st = cpu.last_step();
    ASSERT_EQ(gpu.decode(static_cast<const char*>(dq.p) + pos * c.H * c.D * es, out.p, kv_view(T), static_cast<float>(scale),
                         nullptr, o),
              "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const at::Tensor g_out = download(out.p, {c.H, c.D}, c.type);
    const at::Tensor g_eff = download(eff.p, {c.H, T}, at::kFloat);
    bool same = true;
    if (st.mode == AttentionMode::kClustered && P > 0) {
      const at::Tensor g_mass = download(mass.p, {c.H, P}, at::kFloat);
      EXPECT_LT(max_abs(g_mass, st.summary_mass), row_tol);
      const at::Tensor g_ref = download(refined.p, {c.H, max_refined}, at::kInt);
      const at::Tensor g_cnt = download(count.p, {c.H}, at::kInt);
      // The score a unit selects on: α per head, or its max over the unit's heads.
      const ClusteredConfig& cc = cpu.config().clustered;
      const float boundary = cc.rule == RefineRule::kThreshold ? static_cast<float>(cc.epsilon) : NAN;
      for (std::int64_t h = 0; h < c.H; ++h) {
        std::vector<std::int64_t> gsel;
        for (int i = 0; i < g_cnt[h].item<int>(); ++i) gsel.push_back(g_ref[h][i].item<int>());
        std::vector<float> score(static_cast<std::size_t>(P), 0.f);
        const auto [h0, hn] = unit_of(cc.selection, h, G, c.H);
        for (std::int64_t j = h0; j < h0 + hn; ++j)
          for (std::int64_t p = 0; p < P; ++p) score[p] = std::max(score[p], st.summary_mass[j][p].item<float>());
        same = same_selection(st.refined[h], gsel, score, boundary, "refined pages of head " + std::to_string(h)) && same;
      }
    }
    if (st.mode == AttentionMode::kLined && heavy > 0) {
      const at::Tensor g_heavy = download(heavy_out.p, {c.H, heavy}, at::kInt);
      // h2o before this step, undone from the CPU's after-step score: (after − row) / decay.
      const at::Tensor before = (cpu.h2o_score() - st.effective) / cpu.config().lined.decay;
      const Selection sel = cpu.config().lined.selection;
      for (std::int64_t h = 0; h < c.H; ++h) {
        std::vector<std::int64_t> gsel(g_heavy[h].data_ptr<int>(), g_heavy[h].data_ptr<int>() + heavy);
        const auto [h0, hn] = unit_of(sel, h, G, c.H);
        const at::Tensor s = before.narrow(0, h0, hn).sum(0).contiguous();
        std::vector<float> score(s.data_ptr<float>(), s.data_ptr<float>() + T);
        same = same_selection(st.heavy[h], gsel, score, NAN, "heavy hitters of head " + std::to_string(h)) && same;
      }
    }
    if (!same) {
      if (!::testing::Test::HasFailure())
        std::printf("  %s: a selection tie at step %lld; the sides rightly diverge, comparison stops\n", c.name.c_str(),
                    static_cast<long long>(step));
      return;
    }
    EXPECT_LT(max_abs(g_out, cpu_out), out_tol);
    EXPECT_LT(max_abs(g_eff, st.effective), row_tol);
    EXPECT_LT((g_eff.to(at::kDouble).sum(1) - 1).abs().max().item<double>(), 1e-4) << "effective rows must sum to 1";
    if (::testing::Test::HasFailure()) return;  // one failing step is enough to read
    if (step % 8 == 0) compare_state("after step " + std::to_string(step));
  }
  compare_state("at the end");
}

LayerConfig lined(double rho, std::int64_t window, Selection s, double decay = 1.0) {
  LayerConfig c;
  c.mode = AttentionMode::kLined;
  c.lined.rho = rho;
  c.lined.window = window;
  c.lined.selection = s;
  c.lined.decay = decay;
  return c;
}

LayerConfig clustered(RefineRule rule, RefineMath math, Selection s, Compressor comp = Compressor::kMean,
                      SummaryBias bias = SummaryBias::kNone) {
  LayerConfig c;
  c.mode = AttentionMode::kClustered;
  c.clustered.page_size = 8;
  c.clustered.tail = 16;
  c.clustered.interval = 4;
  c.clustered.rule = rule;
  c.clustered.math = math;
  c.clustered.selection = s;
  c.clustered.compressor = comp;
  c.clustered.bias = bias;
  c.clustered.tau = 2.0;
  c.clustered.epsilon = 0.03;
  c.clustered.top_frac = 0.25;
  c.clustered.top_p = 0.5;
  c.clustered.top_k = 3;
  return c;
}

TEST(LukaDecodeCuda, DenseModeMatchesTheCpuAcrossShapes) {
  SKIP_WITHOUT_GPU();
  for (const auto& [H, KV, D, type, splits] :
       std::vector<std::tuple<int, int, int, at::ScalarType, int>>{{4, 4, 64, at::kFloat, 0}, {4, 2, 128, at::kBFloat16, 3},
                                                                   {6, 2, 64, at::kFloat, 5}, {8, 2, 128, at::kFloat, 0}}) {
    Case c;
    c.name = "dense H" + std::to_string(H) + " KV" + std::to_string(KV) + " D" + std::to_string(D);
    c.H = H;
    c.KV = KV;
    c.D = D;
    c.type = type;
    c.splits = splits;
    c.N = 90;
    c.prompt = 57;
    run_case(c);
  }
}

TEST(LukaDecodeCuda, LinedMatchesTheCpuForEverySelectionAndDecay) {
  SKIP_WITHOUT_GPU();
  for (const Selection s : {Selection::kPerHead, Selection::kPerGroup, Selection::kPerLayer})
    for (const double decay : {1.0, 0.9}) {
      Case c;
      c.name = std::string("lined ") + to_string(s) + " decay " + std::to_string(decay);
      c.config = lined(0.25, 16, s, decay);
      c.H = 6;
      c.KV = 2;
      c.splits = 2;
      run_case(c);
    }
  Case frac;
  frac.name = "lined window_frac, bf16, D128";
  frac.config = lined(0.2, 16, Selection::kPerHead);
  frac.config.lined.window_frac = 0.1;
  frac.type = at::kBFloat16;
  frac.D = 128;
  run_case(frac);
  Case no_window;
  no_window.name = "lined window 0 (heavy hitters only)";
  no_window.config = lined(0.3, 0, Selection::kPerGroup);
  run_case(no_window);
  Case tiny;  // cover of 6–7 entries over 4 splits: empty splits
  tiny.name = "lined, empty splits";
  tiny.config = lined(0.1, 3, Selection::kPerHead);
  tiny.prompt = 20;
  tiny.N = 40;
  tiny.splits = 4;
  run_case(tiny);
  Case all;
  all.name = "lined budget covering the context";
  all.config = lined(1.0, 16, Selection::kPerHead);
  run_case(all);
}

TEST(LukaDecodeCuda, ClusteredMatchesTheCpuForEveryRuleMathAndSharing) {
  SKIP_WITHOUT_GPU();
  for (const RefineRule rule : {RefineRule::kTopK, RefineRule::kThreshold, RefineRule::kTopFrac, RefineRule::kTopP})
    for (const RefineMath math : {RefineMath::kMassPreserving, RefineMath::kExact})
      for (const Selection s : {Selection::kPerHead, Selection::kPerGroup, Selection::kPerLayer}) {
        Case c;
        c.name = std::string("clustered ") + to_string(rule) + " " + to_string(math) + " " + to_string(s);
        c.config = clustered(rule, math, s);
        c.H = 8;
        c.KV = 2;
        c.splits = 3;
        run_case(c);
      }
}

TEST(LukaDecodeCuda, ClusteredCompressorsBiasesAndOptions) {
  SKIP_WITHOUT_GPU();
  std::vector<Case> cases;
  for (const Compressor comp : {Compressor::kMean, Compressor::kAttentionWeighted, Compressor::kRandom})
    for (const SummaryBias bias : {SummaryBias::kNone, SummaryBias::kFixed, SummaryBias::kAdaptive}) {
      Case c;
      c.name = std::string("clustered ") + to_string(comp) + " bias " + to_string(bias);
      c.config = clustered(RefineRule::kTopK, RefineMath::kExact, Selection::kPerHead, comp, bias);
      cases.push_back(c);
    }
  Case big_k;  // top_k above the split-local candidates: the sorting path
  big_k.name = "clustered top_k 12";
  big_k.config = clustered(RefineRule::kTopK, RefineMath::kMassPreserving, Selection::kPerHead);
  big_k.config.clustered.top_k = 12;
  cases.push_back(big_k);
  Case first;
  first.name = "clustered always_refine_first 2, zero_v";
  first.config = clustered(RefineRule::kTopK, RefineMath::kMassPreserving, Selection::kPerGroup);
  first.config.clustered.always_refine_first = 2;
  first.config.clustered.zero_v = true;
  cases.push_back(first);
  for (const int gqa : {1, 3, 4}) {
    Case g;
    g.name = "clustered GQA " + std::to_string(gqa) + ", bf16, D128";
    g.config = clustered(RefineRule::kTopK, RefineMath::kExact, Selection::kPerHead, Compressor::kAttentionWeighted);
    g.KV = 2;
    g.H = 2 * gqa;
    g.D = 128;
    g.type = at::kBFloat16;
    g.splits = 4;
    cases.push_back(g);
  }
  Case bf16_summaries;  // nothing refined (no page holds more than all the mass), so rounding cannot flip a selection
  bf16_summaries.name = "clustered with bf16 summaries";
  bf16_summaries.config = clustered(RefineRule::kThreshold, RefineMath::kMassPreserving, Selection::kPerHead);
  bf16_summaries.config.clustered.epsilon = 1.0;  // a page refines when its mass exceeds ε
  bf16_summaries.type = at::kBFloat16;
  bf16_summaries.summary_type = cuda::ElemType::kBF16;
  cases.push_back(bf16_summaries);
  Case no_pages;  // pages appear only at T = 72: steps before run with P = 0
  no_pages.name = "clustered, no pages until mid-run";
  no_pages.config = clustered(RefineRule::kTopK, RefineMath::kMassPreserving, Selection::kPerHead);
  no_pages.config.clustered.tail = 64;
  no_pages.prompt = 30;
  no_pages.N = 100;
  cases.push_back(no_pages);
  Case grow;  // no reserve: accumulators, summaries and page starts regrow during the run
  grow.name = "clustered, state grown step by step";
  grow.config = clustered(RefineRule::kTopP, RefineMath::kExact, Selection::kPerHead);
  grow.reserve = false;
  grow.prompt = 40;
  grow.N = 200;
  cases.push_back(grow);
  for (const Case& c : cases) run_case(c);
}

TEST(LukaDecodeCuda, QkvFixtureReadsBack) {  // runs everywhere: the GPU cases below depend on it
  const QkvFixture f = read_qkv_fixture();
  ASSERT_TRUE(f.q.defined()) << "tests/fixtures/smollm2_qkv_layer12.bin is missing or truncated";
  EXPECT_EQ(f.H, 9);
  EXPECT_EQ(f.KV, 3);
  EXPECT_EQ(f.D, 64);
  EXPECT_EQ(f.N, 256);
  for (const at::Tensor& t : {f.q, f.k, f.v}) {
    EXPECT_TRUE(t.isfinite().all().item<bool>());
    EXPECT_GT(t.norm(2, -1).min().item<double>(), 0.1) << "every row carries signal";
  }
}

// Real attention is peaked and structured (sinks, recency) where random inputs are not.
TEST(LukaDecodeCuda, RealModelInputsMatchTheCpuInEveryMode) {
  SKIP_WITHOUT_GPU();
  const QkvFixture f = read_qkv_fixture();
  ASSERT_TRUE(f.q.defined()) << "tests/fixtures/smollm2_qkv_layer12.bin is missing or truncated";
  LayerConfig awe = clustered(RefineRule::kTopK, RefineMath::kExact, Selection::kPerHead, Compressor::kAttentionWeighted,
                              SummaryBias::kAdaptive);
  awe.clustered.tau = 7.0;
  const std::vector<std::pair<std::string, LayerConfig>> configs = {
      {"dense", LayerConfig{}},
      {"lined", lined(0.125, 32, Selection::kPerHead)},
      {"clustered top_k mass-preserving", clustered(RefineRule::kTopK, RefineMath::kMassPreserving, Selection::kPerHead)},
      {"clustered threshold per group", clustered(RefineRule::kThreshold, RefineMath::kMassPreserving, Selection::kPerGroup)},
      {"clustered attention-weighted τ 7, adaptive bias, exact", awe}};
  for (const auto& [name, config] : configs)
    for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
      Case c;
      c.name = "SmolLM2 layer 12: " + name + (type == at::kFloat ? ", fp32" : ", bf16");
      c.config = config;
      c.config.clustered.page_size = 16;
      c.config.clustered.tail = 32;
      c.config.clustered.interval = 8;
      c.H = f.H;
      c.KV = f.KV;
      c.D = f.D;
      c.N = f.N;
      c.prompt = 128;
      c.type = type;
      c.q = f.q;
      c.k = f.k;
      c.v = f.v;
      run_case(c);
    }
}

TEST(LukaDecodeCuda, ExactRefinementOfEveryPageIsDense) {
  SKIP_WITHOUT_GPU();
  Case c;
  c.name = "clustered exact, every page refined";
  c.config = clustered(RefineRule::kTopFrac, RefineMath::kExact, Selection::kPerHead);
  c.config.clustered.top_frac = 1.0;
  run_case(c);
  // The CPU reference is itself dense here (a CPU test checks it), so matching it is matching dense.
}

TEST(LukaDecodeCuda, ModeSwitchesMidSequenceKeepBothSidesInStep) {
  SKIP_WITHOUT_GPU();
  Case a;
  a.name = "clustered → lined at step 20";
  a.config = clustered(RefineRule::kTopK, RefineMath::kMassPreserving, Selection::kPerHead, Compressor::kAttentionWeighted);
  a.switch_step = 20;
  a.switch_to = lined(0.2, 16, Selection::kPerHead);
  a.switch_to.clustered = a.config.clustered;
  run_case(a);
  Case b;
  b.name = "dense → clustered at step 9";
  b.config.clustered = clustered(RefineRule::kTopK, RefineMath::kExact, Selection::kPerHead).clustered;
  b.switch_step = 9;
  b.switch_to = clustered(RefineRule::kTopK, RefineMath::kExact, Selection::kPerHead);
  run_case(b);
}

// The prefill kernel against the CPU prefill, in two calls (the second continuing at q_pos0 > 0)
// over a cache with room beyond the tokens (head stride ≠ tokens·D): outputs, accumulators
// (starting from random values, so `=` instead of `+=` would show), and the pooled map of each
// call against at::max_pool2d (ceil mode) of the CPU's probabilities for the same queries.
TEST(LukaDecodeCuda, PrefillMatchesTheCpuAndPoolsTheMap) {
  SKIP_WITHOUT_GPU();
  for (const auto& [H, KV, D, n, type] : std::vector<std::tuple<int, int, int, int, at::ScalarType>>{
           {4, 2, 64, 77, at::kFloat}, {8, 2, 128, 130, at::kBFloat16}, {3, 3, 64, 33, at::kFloat}}) {
    SCOPED_TRACE("H " + std::to_string(H) + " KV " + std::to_string(KV) + " D " + std::to_string(D) + " n " + std::to_string(n));
    c10::InferenceMode guard;
    at::manual_seed(n);
    const std::int64_t cap = n + 9, n1 = n / 2;
    const at::Tensor q = (at::randn({H, n, D}) * 1.5).to(type);
    const at::Tensor kbuf = at::randn({KV, cap, D}).to(type), vbuf = at::randn({KV, cap, D}).to(type);
    const Dev dk(kbuf), dv(vbuf);
    for (const std::int64_t pool : {1, 2, 4, 8, 32, 64}) {
      SCOPED_TRACE("pool " + std::to_string(pool));
      LukaAttention cpu(0, LayerConfig{});
      at::Tensor probs;  // the current call's [H, queries, tokens]
      cpu.set_prefill_observer([&](int, std::int64_t q0, std::int64_t head0, const at::Tensor& p) {
        probs.narrow(0, head0, p.size(0)).narrow(1, q0 - (probs.size(2) - probs.size(1)), p.size(1)).copy_(p);
      });
      const at::Tensor imp0 = at::rand({KV, n}), h2o0 = at::rand({H, n});
      const Dev imp(imp0), h2o(h2o0);
      for (const auto& [q0, m] : {std::pair<std::int64_t, std::int64_t>{0, n1}, {n1, n - n1}}) {
        SCOPED_TRACE("queries from " + std::to_string(q0));
        const std::int64_t T = q0 + m;
        AttentionInputs in;
        in.q = q.narrow(1, q0, m).contiguous();
        in.k = kbuf.narrow(1, 0, T);
        in.v = vbuf.narrow(1, 0, T);
        in.q_pos0 = q0;
        in.group_size = H / KV;
        in.scale = 1.0 / std::sqrt(static_cast<double>(D));
        probs = at::zeros({H, m, T});
        const at::Tensor cpu_out = cpu.forward(in);
        const Dev dq(in.q), out(cpu_out.nbytes());
        const std::int64_t rows = (m + pool - 1) / pool, cols = (T + pool - 1) / pool;
        const Dev pooled(H * rows * cols * 4);
        cuda::PrefillArgs a;
        a.kv = cuda::KvView{elem(type), dk.p, dv.p, KV, T, D, cap * D, D};
        a.q = dq.p;
        a.out = out.p;
        a.heads = H;
        a.queries = m;
        a.q_pos0 = q0;
        a.scale = static_cast<float>(in.scale);
        a.acc = cuda::Accumulators{imp.as<float>(), h2o.as<float>(), n, 1.0f};
        a.pooled = pooled.as<float>();
        a.pool = pool;
        const Dev ws(cuda::prefill_workspace_bytes(a));
        ASSERT_EQ(cuda::prefill_attention(a, ws.p, ws.bytes, nullptr), "");
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_LT(max_abs(download(out.p, {m, H * D}, type), cpu_out), type == at::kFloat ? 2e-4 : 3.2e-2);
        // The CPU state began at zero; the GPU's at imp0 / h2o0.
        EXPECT_LT(max_rel(download(imp.p, {KV, n}, at::kFloat).narrow(1, 0, T) - imp0.narrow(1, 0, T), cpu.importance()), 1e-4);
        EXPECT_LT(max_rel(download(h2o.p, {H, n}, at::kFloat).narrow(1, 0, T) - h2o0.narrow(1, 0, T), cpu.h2o_score()), 1e-4);
        const at::Tensor expect = at::max_pool2d(probs, {pool, pool}, {pool, pool}, {0, 0}, {1, 1}, /*ceil_mode=*/true);
        EXPECT_LT(max_abs(download(pooled.p, {H, rows, cols}, at::kFloat), expect), 2e-5);
      }
    }
  }
}

// A decode step issues no host synchronization: each mode's step (page creation included, on
// steps that make pages) is captured into a CUDA graph in the strictest capture mode, replayed,
// and matches the CPU's step.
TEST(LukaDecodeCuda, DecodeStepsCaptureIntoCudaGraphs) {
  SKIP_WITHOUT_GPU();
  c10::InferenceMode guard;
  const std::int64_t H = 8, KV = 2, D = 128, N = 80, prompt = 50;
  at::manual_seed(5);
  const at::Tensor q = (at::randn({H, N, D}) * 1.5).to(at::kBFloat16);
  const at::Tensor k = at::randn({KV, N, D}).to(at::kBFloat16), v = at::randn({KV, N, D}).to(at::kBFloat16);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const Dev dk(k), dv(v), dq(q.transpose(0, 1).contiguous());
  for (LayerConfig config : {clustered(RefineRule::kTopK, RefineMath::kExact, Selection::kPerHead),
                             lined(0.25, 16, Selection::kPerGroup), LayerConfig{}}) {
    config.clustered.page_size = 8;
    config.clustered.tail = 16;
    config.clustered.interval = 4;
    SCOPED_TRACE(to_string(config.mode));
    LukaAttention cpu(1, config);
    AttentionInputs in;
    in.group_size = H / KV;
    in.scale = scale;
    const auto inputs = [&](std::int64_t pos0, std::int64_t n) {
      in.q = q.narrow(1, pos0, n).contiguous();
      in.k = k.narrow(1, 0, pos0 + n);
      in.v = v.narrow(1, 0, pos0 + n);
      in.q_pos0 = pos0;
      return in;
    };
    cpu.forward(inputs(0, prompt));
    cuda::LayerParams params;
    ASSERT_EQ(to_cuda_params(config, &params), "");
    cuda::LayerState gpu(1, H, KV, D, cuda::ElemType::kF32);
    gpu.set_params(params);
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    ASSERT_EQ(gpu.reserve(N, stream), "");
    const auto kv = [&](std::int64_t T) { return cuda::KvView{cuda::ElemType::kBF16, dk.p, dv.p, KV, T, D, N * D, D}; };
    {
      const Dev imp(cpu.importance().contiguous()), h2o(cpu.h2o_score().contiguous());
      ASSERT_EQ(gpu.load_prefill(imp.as<float>(), h2o.as<float>(), prompt, kv(prompt), stream), "");
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    }
    const Dev out(H * D * 2);
    for (std::int64_t pos = prompt; pos < N; ++pos) {
      const std::int64_t step = pos - prompt + 1;
      SCOPED_TRACE("step " + std::to_string(step));
      const void* qp = static_cast<const char*>(dq.p) + pos * H * D * 2;
      if (step == 1) {  // one plain step, then graphs: reserve() sized everything, so none allocates
        ASSERT_EQ(gpu.decode(qp, out.p, kv(pos + 1), static_cast<float>(scale), stream), "");
      } else {
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
        const std::string err = gpu.decode(qp, out.p, kv(pos + 1), static_cast<float>(scale), stream);
        ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess) << "the step synchronized with the host";
        ASSERT_EQ(err, "");
        ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
        ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
      }
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const at::Tensor cpu_out = cpu.forward(inputs(pos, 1)).view({H, D});
      EXPECT_LT(max_abs(download(out.p, {H, D}, at::kBFloat16), cpu_out), 3.2e-2);
      ASSERT_EQ(gpu.pages().size(), cpu.pages().size());
    }
    cudaStreamDestroy(stream);
  }
}

TEST(LukaDecodeCuda, BadArgumentsAreReportedNotRun) {
  // Checked before any launch, so this runs with or without a GPU.
  cuda::ClusteredDecodeArgs a;
  EXPECT_EQ(cuda::clustered_decode(a, nullptr, 0, nullptr), "empty sizes");
  a.c.heads = 4;
  a.c.kv.kv_heads = 3;
  a.c.kv.tokens = 10;
  a.c.kv.head_dim = 64;
  EXPECT_EQ(cuda::clustered_decode(a, nullptr, 0, nullptr), "heads must be a multiple of kv_heads");
  a.c.kv.kv_heads = 2;
  a.c.kv.head_dim = 96;
  EXPECT_NE(cuda::clustered_decode(a, nullptr, 0, nullptr).find("head_dim 96"), std::string::npos);
  cuda::LinedDecodeArgs l;
  l.c = a.c;
  l.c.kv.head_dim = 64;
  EXPECT_EQ(cuda::lined_decode(l, nullptr, 0, nullptr), "a null pointer");
  cuda::CompressArgs p;
  p.count = 1;
  p.kv.kv_heads = 1;
  p.kv.head_dim = 64;
  p.max_page_tokens = 2048;
  EXPECT_NE(cuda::compress_pages(p, nullptr).find("1 to 1024 tokens"), std::string::npos);
  // The GPU layer runs the dense shadow itself (ATen on the device), so the kernels' parameters
  // take it; the authors' variants that change what the kernels compute are refused by name.
  cuda::LayerParams params;
  LayerConfig shadow;
  shadow.dense_shadow = true;
  EXPECT_EQ(to_cuda_params(shadow, &params), "");
  LayerConfig cover;
  cover.importance_source = ImportanceSource::kCover;
  EXPECT_NE(to_cuda_params(cover, &params).find("importance_source=cover"), std::string::npos);
  LayerConfig late;
  late.lined.heavy_late = true;
  EXPECT_NE(to_cuda_params(late, &params).find("heavy_late"), std::string::npos);
  LayerConfig authors_pages;  // the authors' page schedule is host logic: both paths run it
  authors_pages.clustered.schedule = PageSchedule::kAuthors;
  authors_pages.clustered.max_pages = 4;
  EXPECT_EQ(to_cuda_params(authors_pages, &params), "");
  EXPECT_EQ(params.clustered.schedule, PageSchedule::kAuthors);
  EXPECT_EQ(params.clustered.max_pages, 4);
}

}  // namespace
}  // namespace luka
