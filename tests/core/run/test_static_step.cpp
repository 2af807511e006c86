// The static decode step (core/run/static_step) on CPU tensors against Decoder::decode on a small
// random Qwen3 checkpoint in fp32: greedy ids identical over 64 steps, every step's logits within
// 1e-5, and — where the step runs every layer itself (plain attention, LuKA's dense, lined,
// clustered and mixed modes) — no allocation through c10's CPU allocator after two warm-up steps
// (a counting allocator installed with c10::SetCPUAllocator).
#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/luka/schedule.h"
#include "core/run/graphed_step.h"
#include "core/run/run_loop.h"
#include "core/run/static_step.h"
#include "core/util/error.h"
#include "tests/random_checkpoint.h"

namespace luka {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSteps = 64, kWarmup = 2;

// Counts every allocation made through it, and hands it to the allocator it replaced.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(std::size_t n) override {
    count.fetch_add(1);
    return base_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return base_->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t n) const override { base_->copy_data(dest, src, n); }
  std::atomic<long> count{0};

 private:
  c10::Allocator* base_;
};

// Installs a CountingAllocator as c10's CPU allocator for its lifetime, then puts the old one back.
class CountAllocations {
 public:
  CountAllocations() : old_(c10::GetCPUAllocator()), counting_(old_) {
    c10::SetCPUAllocator(&counting_, /*priority=*/0);
  }
  ~CountAllocations() { c10::SetCPUAllocator(old_, /*priority=*/0); }
  long count() const { return counting_.count.load(); }

 private:
  c10::Allocator* old_;
  CountingAllocator counting_;
};

// The random Qwen3 of tests/random_checkpoint.h: 3 layers, or 18 for mixed(8,8) (first and last 8
// lined, the 2 between clustered).
std::shared_ptr<const Model> model(int layers = test::kRandomQwen3Layers) {
  static std::map<int, std::shared_ptr<const Model>> models;
  std::shared_ptr<const Model>& m = models[layers];
  if (!m) {
    const fs::path dir =
        fs::path(LUKA_TEST_WORK) / ("static-step-qwen3-" + std::to_string(layers) + "-" + std::to_string(::getpid()));
    m = Model::load(test::write_random_qwen3(dir, layers), LoadOptions{});
  }
  return m;
}

std::vector<std::int32_t> prompt_ids() {
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(static_cast<std::int32_t>((i * 131 + 17) % test::kRandomQwen3Vocab));
  return ids;
}

int layers_for(const std::string& preset) { return preset.rfind("mixed(", 0) == 0 ? 18 : test::kRandomQwen3Layers; }

// Small pages, window and top-k sets, so that on a 40-token prompt every mode differs from dense
// and every layer makes pages during the run (after the prefill, then every 4 steps).
LukaConfig preset(const std::string& name) {
  LukaConfig c = LukaConfig::preset(name, layers_for(name));
  c.apply_override("page_size=4,tail=8,interval=4,window=8,rho=0.25,top_k=2");
  for (auto& l : c.layers)
    if (l.mode == AttentionMode::kKascade) {
      l.kascade.top_frac = 0.25;
      l.kascade.min_k = 8;
    }
  return c;
}

struct Outcome {
  std::vector<std::int32_t> ids;
  at::Tensor logits;  // [kSteps, vocab]
  long allocations = -1;
  std::vector<int> eager;
  std::vector<std::shared_ptr<LukaLayer>> luka;  // the reference's layers, their state after the run
};

Outcome reference(const std::optional<LukaConfig>& config, int layers) {
  Decoder d(model(layers));
  Outcome r;
  if (config) r.luka = install_luka(d, *config);
  const std::vector<std::int32_t> prompt = prompt_ids();
  d.reserve(static_cast<std::int64_t>(prompt.size()) + kSteps);
  at::Tensor logits = d.prefill(prompt);
  std::int32_t next = static_cast<std::int32_t>(logits.argmax().item<std::int64_t>());
  r.logits = at::empty({kSteps, test::kRandomQwen3Vocab}, at::kFloat);
  for (std::int64_t i = 0; i < kSteps; ++i) {
    logits = d.decode(next);
    r.logits[i].copy_(logits);
    next = static_cast<std::int32_t>(logits.argmax().item<std::int64_t>());
    r.ids.push_back(next);
  }
  return r;
}

// Runs the static step; `check` sees it after the last step.
// `kernels`: the per-layer ops (empty: the ATen ops).
// `recorded`: each step issued as the graph engine records it (the step's device work, then the
// page work due after it, then the host's counters) instead of step().
Outcome static_run(const std::optional<LukaConfig>& config, int layers,
                   const std::function<void(const StaticDecodeStep&)>& check = nullptr,
                   const StepKernelsFactory& kernels = {}, bool recorded = false) {
  Decoder d(model(layers));
  if (config) install_luka(d, *config);
  const std::vector<std::int32_t> prompt = prompt_ids();
  const RunLength run{static_cast<std::int64_t>(prompt.size()), kSteps};
  d.reserve(run.context());
  const at::Tensor logits = d.prefill(prompt);
  StaticDecodeStep step(d, run, config ? config->layers : std::vector<LayerConfig>{}, kernels);
  step.start(d, prompt, static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()));
  Outcome r;
  r.eager = step.eager_layers();
  r.logits = at::empty({kSteps, test::kRandomQwen3Vocab}, at::kFloat);
  const auto one_step = [&] {
    if (!recorded) return step.step();
    step.check_next_step();
    step.enqueue_step();
    step.enqueue_pages();
    step.end_step(/*pages_enqueued=*/true);
  };
  for (std::int64_t i = 0; i < kWarmup; ++i) {
    one_step();
    r.logits[i].copy_(step.logits());
  }
  {
    CountAllocations counter;
    for (std::int64_t i = kWarmup; i < kSteps; ++i) {
      one_step();
      r.logits.select(0, i).copy_(step.logits());
    }
    r.allocations = counter.count();
  }
  r.ids = step.ids();
  if (check) check(step);
  return r;
}

void expect_parity(const Outcome& want, const Outcome& got) {
  EXPECT_EQ(got.ids, want.ids);
  const double diff = (got.logits - want.logits).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5);
  std::printf("max |logits - Decoder::decode| over %lld steps: %.3g; allocations in %lld steps after warm-up: %ld\n",
              static_cast<long long>(kSteps), diff, static_cast<long long>(kSteps - kWarmup), got.allocations);
}

TEST(StaticDecodeStep, PlainDenseMatchesTheDecoderAndAllocatesNothingAfterWarmup) {
  const Outcome want = reference(std::nullopt, test::kRandomQwen3Layers);
  const Outcome got = static_run(std::nullopt, test::kRandomQwen3Layers);
  EXPECT_TRUE(got.eager.empty());
  expect_parity(want, got);
  EXPECT_EQ(got.allocations, 0);
}

// The LuKA state the step keeps (accumulators, pages and their summaries) against core/luka's after
// the same steps.
void expect_state(const StaticDecodeStep& step, const Outcome& want) {
  const std::int64_t T = static_cast<std::int64_t>(prompt_ids().size()) + kSteps;
  for (int l = 0; l < static_cast<int>(want.luka.size()); ++l) {
    const auto& luka = dynamic_cast<const LukaAttention&>(*want.luka[static_cast<std::size_t>(l)]);
    const auto pages = static_cast<std::int64_t>(luka.pages().size());
    ASSERT_GT(pages, 10);  // ⌊(104 − 8) / 4⌋ at the last creation
    EXPECT_EQ(step.pages(l), pages);
    const auto near = [&](const at::Tensor& got_t, const at::Tensor& want_t, double tol, const char* what) {
      const double d = (got_t - want_t).abs().max().item<double>();
      EXPECT_LE(d, tol) << what << " of layer " << l;
    };
    near(step.buffer("importance", l).narrow(1, 0, T), luka.importance(), 1e-4, "importance");
    near(step.buffer("h2o", l).narrow(1, 0, T), luka.h2o_score(), 1e-4, "h2o_score");
    near(step.buffer("summary_keys", l).narrow(1, 0, pages), luka.summary_keys(), 1e-5, "summary keys");
    near(step.buffer("summary_values", l).narrow(1, 0, pages), luka.summary_values(), 1e-5, "summary values");
    near(step.buffer("summary_bias", l).narrow(1, 0, pages), luka.summary_bias(), 1e-6, "summary bias");
    near(step.buffer("spread", l).narrow(1, 0, luka.paged_end()), luka.spread(), 1e-5, "spread");
    if (luka.config().mode == AttentionMode::kClustered) {
      // The case refines some pages and leaves others summarised, at least in the last step.
      std::size_t refined = 0;
      for (const auto& heads : luka.last_step().refined) refined += heads.size();
      EXPECT_GT(refined, 0u) << "layer " << l;
      EXPECT_LT(refined, static_cast<std::size_t>(pages) * luka.last_step().refined.size()) << "layer " << l;
    }
  }
}

// LuKA's dense mode runs inside the step: besides the ids and logits, its accumulators and the
// pages it makes every 4 steps (the page variant) equal core/luka's after the same 64 steps.
TEST(StaticDecodeStep, LukaDenseRunsInsideTheStepWithTheLayersStateAndAllocatesNothingAfterWarmup) {
  for (const char* settings : {"compressor=attention_weighted,tau=0.5,decay=0.9", "compressor=mean,bias=fixed"}) {
    SCOPED_TRACE(settings);
    LukaConfig config = preset("dense");
    config.apply_override(settings);
    const Outcome want = reference(config, test::kRandomQwen3Layers);
    const Outcome got =
        static_run(config, test::kRandomQwen3Layers, [&](const StaticDecodeStep& step) { expect_state(step, want); });
    EXPECT_TRUE(got.eager.empty());
    expect_parity(want, got);
    EXPECT_EQ(got.allocations, 0);
  }
}

// The fused path's host code on CPU tensors: the step's per-layer ops as the fused kernels' CPU
// twins (make_cpu_fused_step_kernels: the q|k|v and gate|up GEMMs over the weights concatenated at
// load, the four fused ops with the argument packing the CUDA kernels get). Plain attention, and
// LuKA in clustered and mixed(1,1) mode: the decoder's ids, logits within 1e-5 (the twins sum a
// norm in the kernel's order, not ATen's), the LuKA state, and no allocation after warm-up.
TEST(StaticDecodeStep, TheFusedOpsCpuTwinsRunTheSameStep) {
  const StepKernelsFactory fused = [](const StepTensors& t) { return make_cpu_fused_step_kernels(t); };
  {
    const Outcome want = reference(std::nullopt, test::kRandomQwen3Layers);
    const Outcome got = static_run(std::nullopt, test::kRandomQwen3Layers,
                                   [](const StaticDecodeStep& step) { EXPECT_STREQ(step.kernels(), "cpu-fused"); }, fused);
    expect_parity(want, got);
    EXPECT_EQ(got.allocations, 0);
  }
  for (const char* name : {"clustered", "mixed(1,1)"}) {
    SCOPED_TRACE(name);
    // On the 3-layer model (mixed(1,1): lined, clustered, lined), with preset()'s small settings.
    LukaConfig config = LukaConfig::preset(name, test::kRandomQwen3Layers);
    config.apply_override("page_size=4,tail=8,interval=4,window=8,rho=0.25,top_k=2");
    const Outcome want = reference(config, test::kRandomQwen3Layers);
    const Outcome got = static_run(
        config, test::kRandomQwen3Layers, [&](const StaticDecodeStep& step) { expect_state(step, want); }, fused);
    EXPECT_TRUE(got.eager.empty());
    expect_parity(want, got);
    EXPECT_EQ(got.allocations, 0);
  }
}

// The default ops are ATen's, on CPU tensors; a factory that makes nothing is refused.
TEST(StaticDecodeStep, NamesItsPerLayerOpsAndRefusesAFactoryThatMakesNone) {
  Decoder d(model());
  const StaticDecodeStep step(d, RunLength{40, 4});
  EXPECT_STREQ(step.kernels(), "cpu");
  try {
    const StaticDecodeStep none(d, RunLength{40, 4}, {}, [](const StepTensors&) { return std::unique_ptr<StepKernels>(); });
    ADD_FAILURE() << "a step without per-layer ops was made";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no per-layer ops"), std::string::npos) << e.what();
  }
}

// The run loop with the static step as its decode engine (what `luka generate --static-step` runs,
// and --graph records on a GPU): the same greedy ids as Decoder::decode's steps, for plain
// attention and LuKA clustered layers; the engine says what it ran; the decoder is reset after.
TEST(StaticStepEngine, TheRunLoopGivesTheDecodersTokens) {
  for (const char* name : {"", "clustered"}) {
    SCOPED_TRACE(*name ? name : "plain");
    const std::vector<std::int32_t> prompt = prompt_ids();
    RunSettings settings;
    settings.max_new_tokens = 24;
    std::vector<std::int32_t> want;
    {
      Decoder d(model());
      std::vector<std::shared_ptr<LukaLayer>> layers;
      LukaConfig config;
      if (*name) {
        config = preset(name);
        layers = install_luka(d, config);
      }
      RunLoop loop(d, layers, config);
      want = loop.run(prompt, settings).ids;
      EXPECT_TRUE(loop.engine_description().empty());
    }
    Decoder d(model());
    std::vector<std::shared_ptr<LukaLayer>> layers;
    LukaConfig config;
    if (*name) {
      config = preset(name);
      layers = install_luka(d, config);
    }
    RunLoop loop(d, layers, config);
    loop.set_decode_engine(static_step_engine());
    const RunResult got = loop.run(prompt, settings);
    EXPECT_EQ(got.ids, want);
    EXPECT_EQ(got.decode_steps, settings.max_new_tokens - 1);
    EXPECT_NE(loop.engine_description().find("static step (cpu per-layer ops"), std::string::npos)
        << loop.engine_description();
    EXPECT_EQ(d.position(), 0) << "the decoder's caches did not advance: it is reset";
  }
}

// Scheduled and live config changes mid-run (a --schedule, the Studio's live switch): the engine
// continues the sequence under the new configs (the static step made anew, the caches, LuKA
// accumulators and pages carried over) and gives what Decoder::decode gives after the same
// changes: the same ids, every step's logits within 1e-5. Covered: a change before the first
// step, dense to lined to clustered, a parameter alone (a recapture, no new buffers), a layer
// back to dense, Kascade, and a live change requested while the loop waits before a step. The
// changes matter (the logits move from the unchanged run's), and the engine reports each.
TEST(StaticStepEngine, ScheduledAndLiveChangesGiveTheDecodersTokensAndLogits) {
  const std::vector<std::int32_t> prompt = prompt_ids();
  RunSettings settings;
  settings.max_new_tokens = 40;
  settings.schedule = parse_schedule(
      "step=1:layers=all:mode=lined;step=6:layers=1:mode=clustered,top_k=3;step=13:layers=all:mode=lined,"
      "decay=0.9;step=16:layers=all:decay=0.8;step=21:layers=0:mode=dense;step=22:layers=1-2:mode=kascade");
  LukaConfig live = preset("clustered");
  live.apply_override("layers=2:mode=lined,rho=0.5");
  // Logits per step, and the live change before step 30.
  struct Observer final : RunObserver {
    RunLoop* loop = nullptr;
    const LukaConfig* live = nullptr;
    std::vector<at::Tensor> logits_seen;
    std::vector<std::int64_t> changed_at;
    void logits(std::int64_t, const at::Tensor& l) override { logits_seen.push_back(l.to(at::kCPU).clone()); }
    bool before_step(std::int64_t step) override {
      if (step == 30 && loop) loop->request_config(*live);
      return true;
    }
    void config_changed(std::int64_t step, const std::string&, const LukaConfig&) override { changed_at.push_back(step); }
  };
  const auto run = [&](bool engine, std::string* description) {
    Decoder d(model());
    const LukaConfig config = preset("clustered");
    RunLoop loop(d, install_luka(d, config), config);
    if (engine) loop.set_decode_engine(static_step_engine());
    Observer o;
    o.loop = &loop;
    o.live = &live;
    const RunResult r = loop.run(prompt, settings, &o);
    if (description) *description = loop.engine_description();
    EXPECT_EQ(o.changed_at, (std::vector<std::int64_t>{1, 6, 13, 16, 21, 22, 30}));
    return std::make_pair(r.ids, at::stack(o.logits_seen));
  };
  const auto want = run(false, nullptr);
  {
    Decoder d(model());
    const LukaConfig config = preset("clustered");
    RunLoop loop(d, install_luka(d, config), config);
    RunSettings unchanged = settings;
    unchanged.schedule.clear();
    unchanged.forced = want.first;  // the same tokens fed, so the logits differ by the configs alone
    Observer o;
    loop.run(prompt, unchanged, &o);
    EXPECT_GT((at::stack(o.logits_seen) - want.second).abs().max().item<double>(), 1e-2);
  }
  std::string description;
  const auto got = run(true, &description);
  EXPECT_EQ(got.first, want.first);
  ASSERT_EQ(got.second.sizes(), want.second.sizes());
  const double diff = (got.second - want.second).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5);
  std::printf("max |logits - Decoder::decode| over %lld steps with 7 changes: %.3g\n",
              static_cast<long long>(settings.max_new_tokens), diff);
  for (const char* needle : {"config changes: before step 1: replan, re-planned in ", "before step 16: recapture, re-planned in",
                             "before step 22: replan", "before step 30: "})
    EXPECT_NE(description.find(needle), std::string::npos) << needle << " in " << description;
}

// A bf16 model: the step's products and activations in bf16 as the decoder's, its attention in
// fp32 over the widened query, keys and values (as the decoder's attention sums in fp32). The
// decoder's greedy ids over 64 steps; the logits within a few bf16 steps on the median step (2%
// of the largest logit; one step is 0.6% there) and within 5% on every step (a step where the two round a near tie of
// the refined pages apart), for plain attention, clustered and mixed layers. Allocations are
// checked in fp32 only: ATen's CPU bf16 products allocate a scratch each (mm_out and addmm_out one
// per call), which a GPU's cuBLAS products do not.
TEST(StaticDecodeStep, Bf16FollowsTheDecodersRoundings) {
  for (const char* name : {"", "clustered", "mixed(1,1)"}) {
    SCOPED_TRACE(*name ? name : "plain");
    const fs::path dir = fs::path(LUKA_TEST_WORK) / ("static-step-bf16-" + std::to_string(::getpid()));
    const auto bf16 = Model::load(test::write_random_qwen3(dir, layers_for(name)), LoadOptions{DType::kBF16, 0});
    const std::vector<std::int32_t> prompt = prompt_ids();
    const std::optional<LukaConfig> config = *name ? std::optional<LukaConfig>(preset(name)) : std::nullopt;
    // The decoder's steps.
    Decoder ref(bf16);
    if (config) install_luka(ref, *config);
    ref.reserve(static_cast<std::int64_t>(prompt.size()) + kSteps);
    at::Tensor logits = ref.prefill(prompt);
    const std::int32_t first = static_cast<std::int32_t>(logits.argmax().item<std::int64_t>());
    std::int32_t next = first;
    std::vector<std::int32_t> want;
    std::vector<at::Tensor> want_logits;
    for (std::int64_t i = 0; i < kSteps; ++i) {
      logits = ref.decode(next);
      want_logits.push_back(logits.clone());
      next = static_cast<std::int32_t>(logits.argmax().item<std::int64_t>());
      want.push_back(next);
    }
    // The static step's.
    Decoder d(bf16);
    if (config) install_luka(d, *config);
    const RunLength run{static_cast<std::int64_t>(prompt.size()), kSteps};
    d.reserve(run.context());
    d.prefill(prompt);
    StaticDecodeStep step(d, run, config ? config->layers : std::vector<LayerConfig>{});
    EXPECT_TRUE(step.plan().has_buffer("keys_f32"));
    step.start(d, prompt, first);
    std::vector<double> diffs;
    double scale = 0;
    for (std::int64_t i = 0; i < kSteps; ++i) {
      step.step();
      const at::Tensor& w = want_logits[static_cast<std::size_t>(i)];
      diffs.push_back((step.logits() - w).abs().max().item<double>());
      scale = std::max(scale, w.abs().max().item<double>());
    }
    EXPECT_EQ(step.ids(), want);
    std::vector<double> sorted = diffs;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2], worst = sorted.back();
    EXPECT_LE(median, 0.02 * scale);
    EXPECT_LE(worst, 0.05 * scale);
    std::printf("bf16 %s: |logits - Decoder::decode| median %.3g, largest %.3g (largest logit %.3g)\n",
                *name ? name : "plain", median, worst, scale);
    fs::remove_all(dir);
  }
}

// A change the static step cannot continue under is refused by name: one that moves the page
// schedule (its pages so far follow the old one).
TEST(StaticStepEngine, RefusesAChangeThatMovesThePageSchedule) {
  Decoder d(model());
  const LukaConfig config = preset("clustered");
  RunLoop loop(d, install_luka(d, config), config);
  loop.set_decode_engine(static_step_engine());
  RunSettings settings;
  settings.max_new_tokens = 12;
  settings.schedule = parse_schedule("step=5:layers=all:page_size=8");
  try {
    loop.run(prompt_ids(), settings);
    ADD_FAILURE() << "ran; expected the page schedule's change refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("moves the page schedule"), std::string::npos) << e.what();
  }
}

// What the engine cannot run is refused before anything runs: sampling, teacher forcing, a
// continuation.
TEST(StaticStepEngine, RefusesWhatItCannotRun) {
  Decoder d(model());
  RunLoop loop(d);
  loop.set_decode_engine(static_step_engine());
  const std::vector<std::int32_t> prompt = prompt_ids();
  const auto expect_error = [&](const RunSettings& s, const std::string& needle) {
    try {
      loop.run(prompt, s);
      ADD_FAILURE() << "ran; expected an error naming " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  RunSettings sampled;
  sampled.sampling.temperature = 0.7f;
  expect_error(sampled, "chooses greedily");
  RunSettings forced;
  forced.max_new_tokens = 2;
  forced.forced = {1, 2};
  expect_error(forced, "without teacher forcing");
  RunSettings continued;
  continued.reset = false;
  expect_error(continued, "a new sequence");
}

// Which steps of a recorded run are eager, record or replay (core/run/graphed_step.h): the
// warm-up, one recording, replays, and a recording again after a config change.
TEST(GraphSchedule, WarmsUpRecordsOnceAndReplaysUntilInvalidated) {
  GraphSchedule s(2);
  std::vector<std::string> issued;
  for (int i = 0; i < 5; ++i) issued.push_back(to_string(s.next()));
  EXPECT_EQ(issued, (std::vector<std::string>{"eager", "eager", "record", "replay", "replay"}));
  EXPECT_TRUE(s.recorded());
  s.invalidate();
  EXPECT_FALSE(s.recorded());
  EXPECT_EQ(s.next(), StepIssue::kRecord);  // no second warm-up
  EXPECT_EQ(s.next(), StepIssue::kReplay);
  EXPECT_EQ(s.records(), 2);
  EXPECT_EQ(s.replays(), 3);
  EXPECT_EQ(s.steps(), 7);
  GraphSchedule none(0);
  EXPECT_EQ(none.next(), StepIssue::kRecord);
  EXPECT_THROW(GraphSchedule(-1), Error);
  EXPECT_THROW(GraphSchedule(2, 0), Error);
}

// A step after which pages are made is a variant of its own (the pages per layer): recorded the
// first time it comes, replayed after; a third variant past max_variants runs eagerly; a change
// records every variant again.
TEST(GraphSchedule, RecordsEachPageVariantOnceAndKeepsAtMostMaxVariants) {
  GraphSchedule s(1, 2);
  const std::vector<std::int64_t> plain{0, 0}, pages{1, 1}, other{2, 0};
  std::vector<std::string> issued;
  for (const auto* v : {&plain, &plain, &pages, &plain, &pages, &other, &other})
    issued.push_back(to_string(s.next(*v)));
  EXPECT_EQ(issued, (std::vector<std::string>{"eager", "record", "record", "replay", "replay", "eager", "eager"}));
  EXPECT_TRUE(s.recorded(pages));
  EXPECT_FALSE(s.recorded(other));
  EXPECT_EQ(s.eager_past_warmup(), 2);
  s.invalidate();
  EXPECT_EQ(s.next(pages), StepIssue::kRecord);
  EXPECT_EQ(s.next(plain), StepIssue::kRecord);
  EXPECT_EQ(s.records(), 4);
}

// The counter itself sees an allocation: a test that counts nothing would prove nothing.
TEST(StaticDecodeStep, TheCountingAllocatorSeesTensorAllocations) {
  CountAllocations counter;
  const at::Tensor t = at::empty({1000}, at::kFloat);
  EXPECT_GE(counter.count(), 1);
}

// Lined, clustered, mixed(8,8) and Kascade layers run inside the step (core/run/static_luka.h): the
// heavy hitters, the refined pages, the Kascade sets and the effective rows come from fixed-shape
// ops over every reserved key, and the ids, logits and LuKA state equal the decoder's with no
// allocation after warm-up. Each preset with its defaults, then with the other selection units,
// decay, rounding, the authors' late heavy hitters, mass-preserving refinement, the threshold,
// top_frac and top_p rules, the fixed and adaptive biases (with selection on the unbiased α and
// importance from the cover), the authors' evaluation settings (their page schedule, per-layer
// selections, the entropy bias of softmax(importance)), and a Kascade reuse layer (head map
// swapped, or one set shared by every head).
struct LukaCase {
  const char* preset;
  const char* settings;
};

void PrintTo(const LukaCase& c, std::ostream* os) { *os << c.preset << (*c.settings ? " " : "") << c.settings; }

class StaticDecodeStepLuka : public ::testing::TestWithParam<LukaCase> {};

TEST_P(StaticDecodeStepLuka, RunsInsideTheStepMatchesTheDecoderAndAllocatesNothingAfterWarmup) {
  LukaConfig config = preset(GetParam().preset);
  // Overrides separated by ';' apply in turn.
  std::string settings = GetParam().settings;
  for (std::size_t begin = 0; !settings.empty() && begin <= settings.size();) {
    const std::size_t end = std::min(settings.find(';', begin), settings.size());
    config.apply_override(settings.substr(begin, end - begin));
    begin = end + 1;
  }
  const int layers = layers_for(GetParam().preset);
  const Outcome want = reference(config, layers);
  const Outcome got = static_run(config, layers, [&](const StaticDecodeStep& step) { expect_state(step, want); });
  EXPECT_TRUE(got.eager.empty());
  expect_parity(want, got);
  EXPECT_EQ(got.allocations, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Presets, StaticDecodeStepLuka,
    ::testing::Values(LukaCase{"lined", ""}, LukaCase{"lined", "lined_selection=group,decay=0.9,lined_rounding=floor"},
                      LukaCase{"lined", "lined_selection=layer,heavy_late=true,window_frac=0.1"},
                      LukaCase{"clustered", ""},
                      LukaCase{"clustered", "refine_math=mass_preserving,refine_selection=group,bias=fixed"},
                      LukaCase{"clustered", "rule=threshold,epsilon=0.05,always_refine_first=1,refine_selection=layer"},
                      LukaCase{"clustered", "importance_source=cover,bias=fixed,refine_on=unbiased"},
                      LukaCase{"clustered", "bias=adaptive,compressor=mean"},
                      LukaCase{"clustered", "rule=top_frac,top_frac=0.3,page_rank=sum,refine_selection=group"},
                      LukaCase{"clustered", "rule=top_p,top_p=0.2,refine_selection=group"},
                      LukaCase{"clustered", "rule=top_p,top_p=0.5,page_rank=sum"},
                      LukaCase{"authors_eval", "layer=1,mode=clustered"},
                      LukaCase{"mixed(8,8)", ""}, LukaCase{"kascade", ""},
                      LukaCase{"kascade", "layer=2,kascade_source=1,kascade_head_map=1|0"},
                      LukaCase{"kascade", "kascade_shared=true;layer=2,kascade_source=1"}),
    [](const ::testing::TestParamInfo<LukaCase>& info) {
      std::string s = std::string(info.param.preset) + (*info.param.settings ? "_" : "") + info.param.settings;
      for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return s;
    });

// The step issued as the graph engine records it: the page work due after a step enqueued with
// it, at offsets read on the device (so one recorded page variant serves every page step), then
// the host's counters: the decoder's ids, logits and LuKA state, no allocation after warm-up.
TEST(StaticDecodeStep, PagesEnqueuedWithTheStepGiveTheDecodersStateAndAllocateNothing) {
  for (const char* name : {"clustered", "mixed(1,1)"}) {
    SCOPED_TRACE(name);
    LukaConfig config = preset(name);
    config.apply_override("bias=adaptive");
    const Outcome want = reference(config, layers_for(name));
    const Outcome got = static_run(config, layers_for(name), [&](const StaticDecodeStep& step) { expect_state(step, want); },
                                   {}, /*recorded=*/true);
    expect_parity(want, got);
    EXPECT_EQ(got.allocations, 0);
  }
}

// Plain attention, and LuKA layers of every mode the step runs (lined and clustered side by side,
// Kascade anchors): every buffer of the plan, of its shape, and nothing else.
TEST(StaticDecodeStep, ReservesExactlyThePlansBuffers) {
  for (const char* name : {"", "mixed(1,1)", "kascade"}) {
    SCOPED_TRACE(name);
    Decoder d(model());
    std::vector<LayerConfig> layers;
    if (*name) {
      LukaConfig config = LukaConfig::preset(name, test::kRandomQwen3Layers);
      config.apply_override("page_size=4,tail=8,interval=4,window=8,rho=0.25,top_k=2");
      install_luka(d, config);
      layers = config.layers;
    }
    const StaticDecodeStep step(d, RunLength{40, 64}, layers);
    std::int64_t bytes = 0;
    for (const StepBuffer& b : step.plan().buffers) {
      const at::Tensor& t = step.buffer(b.name, b.layer);
      EXPECT_EQ(t.sizes(), at::IntArrayRef(b.shape)) << b.name;
      bytes += static_cast<std::int64_t>(t.nbytes());
    }
    EXPECT_EQ(bytes, step.plan().total_bytes());
    EXPECT_TRUE(step.eager_layers().empty());
  }
}

TEST(StaticDecodeStep, RefusesARunItWasNotPlannedFor) {
  Decoder d(model());
  const std::vector<std::int32_t> prompt = prompt_ids();
  StaticDecodeStep step(d, RunLength{40, 2});
  EXPECT_THROW(step.step(), Error);  // not started
  d.prefill(prompt);
  EXPECT_THROW(step.start(d, std::vector<std::int32_t>(prompt.begin(), prompt.begin() + 10), 1), Error);
  EXPECT_THROW(step.start(d, prompt, test::kRandomQwen3Vocab), Error);
  step.start(d, prompt, 1);
  step.step();
  step.step();
  EXPECT_THROW(step.step(), Error);  // past the planned steps
  EXPECT_EQ(step.ids().size(), 2u);
  EXPECT_THROW(StaticDecodeStep(d, RunLength{1000, 100}), Error);  // past max_position_embeddings
}

// A capture of a run the static step issues (issue 44): with records asked of the layers
// (set_step_records, as the capture recorder asks), each step hands every LuKA layer the
// LukaStep core/luka makes, built from what the step kept on the device: the same mode, step,
// sizes, refined pages, heavy hitters, window, Kascade sets and cover sizes; the effective rows and the pages'
// α within 1e-5; after the run the same pages with the steps that made them. Both ways of issuing
// a step are checked: step(), and the recorded parts with the page work enqueued with the step.
TEST(StaticDecodeStep, StepRecordsEqualTheDecodersLayerByLayerAndStepByStep) {
  constexpr std::int64_t kRecordSteps = 32;  // pages made 8 times in each layer
  for (const LukaCase& c : {LukaCase{"dense", ""}, LukaCase{"lined", ""}, LukaCase{"lined", "lined_selection=group,decay=0.9"},
                            LukaCase{"clustered", ""},
                            LukaCase{"clustered", "refine_math=mass_preserving,refine_selection=group,bias=fixed"},
                            LukaCase{"clustered", "importance_source=cover,bias=fixed,refine_on=unbiased"},
                            LukaCase{"clustered", "rule=top_p,top_p=0.5,page_rank=sum"}, LukaCase{"mixed(1,1)", ""},
                            LukaCase{"kascade", ""}, LukaCase{"kascade", "layer=2,kascade_source=1,kascade_head_map=1|0"},
                            LukaCase{"kascade", "kascade_shared=true"}}) {
    LukaConfig config = preset(c.preset);
    if (*c.settings) config.apply_override(c.settings);
    const int layer_count = layers_for(c.preset);
    const std::vector<std::int32_t> prompt = prompt_ids();
    const RunLength run{static_cast<std::int64_t>(prompt.size()), kRecordSteps};
    // The decoder's records, every layer at every step.
    std::vector<std::vector<LukaStep>> want(static_cast<std::size_t>(kRecordSteps));
    std::vector<std::vector<Page>> want_pages;
    {
      Decoder d(model(layer_count));
      const auto layers = install_luka(d, config);
      d.reserve(run.context());
      at::Tensor logits = d.prefill(prompt);
      for (std::int64_t i = 0; i < kRecordSteps; ++i) {
        logits = d.decode(static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()));
        for (const auto& l : layers) {
          LukaStep s = l->last_step();
          s.effective = s.effective.clone();
          want[static_cast<std::size_t>(i)].push_back(s);
        }
      }
      for (const auto& l : layers) want_pages.push_back(l->pages());
    }
    for (const bool recorded : {false, true}) {
      SCOPED_TRACE(std::string(c.preset) + " " + c.settings + (recorded ? ", recorded" : ", step()"));
      Decoder d(model(layer_count));
      const auto layers = install_luka(d, config);
      for (const auto& l : layers) l->set_step_records(true);
      d.reserve(run.context());
      const at::Tensor logits = d.prefill(prompt);
      StaticDecodeStep step(d, run, config.layers);
      ASSERT_TRUE(step.plan().records);
      step.start(d, prompt, static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()));
      double effective_diff = 0, alpha_diff = 0;
      for (std::int64_t i = 0; i < kRecordSteps; ++i) {
        if (recorded) {
          step.check_next_step();
          step.enqueue_step();
          step.enqueue_pages();
          step.end_step(/*pages_enqueued=*/true);
          step.publish_records();
        } else {
          step.step();
        }
        for (std::size_t l = 0; l < layers.size(); ++l) {
          const LukaStep& a = want[static_cast<std::size_t>(i)][l];
          const LukaStep& b = layers[l]->last_step();
          ASSERT_EQ(b.step, a.step) << "layer " << l;
          ASSERT_EQ(b.mode, a.mode);
          ASSERT_EQ(b.tokens, a.tokens);
          ASSERT_EQ(b.paged_end, a.paged_end);
          ASSERT_EQ(b.effective.sizes(), a.effective.sizes());
          effective_diff = std::max(effective_diff, (b.effective - a.effective).abs().max().item<double>());
          EXPECT_EQ(b.refined, a.refined) << "layer " << l << " step " << a.step;
          EXPECT_EQ(b.heavy, a.heavy) << "layer " << l << " step " << a.step;
          EXPECT_EQ(b.window_start, a.window_start);
          EXPECT_EQ(b.selected, a.selected) << "layer " << l << " step " << a.step;
          EXPECT_EQ(b.kascade_source, a.kascade_source);
          EXPECT_EQ(b.head_map, a.head_map);
          EXPECT_EQ(b.cover_size, a.cover_size) << "layer " << l << " step " << a.step;
          ASSERT_EQ(b.summary_mass.defined(), a.summary_mass.defined());
          if (a.summary_mass.defined()) {
            ASSERT_EQ(b.summary_mass.sizes(), a.summary_mass.sizes());
            if (a.summary_mass.numel() > 0)
              alpha_diff = std::max(alpha_diff, (b.summary_mass - a.summary_mass).abs().max().item<double>());
          }
        }
      }
      EXPECT_LE(effective_diff, 1e-5);
      EXPECT_LE(alpha_diff, 1e-5);
      std::printf("%s %s: max |effective - decoder's| %.3g, max |alpha - decoder's| %.3g over %lld steps\n", c.preset,
                  c.settings, effective_diff, alpha_diff, static_cast<long long>(kRecordSteps));
      for (std::size_t l = 0; l < layers.size(); ++l) {
        const std::vector<Page>& got = layers[l]->pages();
        ASSERT_EQ(got.size(), want_pages[l].size()) << "layer " << l;
        for (std::size_t p = 0; p < got.size(); ++p) {
          EXPECT_EQ(got[p].start, want_pages[l][p].start);
          EXPECT_EQ(got[p].end, want_pages[l][p].end);
          EXPECT_EQ(got[p].created_step, want_pages[l][p].created_step) << "layer " << l << " page " << p;
        }
      }
    }
  }
}

// Without records asked for, the step keeps none: a run that is not captured reserves nothing
// for them and hands the layers nothing; a capture of some layers reserves and hands over theirs.
TEST(StaticDecodeStep, KeepsNoRecordsUnlessALayerAsksForThem) {
  const LukaConfig config = preset("clustered");
  Decoder d(model());
  const auto layers = install_luka(d, config);
  const std::vector<std::int32_t> prompt = prompt_ids();
  const RunLength run{static_cast<std::int64_t>(prompt.size()), 4};
  d.reserve(run.context());
  const at::Tensor logits = d.prefill(prompt);
  StaticDecodeStep step(d, run, config.layers);
  EXPECT_FALSE(step.plan().records);
  EXPECT_FALSE(step.plan().has_buffer("record_effective", 0));
  step.start(d, prompt, static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()));
  step.step();
  EXPECT_EQ(layers[0]->last_step().step, 0) << "no step handed over";
  // A capture of layer 1 alone: its records only.
  Decoder d1(model());
  const auto layers1 = install_luka(d1, config);
  layers1[1]->set_step_records(true);
  d1.reserve(run.context());
  const at::Tensor logits1 = d1.prefill(prompt);
  StaticDecodeStep step1(d1, run, config.layers);
  EXPECT_TRUE(step1.plan().records);
  EXPECT_FALSE(step1.plan().has_buffer("record_effective", 0));
  EXPECT_TRUE(step1.plan().has_buffer("record_effective", 1));
  step1.start(d1, prompt, static_cast<std::int32_t>(logits1.argmax().item<std::int64_t>()));
  step1.step();
  EXPECT_EQ(layers1[0]->last_step().step, 0);
  EXPECT_EQ(layers1[1]->last_step().step, 1);
}

}  // namespace
}  // namespace luka
