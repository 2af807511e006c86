// Press mode of the CPU core (core/press/press.h, docs/methods.md): NVIDIA kvpress's "press"
// paradigm as a layer mode. At the prompt's prefill the layer scores its own cache as kvpress's
// press does after the layer's forward, and keeps per KV head; every decode step then attends
// exactly to the kept prompt positions and to every position after the prompt. kvpress drops
// the rest from its cache; here the raw cache keeps every token (the decoder's), so the kept set
// is the layer's cover, shown and captured like any other mode's, and the mode can be switched.
//
// A layer switched to press after its prompt's prefill has no kept set and attends to every
// position until the next prompt (the scorers need the prompt's queries, which are gone).
#include <numeric>
#include <string>

#include "core/luka/methods/dar.h"
#include "core/luka/luka_attention.h"
#include "core/press/press.h"
#include "core/util/error.h"

namespace luka {

namespace {

press::Scorer scorer_of(PressMethod m) {
  switch (m) {
    case PressMethod::kStreamingLlm:
      return press::Scorer::kStreamingLlm;
    case PressMethod::kSnapKv:
      return press::Scorer::kSnapKv;
    case PressMethod::kTova:
      return press::Scorer::kTova;
    case PressMethod::kKnorm:
      return press::Scorer::kKnorm;
    case PressMethod::kExpectedAttention:
      return press::Scorer::kExpectedAttention;
    case PressMethod::kRandom:
      return press::Scorer::kRandom;
  }
  return press::Scorer::kSnapKv;
}

press::Allocation allocation_of(PressAllocation a) {
  switch (a) {
    case PressAllocation::kUniform:
      return press::Allocation::kUniform;
    case PressAllocation::kPyramid:
      return press::Allocation::kPyramid;
    case PressAllocation::kAdaKv:
      return press::Allocation::kAdaKv;
  }
  return press::Allocation::kUniform;
}

}  // namespace

void LukaAttention::press_prompt(const AttentionInputs& in) {
  const PressConfig& c = config_.press;
  const std::int64_t T = in.k.size(1);
  press::ScorerParams sp;
  sp.n_sink = static_cast<int>(c.n_sink);
  sp.window_size = static_cast<int>(c.window_size);
  sp.kernel_size = static_cast<int>(c.kernel_size);
  sp.n_future_positions = static_cast<int>(c.n_future_positions);
  sp.use_covariance = c.use_covariance;
  sp.use_vnorm = c.use_vnorm;
  sp.epsilon = c.epsilon;
  sp.seed = static_cast<std::uint64_t>(c.seed);
  press::AllocationParams ap;
  ap.allocation = allocation_of(c.allocation);
  ap.beta = static_cast<int>(c.beta);
  ap.alpha_safeguard = c.alpha_safeguard;
  press::Budget b;
  b.compression_ratio = c.compression_ratio;
  b.tokens = c.budget_tokens;
  press::LayerInputs li;
  li.keys = in.k;
  li.values = in.v;
  li.queries = in.q;  // post-RoPE, every prompt query
  if (c.method == PressMethod::kExpectedAttention) {
    // kvpress reads the queries before RoPE; the decoder hands them rotated, so rotate back.
    if (!rope_inv_freq_.defined())
      fail("luka layer " + std::to_string(layer_),
           "press_method=expected_attention needs the model's RoPE frequencies");
    li.queries_pre_rope = rope_rotate(in.q, 0, rope_inv_freq_, -1);
    li.inv_freq = rope_inv_freq_;
  }
  const std::string where = "luka layer " + std::to_string(layer_) + ": press " + to_string(c.method);
  try {
    press_kept_ = press::press_layer(scorer_of(c.method), sp, ap, b, li, layer_, layer_count_).kept;
  } catch (const Error& e) {
    fail(where, e.what());
  }
  press_prompt_ = T;
}

void LukaAttention::decode_press(Step& s) {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), T = in.k.size(1), G = in.group_size, KV = H / G;
  std::vector<std::vector<std::int64_t>> sets(static_cast<std::size_t>(KV));
  for (std::int64_t g = 0; g < KV; ++g) {
    auto& set = sets[static_cast<std::size_t>(g)];
    std::int64_t from = 0;  // positions from here on are all attended
    if (press_prompt_ > 0 && static_cast<std::int64_t>(press_kept_.size()) == KV) {
      set = press_kept_[static_cast<std::size_t>(g)];
      from = press_prompt_;
    }
    for (std::int64_t t = from; t < T; ++t) set.push_back(t);
  }
  std::vector<const std::vector<std::int64_t>*> per_head(static_cast<std::size_t>(H));
  last_.selected.assign(static_cast<std::size_t>(H), {});
  for (std::int64_t h = 0; h < H; ++h) {
    per_head[static_cast<std::size_t>(h)] = &sets[static_cast<std::size_t>(h / G)];
    last_.selected[static_cast<std::size_t>(h)] = sets[static_cast<std::size_t>(h / G)];
    last_.cover_size[static_cast<std::size_t>(h)] =
        static_cast<std::int64_t>(sets[static_cast<std::size_t>(h / G)].size());
  }
  attend_sets(s, per_head, false);
}

}  // namespace luka
