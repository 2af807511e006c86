// Press mode of the CPU core (core/press/press.h, docs/methods.md): NVIDIA kvpress's "press"
// paradigm as a layer mode. At the prompt's prefill the layer scores its own cache as kvpress's
// press does after the layer's forward, and keeps per KV head; every decode step then attends
// exactly to the kept prompt positions and to every position after the prompt. kvpress drops
// the rest from its cache; here the raw cache keeps every token (the decoder's), so the kept set
// is the layer's cover, shown and captured like any other mode's, and the mode can be switched.
//
// A layer switched to press after its prompt's prefill has no kept set and attends to every
// position until the next prompt (the scorers need the prompt's queries, which are gone).
//
// With press_interval > 0 the layer also compresses during decoding, as kvpress's DecodingPress
// (decode_press_decoding, below); with press_method=tova and interval 1 that is TOVA's own
// per-step eviction.
#include <algorithm>
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

press::ScorerParams scorer_params(const PressConfig& c) {
  press::ScorerParams sp;
  sp.n_sink = static_cast<int>(c.n_sink);
  sp.window_size = static_cast<int>(c.window_size);
  sp.kernel_size = static_cast<int>(c.kernel_size);
  sp.n_future_positions = static_cast<int>(c.n_future_positions);
  sp.use_covariance = c.use_covariance;
  sp.use_vnorm = c.use_vnorm;
  sp.epsilon = c.epsilon;
  sp.seed = static_cast<std::uint64_t>(c.seed);
  return sp;
}

}  // namespace

void LukaAttention::press_prompt(const AttentionInputs& in) {
  const PressConfig& c = config_.press;
  const std::int64_t T = in.k.size(1);
  const press::ScorerParams sp = scorer_params(c);
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

// A continuation prefilled after the prompt was compressed (kvpress's query-agnostic evaluation:
// the context compressed, then the question) attends as a decode step would: to each KV head's
// kept positions and to every position after them. kvpress's compressed cache no longer holds the
// rest.
at::Tensor LukaAttention::press_left_out(const AttentionInputs& in) const {
  if (config_.mode != AttentionMode::kPress || in.q_pos0 == 0) return {};
  const std::int64_t KV = in.k.size(0), T = in.k.size(1);
  const std::vector<std::vector<std::int64_t>>* sets = nullptr;
  std::int64_t end = 0;  // positions from here on are all attended
  if (config_.press.interval > 0 && static_cast<std::int64_t>(press_rows_.size()) == KV) {
    sets = &press_rows_;
    end = press_rows_end_;
  } else if (press_prompt_ > 0 && static_cast<std::int64_t>(press_kept_.size()) == KV) {
    sets = &press_kept_;
    end = press_prompt_;
  }
  if (!sets || end <= 0) return {};
  at::Tensor out = at::zeros({KV, T}, at::kBool);
  out.narrow(1, 0, std::min(end, T)).fill_(true);
  auto hide = out.accessor<bool, 2>();
  for (std::int64_t g = 0; g < KV; ++g)
    for (const std::int64_t p : (*sets)[static_cast<std::size_t>(g)])
      if (p < end && p < T) hide[g][p] = false;
  return in.k.is_cpu() ? out : out.to(in.k.device());
}

void LukaAttention::decode_press(Step& s) {
  if (config_.press.interval > 0) return decode_press_decoding(s);
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

// Compression during decoding (press_interval > 0), kvpress's DecodingPress step by step: the
// layer's cache is press_rows_, per KV head the positions in the order kvpress's compressed cache
// holds them (its top-k order after a compression: scorers that read positions by row, such as
// streaming_llm's sinks, snapkv's pooling and random's numbers, see the same rows). A step attends
// to every row, appends its own position, and after its attention, every `interval` steps, the
// rows are scored again with the method and cut to `target_size` per KV head. What is cut shows
// as the next step's smaller cover.
void LukaAttention::decode_press_decoding(Step& s) {
  const AttentionInputs& in = s.in;
  const PressConfig& c = config_.press;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size, KV = H / G;
  if (static_cast<std::int64_t>(press_rows_.size()) != KV) {  // first step: the prompt as press mode kept it
    const bool kept = press_prompt_ > 0 && static_cast<std::int64_t>(press_kept_.size()) == KV;
    press_rows_ = kept ? press_kept_ : std::vector<std::vector<std::int64_t>>(static_cast<std::size_t>(KV));
    press_rows_end_ = kept ? press_prompt_ : 0;
    press_steps_ = 0;
    press_queries_.clear();
  }
  for (auto& rows : press_rows_)
    for (std::int64_t t = press_rows_end_; t < T; ++t) rows.push_back(t);
  press_rows_end_ = T;
  std::vector<std::vector<std::int64_t>> sorted(static_cast<std::size_t>(KV));
  for (std::int64_t g = 0; g < KV; ++g) {
    sorted[static_cast<std::size_t>(g)] = press_rows_[static_cast<std::size_t>(g)];
    std::sort(sorted[static_cast<std::size_t>(g)].begin(), sorted[static_cast<std::size_t>(g)].end());
  }
  std::vector<const std::vector<std::int64_t>*> per_head(static_cast<std::size_t>(H));
  last_.selected.assign(static_cast<std::size_t>(H), {});
  for (std::int64_t h = 0; h < H; ++h) {
    const auto& set = sorted[static_cast<std::size_t>(h / G)];
    per_head[static_cast<std::size_t>(h)] = &set;
    last_.selected[static_cast<std::size_t>(h)] = set;
    last_.cover_size[static_cast<std::size_t>(h)] = static_cast<std::int64_t>(set.size());
  }
  attend_sets(s, per_head, false);

  // kvpress's hook after the layer's forward: buffer the step's query, count, compress.
  const bool needs_rope = c.method == PressMethod::kSnapKv || c.method == PressMethod::kExpectedAttention;
  if (needs_rope && !rope_inv_freq_.defined())
    fail("luka layer " + std::to_string(layer_),
         std::string("press_interval with press_method=") + to_string(c.method) +
             " needs the model's RoPE frequencies");
  if (needs_rope)
    press_queries_.push_back(rope_rotate(in.q.to(at::kFloat).reshape({H, 1, D}), T - 1, rope_inv_freq_, -1));
  ++press_steps_;
  if (press_steps_ >= c.interval || c.target_size <= 1) {
    press_compress_rows(in);
    press_steps_ = 0;
    press_queries_.clear();
  }
  if (static_cast<std::int64_t>(press_queries_.size()) > kPressQueryBuffer)
    press_queries_.erase(press_queries_.begin(), press_queries_.end() - kPressQueryBuffer);
}

void LukaAttention::press_compress_rows(const AttentionInputs& in) {
  const PressConfig& c = config_.press;
  const std::int64_t KV = in.k.size(0), D = in.k.size(2), T = in.k.size(1), H = in.q.size(0);
  const std::int64_t n = static_cast<std::int64_t>(press_rows_[0].size());
  if (n <= c.target_size) return;  // kvpress: ratio 0, the cache as it is
  std::vector<std::int64_t> flat;
  for (const auto& rows : press_rows_) {
    if (static_cast<std::int64_t>(rows.size()) != n)
      fail("luka layer " + std::to_string(layer_), "press rows of unequal length");
    flat.insert(flat.end(), rows.begin(), rows.end());
  }
  const at::Tensor index = at::tensor(flat, at::kLong).view({KV, n, 1}).expand({KV, n, D});
  press::LayerInputs li;
  li.keys = at::gather(in.k, 1, index).to(at::kFloat);
  // Only ExpectedAttention reads the values (their norms): the others skip half the gather, which
  // is most of a step's cost with an eviction every step (TOVA's policy).
  if (c.method == PressMethod::kExpectedAttention) li.values = at::gather(in.v, 1, index).to(at::kFloat);
  if (c.method == PressMethod::kTova) {
    li.queries = in.q.to(at::kFloat).reshape({H, 1, D});  // the step's own query, after RoPE
  } else if (!press_queries_.empty()) {
    // kvpress rotates its buffered queries with the step's RoPE embedding only (position T - 1).
    const at::Tensor pre = at::cat(press_queries_, 1);  // [H, B, D]
    const std::int64_t B = pre.size(1);
    li.queries_pre_rope = pre;
    const at::Tensor rows = pre.transpose(0, 1).reshape({B * H, 1, D});  // each its own row at position T - 1
    li.queries = rope_rotate(rows, T - 1, rope_inv_freq_, 1).reshape({B, H, D}).transpose(0, 1);
    li.inv_freq = rope_inv_freq_;
  }
  at::Tensor scores;
  try {
    scores = press::score(scorer_of(c.method), scorer_params(c), li, c.target_size).contiguous();
  } catch (const Error& e) {
    fail("luka layer " + std::to_string(layer_) + ": press_interval " + to_string(c.method), e.what());
  }
  // kvpress's torch.topk order: descending score (the lower row first on ties).
  const float* sc = scores.const_data_ptr<float>();
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t g = 0; g < KV; ++g) {
    const float* row = sc + g * n;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + c.target_size, order.end(),
                      [row](std::int64_t a, std::int64_t b) { return row[a] != row[b] ? row[a] > row[b] : a < b; });
    auto& rows = press_rows_[static_cast<std::size_t>(g)];
    std::vector<std::int64_t> kept(static_cast<std::size_t>(c.target_size));
    for (std::int64_t i = 0; i < c.target_size; ++i)
      kept[static_cast<std::size_t>(i)] = rows[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
    rows = std::move(kept);
  }
}

}  // namespace luka
