// RunLoop (core/run/run_loop.h), the prefill-then-decode loop every command and the Studio run:
// its context reservation and check, stop ids, observers, teacher forcing and continuation runs,
// on the random checkpoints against the decoder driven token by token and transformers' greedy ids.
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/device/device.h"
#include "core/luka/luka_attention.h"
#include "core/run/run_loop.h"
#include "core/run/session.h"
#include "core/util/error.h"
#include "tests/core/model/test_util.h"

namespace luka {
namespace {

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << p;
  return nlohmann::json::parse(in);
}

TEST(RunLoop, ARunReservesItsWholeContextOnce) {
  // 20 prompt tokens and 30 new: every cache holds exactly 50 positions from the start (doubling
  // from 64 would have left 64), and the run's logits are those of a run without the reservation.
  const auto model = Model::load(test::checkpoint("qwen3-tied"), LoadOptions{DType::kF32, 0});
  Decoder decoder(model), plain(model);
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back((i * 53 + 7) % 512);
  RunLoop loop(decoder);
  RunSettings settings;
  settings.max_new_tokens = 30;
  const RunResult r = loop.run(prompt, settings);
  ASSERT_EQ(r.ids.size(), 30u);
  for (int l = 0; l < model->config().num_layers; ++l) EXPECT_EQ(decoder.cache(l).capacity(), 50) << "layer " << l;
  // The same ids decoded token by token without a reservation.
  at::Tensor logits = plain.prefill(prompt);
  for (std::size_t i = 0; i + 1 < r.ids.size(); ++i) {
    EXPECT_EQ(logits.argmax().item<std::int64_t>(), r.ids[i]) << "token " << i;
    logits = plain.decode(r.ids[i]);
  }
  EXPECT_EQ(logits.argmax().item<std::int64_t>(), r.ids.back());
  EXPECT_EQ(plain.cache(0).capacity(), 64);
}

// A session sets a run up in one call and swaps configs: its plain run equals a bare decoder's
// loop, a LuKA config installs one layer per decoder layer (the run equal to a loop over
// install_luka's layers), and going back to plain attention gives the plain run again.
TEST(RunSession, SwapsConfigsAndRunsWhatABareLoopRuns) {
  const auto model = Model::load(test::checkpoint("qwen3-tied"), LoadOptions{DType::kF32, 0});
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back((i * 61 + 5) % 512);
  RunSettings settings;
  settings.max_new_tokens = 12;
  const int L = model->config().num_layers;
  LukaConfig clustered = LukaConfig::preset("clustered", L);
  clustered.apply_override("page_size=4,tail=4,interval=2,top_k=1");

  Decoder bare(model);
  const std::vector<std::int32_t> plain_ids = RunLoop(bare).run(prompt, settings).ids;
  Decoder luka_decoder(model);
  const auto luka_layers = install_luka(luka_decoder, clustered);
  const std::vector<std::int32_t> luka_ids = RunLoop(luka_decoder, luka_layers, clustered).run(prompt, settings).ids;

  RunSession session(cpu_backend(), model);
  EXPECT_FALSE(session.config().has_value());
  EXPECT_EQ(session.loop().run(prompt, settings).ids, plain_ids);
  session.use(clustered);
  ASSERT_EQ(session.layers().size(), static_cast<std::size_t>(L));
  EXPECT_NE(dynamic_cast<LukaAttention*>(&session.decoder().attention(0)), nullptr);
  EXPECT_EQ(session.loop().run(prompt, settings).ids, luka_ids);
  session.use(std::nullopt);
  EXPECT_TRUE(session.layers().empty());
  EXPECT_EQ(dynamic_cast<LukaAttention*>(&session.decoder().attention(0)), nullptr);
  EXPECT_EQ(session.loop().run(prompt, settings).ids, plain_ids);
}

TEST(RunLoop, StopIdEndsGeneration) {
  const auto dir = test::checkpoint("qwen3-tied");
  const auto ref = read_json(dir / "reference" / "greedy_fp32.json");
  const auto prompt = ref["prompt"].get<std::vector<std::int32_t>>();
  const auto expected = ref["new_ids"].get<std::vector<std::int32_t>>();
  Decoder decoder(Model::load(dir, LoadOptions{DType::kF32, 0}));
  RunLoop loop(decoder);
  RunSettings options;
  options.max_new_tokens = 32;
  options.stop_ids = {expected[5]};
  const auto stop_at = static_cast<std::size_t>(std::find(expected.begin(), expected.end(), expected[5]) - expected.begin());
  RunResult r = loop.run(prompt, options);
  EXPECT_EQ(r.stop_reason, StopReason::kStopToken);
  EXPECT_EQ(r.stop_id, expected[5]);
  EXPECT_EQ(r.ids, std::vector<std::int32_t>(expected.begin(), expected.begin() + static_cast<std::ptrdiff_t>(stop_at)));

  options.stop_ids.clear();
  struct StopAfterThree final : RunObserver {
    int seen = 0;
    bool token(const ChosenToken&) override { return ++seen < 3; }
  } three;
  r = loop.run(prompt, options, &three);
  EXPECT_EQ(r.stop_reason, StopReason::kObserver);
  EXPECT_EQ(r.ids.size(), 3u);

  // Teacher forcing feeds the given tokens: the same run as greedy when they are greedy's, and
  // the logits each token is chosen from are the decoder's (scored by an observer).
  RunSettings forced;
  forced.forced = expected;
  forced.max_new_tokens = static_cast<std::int64_t>(expected.size());
  struct Argmax final : RunObserver {
    std::vector<std::int32_t> best;
    void logits(std::int64_t, const at::Tensor& l) override { best.push_back(static_cast<std::int32_t>(l.argmax().item<std::int64_t>())); }
  } argmax;
  r = loop.run(prompt, forced, &argmax);
  EXPECT_EQ(r.ids, expected);
  EXPECT_EQ(argmax.best, expected);
  EXPECT_EQ(r.decode_steps, static_cast<std::int64_t>(expected.size()) - 1);
}

// A run that would pass the model's context fails before anything runs (the decoder is untouched),
// and one that fits exactly (the last chosen token is never fed) runs to its end.
TEST(RunLoop, ChecksTheContextBeforeItStarts) {
  const auto dir = test::checkpoint("qwen3-tied");
  Decoder d(Model::load(dir, LoadOptions{DType::kF32, 0}));
  const std::int64_t context = d.model().config().max_position_embeddings;
  RunLoop loop(d);
  const std::vector<std::int32_t> prompt(10, 5);
  RunSettings s;
  s.max_new_tokens = context - 10 + 2;
  try {
    loop.run(prompt, s);
    ADD_FAILURE() << "a run past the context started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the model's context of " + std::to_string(context)), std::string::npos) << e.what();
  }
  EXPECT_EQ(d.position(), 0);
  s.max_new_tokens = context - 10 + 1;
  const RunResult r = loop.run(prompt, s);
  EXPECT_EQ(static_cast<std::int64_t>(r.ids.size()), s.max_new_tokens);
  EXPECT_EQ(d.position(), context);
}

// Continuation: a second run with reset false prefills its tokens after the sequence so far,
// and continues exactly where one long prompt would have.
TEST(RunLoop, ContinuationPrefillEqualsOnePrompt) {
  const auto dir = test::checkpoint("qwen3-tied");
  const auto ref = read_json(dir / "reference" / "greedy_fp32.json");
  const auto prompt = ref["prompt"].get<std::vector<std::int32_t>>();
  const auto model = Model::load(dir, LoadOptions{DType::kF32, 0});
  Decoder a(model), b(model);
  RunLoop one(a), two(b);
  RunSettings s;
  s.max_new_tokens = 8;
  const RunResult whole = one.run(prompt, s);
  const std::vector<std::int32_t> first(prompt.begin(), prompt.begin() + 5), rest(prompt.begin() + 5, prompt.end());
  RunSettings head;
  head.forced = {rest.front()};
  head.max_new_tokens = 1;
  two.run(first, head);                               // prefill 5, then choose (not feed) rest[0]
  RunSettings tail = s;
  tail.reset = false;
  const RunResult cont = two.run(std::vector<std::int32_t>(rest.begin(), rest.end()), tail);
  EXPECT_EQ(cont.ids, whole.ids);
  EXPECT_EQ(b.position(), a.position());
}

// Query-agnostic runs (RunSettings::context_tokens): the prompt's context is its own forward, so
// a press layer compresses the context alone and the question attends to what it kept. Plain
// attention gives the one-forward run's tokens; a press run equals the decoder prefilled in the
// same two parts, and its layers compressed the context's positions only.
TEST(RunLoop, AQueryAgnosticRunCompressesTheContextBeforeTheQuestion) {
  const auto model = Model::load(test::checkpoint("qwen3-tied"), LoadOptions{DType::kF32, 0});
  const int L = model->config().num_layers;
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 48; ++i) prompt.push_back((i * 37 + 11) % 512);
  RunSettings whole;
  whole.max_new_tokens = 10;
  RunSettings split = whole;
  split.context_tokens = 40;

  Decoder plain_a(model), plain_b(model);
  EXPECT_EQ(RunLoop(plain_a).run(prompt, split).ids, RunLoop(plain_b).run(prompt, whole).ids);

  LukaConfig knorm;
  knorm.layers.resize(static_cast<std::size_t>(L));
  std::vector<std::int64_t> all;
  for (int l = 0; l < L; ++l) all.push_back(l);
  knorm.set(all, "mode", "press");
  knorm.set(all, "press_method", "knorm");
  knorm.set(all, "compression_ratio", "0.5");
  Decoder d(model);
  const auto layers = install_luka(d, knorm);
  RunLoop loop(d, layers, knorm);
  const RunResult r = loop.run(prompt, split);
  for (const auto& layer : layers) {
    const auto& press = dynamic_cast<const LukaAttention&>(*layer);
    EXPECT_EQ(press.press_prompt(), 40);
    for (const auto& kept : press.press_kept()) {
      EXPECT_EQ(kept.size(), 20u);
      for (const std::int64_t p : kept) EXPECT_LT(p, 40);
    }
  }
  // The same two forwards by hand, then greedy steps.
  Decoder manual(model);
  install_luka(manual, knorm);
  manual.prefill(std::vector<std::int32_t>(prompt.begin(), prompt.begin() + 40));
  at::Tensor logits = manual.prefill(std::vector<std::int32_t>(prompt.begin() + 40, prompt.end()));
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 10; ++i) {
    ids.push_back(static_cast<std::int32_t>(logits.argmax().item<std::int64_t>()));
    logits = manual.decode(ids.back());
  }
  EXPECT_EQ(r.ids, ids);
  // The question's forward saw the kept positions only: a one-forward press run (which compresses
  // the whole prompt, question included) differs.
  Decoder one(model);
  const auto one_layers = install_luka(one, knorm);
  RunLoop(one, one_layers, knorm).run(prompt, whole);
  EXPECT_EQ(dynamic_cast<const LukaAttention&>(*one_layers[0]).press_prompt(), 48);

  RunSettings bad = whole;
  bad.context_tokens = 49;
  EXPECT_THROW(loop.run(prompt, bad), Error);
}

}  // namespace
}  // namespace luka
