#include "core/run/step_plan.h"

#include <algorithm>
#include <limits>

#include "core/luka/methods/kascade.h"
#include "core/model/config.h"
#include "core/util/error.h"
#include "kernels/common/luka_rules.h"

namespace luka {

namespace {

std::int64_t elem_bytes(ElemKind kind, std::int64_t compute_bytes) {
  switch (kind) {
    case ElemKind::kCompute:
      return compute_bytes;
    case ElemKind::kF32:
      return 4;
    case ElemKind::kI64:
      return 8;
    case ElemKind::kI32:
      return 4;
    case ElemKind::kBool:
      return 1;
    case ElemKind::kF64:
      return 8;
  }
  return 4;
}

// Why the static step cannot run a layer with this config ("" when it can).
std::string eager_reason(const LayerConfig& c) {
  if (c.mode != AttentionMode::kDense && c.mode != AttentionMode::kLined && c.mode != AttentionMode::kClustered &&
      c.mode != AttentionMode::kKascade)
    return std::string("mode=") + to_string(c.mode) + " runs through its own attention";
  if (c.clustered.compressor == Compressor::kRandom) return "compressor=random draws its pick per page on the host";
  if (c.clustered.segmenter == Segmenter::kDelimiter) return "segmenter=delimiter cuts pages at the tokens' text";
  if (c.clustered.compressor == Compressor::kGsc) return "compressor=gsc makes as many pages as the keys cluster into";
  if (c.dar.window > 0) return "the DAR probe projects the cache a few positions per step";
  if (c.dense_shadow) return "the dense shadow's records are made on the host";
  return "";
}

// The config's identity as the recorded step sees it: every parameter is a fixed argument of
// some kernel, so any difference means recording again.
std::string layer_key(const LayerConfig& c) {
  LukaConfig one;
  one.layers.push_back(c);
  return one.to_json();
}

}  // namespace

ModelShape model_shape(const ModelConfig& c, std::int64_t dtype_bytes) {
  ModelShape s;
  s.layers = c.num_layers;
  s.heads = c.num_heads;
  s.kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.hidden = c.hidden_size;
  s.intermediate = c.intermediate_size;
  s.vocab = c.vocab_size;
  s.dtype_bytes = dtype_bytes;
  return s;
}

std::int64_t StepBuffer::elements() const {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

const char* to_string(StepVariant variant) { return variant == StepVariant::kPlain ? "plain" : "pages"; }

const char* to_string(StepChange change) {
  switch (change) {
    case StepChange::kNone:
      return "none";
    case StepChange::kRecapture:
      return "recapture";
    case StepChange::kReplan:
      return "replan";
  }
  return "?";
}

StepVariant StepPlan::variant(std::int64_t step) const {
  return std::binary_search(page_steps.begin(), page_steps.end(), step) ? StepVariant::kPages : StepVariant::kPlain;
}

std::int64_t StepPlan::total_bytes() const {
  std::int64_t n = 0;
  for (const StepBuffer& b : buffers) n += b.bytes();
  return n;
}

bool StepPlan::has_buffer(const std::string& name, int layer) const {
  return std::any_of(buffers.begin(), buffers.end(),
                     [&](const StepBuffer& b) { return b.name == name && b.layer == layer; });
}

const StepBuffer& StepPlan::buffer(const std::string& name, int layer) const {
  for (const StepBuffer& b : buffers)
    if (b.name == name && b.layer == layer) return b;
  fail("step plan", "no buffer " + name + (layer >= 0 ? " of layer " + std::to_string(layer) : std::string()));
}

StepPlan plan_step(const ModelShape& m, const RunLength& run, const std::vector<LayerConfig>& layers,
                   const std::vector<bool>& recorded) {
  if (m.layers < 1 || m.heads < 1 || m.kv_heads < 1 || m.heads % m.kv_heads != 0 || m.head_dim < 2 || m.hidden < 1 ||
      m.intermediate < 1 || m.vocab < 1 || (m.dtype_bytes != 2 && m.dtype_bytes != 4))
    fail("step plan", "a model shape with a zero size, heads not a multiple of the KV heads or a dtype of " +
                          std::to_string(m.dtype_bytes) + " bytes");
  if (run.prompt < 1 || run.max_new_tokens < 1) fail("step plan", "a run needs a prompt and at least one new token");
  if (run.context() > std::numeric_limits<std::int32_t>::max())
    fail("step plan", "a context of " + std::to_string(run.context()) + " positions exceeds the int32 page table");
  if (!layers.empty() && static_cast<std::int64_t>(layers.size()) != m.layers)
    fail("step plan",
         std::to_string(layers.size()) + " layer configs for a model of " + std::to_string(m.layers) + " layers");

  StepPlan p;
  p.shape = m;
  p.run = run;
  p.context = run.context();
  p.layers = layers;
  p.luka = !layers.empty();
  if (!recorded.empty() && static_cast<std::int64_t>(recorded.size()) != m.layers)
    fail("step plan", "records asked for " + std::to_string(recorded.size()) + " layers of " + std::to_string(m.layers));
  if (p.luka) p.recorded = recorded;
  p.recorded.resize(static_cast<std::size_t>(m.layers), false);
  p.records = std::find(p.recorded.begin(), p.recorded.end(), true) != p.recorded.end();
  const std::int64_t T = p.context, H = m.heads, KV = m.kv_heads, D = m.head_dim, N = run.max_new_tokens;
  const auto add = [&](const std::string& name, int layer, std::vector<std::int64_t> shape, ElemKind kind) {
    p.buffers.push_back({name, layer, std::move(shape), kind, elem_bytes(kind, m.dtype_bytes)});
  };

  // [SECTION] the step's own scalars and activations (one token)
  add("token", -1, {1}, ElemKind::kI64);          // the id fed: the last step's argmax
  add("position", -1, {1}, ElemKind::kI64);       // its position = the cache length before the step
  add("step", -1, {1}, ElemKind::kI64);           // decode steps run so far
  add("ids", -1, {N}, ElemKind::kI64);            // every chosen id, read back after the run
  add("key_positions", -1, {T}, ElemKind::kI64);  // 0 .. T-1, constant: the mask's comparand
  add("mask", -1, {T}, ElemKind::kBool);          // true past the length: those keys get -inf
  add("x", -1, {1, m.hidden}, ElemKind::kCompute);
  add("h", -1, {1, m.hidden}, ElemKind::kCompute);
  // RMSNorm in fp32 over one row of hidden or H rows of D (q/k norm): its input, squares, scales.
  add("norm_input", -1, {std::max(m.hidden, H * D)}, ElemKind::kF32);
  add("norm_square", -1, {std::max(m.hidden, H * D)}, ElemKind::kF32);
  add("norm_scale", -1, {H}, ElemKind::kF32);
  add("q", -1, {H, D}, ElemKind::kCompute);
  add("k", -1, {KV, D}, ElemKind::kCompute);
  add("v", -1, {KV, D}, ElemKind::kCompute);
  add("rotated", -1, {H, D}, ElemKind::kCompute);
  add("position_f32", -1, {1}, ElemKind::kF32);
  add("rope_angle", -1, {D / 2}, ElemKind::kF32);
  add("rope_cos", -1, {D}, ElemKind::kCompute);
  add("rope_sin", -1, {D}, ElemKind::kCompute);
  add("scores", -1, {H, T}, ElemKind::kF32);  // one layer's attention logits over every reserved key
  add("probabilities", -1, {H, T}, ElemKind::kF32);
  add("attention", -1, {H, D}, ElemKind::kCompute);
  add("gate", -1, {1, m.intermediate}, ElemKind::kCompute);
  add("up", -1, {1, m.intermediate}, ElemKind::kCompute);
  add("logits", -1, {1, m.vocab}, ElemKind::kF32);
  // The fused ops' rows (core/run/step_kernels.h): q|k|v, a projection's output, gate|up, the
  // activation, and the RoPE tables (fp32 [D/2], rounded to the compute dtype).
  add("qkv", -1, {1, (H + 2 * KV) * D}, ElemKind::kCompute);
  add("projected", -1, {1, m.hidden}, ElemKind::kCompute);
  add("gate_up", -1, {1, 2 * m.intermediate}, ElemKind::kCompute);
  add("activation", -1, {1, m.intermediate}, ElemKind::kCompute);
  add("table_cos", -1, {D / 2}, ElemKind::kF32);
  add("table_sin", -1, {D / 2}, ElemKind::kF32);
  // The constants the step's ops take as tensors, not as scalars: an op given a scalar wraps it in
  // a fresh tensor each call (an allocation per op). fp32: eps, hidden, D (the first three as
  // step_kernels.h's StepTensors holds them), 1/sqrt(D), the group size; and the int64 1 that
  // advances the position and the step counter.
  add("constants", -1, {5}, ElemKind::kF32);
  add("one", -1, {1}, ElemKind::kI64);
  if (m.dtype_bytes != 4) {
    add("logits_compute", -1, {1, m.vocab}, ElemKind::kCompute);
    // A 16-bit step attends in fp32, as the decoder's attention does (products summed in fp32,
    // fp32 probabilities): the query, the layer's keys and values widened, and the output before
    // it is rounded to the compute dtype. One set, shared by the layers in turn.
    add("q_f32", -1, {H, D}, ElemKind::kF32);
    add("keys_f32", -1, {KV, T, D}, ElemKind::kF32);
    add("values_f32", -1, {KV, T, D}, ElemKind::kF32);
    add("attention_f32", -1, {H, D}, ElemKind::kF32);
  }

  // [SECTION] per layer: the KV cache, then the LuKA state
  p.prefill_pages.assign(static_cast<std::size_t>(m.layers), 0);
  p.max_pages.assign(static_cast<std::size_t>(m.layers), 0);
  p.page_counts.assign(static_cast<std::size_t>(m.layers), std::vector<std::int64_t>(static_cast<std::size_t>(N), 0));
  for (int l = 0; l < m.layers; ++l) {
    add("k_cache", l, {KV, T, D}, ElemKind::kCompute);
    add("v_cache", l, {KV, T, D}, ElemKind::kCompute);
    if (!p.luka) continue;
    const LayerConfig& c = layers[static_cast<std::size_t>(l)];
    if (const std::string why = eager_reason(c); !why.empty())
      p.eager_layers.push_back("layer " + std::to_string(l) + ": " + why);
    // Every LuKA layer keeps the accumulators and makes pages, whatever its mode (core/luka).
    add("importance", l, {KV, T}, ElemKind::kF32);
    add("h2o", l, {H, T}, ElemKind::kF32);
    add("spread", l, {KV, T}, ElemKind::kF32);
    add("layer_constants", l, {2}, ElemKind::kF32);  // h2o decay, the compressor's tau
    const bool recorded_layer = p.recorded[static_cast<std::size_t>(l)];
    if (recorded_layer) add("record_effective", l, {H, T}, ElemKind::kF32);  // the step's effective rows
    // The page schedule of the whole run, as the layer will follow it (rules::pages_due): after
    // the prefill (step 0), then after each decode step s at context prompt + s.
    const rules::PageRule rule = to_rule(c.clustered);
    rules::PageClock clock{c.clustered.page_counter_start, 0};
    std::int64_t pages = rules::pages_due(rule, &clock, 0, 0, run.prompt, 0);
    p.prefill_pages[static_cast<std::size_t>(l)] = pages;
    for (std::int64_t s = 1; s <= N; ++s) {
      const std::int64_t n = rules::pages_due(rule, &clock, pages, pages * rule.page_size, run.prompt + s, s);
      p.page_counts[static_cast<std::size_t>(l)][static_cast<std::size_t>(s - 1)] = n;
      pages += n;
    }
    p.max_pages[static_cast<std::size_t>(l)] = pages;
    const std::int64_t P = std::max<std::int64_t>(pages, 1);  // one row at least: a zero-size buffer has no address
    add("summary_keys", l, {KV, P, D}, ElemKind::kF32);
    add("summary_values", l, {KV, P, D}, ElemKind::kF32);
    add("summary_bias", l, {KV, P}, ElemKind::kF32);
    add("page_start", l, {P + 1}, ElemKind::kI32);
    // Where the layer's pages stand on the device (the pages made, the paged end), and what making
    // c pages adds to it (row c: c, c·page_size), so a recorded step makes pages at offsets it
    // reads on the device.
    add("page_state", l, {2}, ElemKind::kI64);
    const auto& counts = p.page_counts[static_cast<std::size_t>(l)];
    const std::int64_t most_at_once = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
    add("page_advance", l, {std::max<std::int64_t>(most_at_once, 1) + 1, 2}, ElemKind::kI64);
    if (c.mode == AttentionMode::kLined) {
      // The largest heavy-hitter set of any step of the run (the budget is not monotone in T
      // once the window is a fraction of it).
      std::int64_t heavy = 1;
      for (std::int64_t t = run.prompt + 1; t <= T; ++t)
        heavy = std::max(heavy, rules::lined_cover(to_rule(c.lined), t).heavy);
      add("heavy", l, {H, heavy}, ElemKind::kI64);
      add("heavy_keys", l, {H, heavy}, ElemKind::kI64);  // the ranked keys top-k returns with them
      add("lined_table", l, {N, 3}, ElemKind::kI64);     // per step: window start, selectable end, heavy count
    } else if (c.mode == AttentionMode::kKascade) {
      KascadeTopK rule_k;
      rule_k.count = static_cast<int>(c.kascade.top_k);
      rule_k.fraction = c.kascade.top_frac;
      rule_k.min_count = static_cast<int>(c.kascade.min_k);
      // The size grows with T (never shrinks), so the context's is the largest.
      const std::int64_t groups = c.kascade.shared ? 1 : KV;
      add("selected", l, {groups, rule_k.size(static_cast<int>(T))}, ElemKind::kI64);
      // core/run/static_kascade: the ranked keys, each step's k, the sets as masks over the keys
      // (an anchor's are what its reuse layers read) and a reuse layer's anchor head per KV head.
      add("selected_keys", l, {groups, rule_k.size(static_cast<int>(T))}, ElemKind::kI64);
      add("kascade_table", l, {N, 1}, ElemKind::kI64);
      add("kascade_row", l, {1, 1}, ElemKind::kI64);
      add("kascade_mask", l, {c.kascade.source < 0 ? groups : KV, T}, ElemKind::kBool);
      add("kascade_map", l, {KV}, ElemKind::kI64);
    } else if (c.mode == AttentionMode::kClustered) {
      // The cover's logits and softmax (summaries then raw tokens) and each head's refined pages.
      add("cover", l, {H, P + T}, ElemKind::kF32);
      add("refined", l, {H, P}, ElemKind::kI64);
      if (recorded_layer) add("record_alpha", l, {H, P}, ElemKind::kF32);  // α of the pages before refinement
      // The step's masks and weights over the pages (core/run/static_clustered): each key's page,
      // α, the refined pages per head, the weights of the summaries, and the top-k pages with their
      // keys (the pages made and the paged end are the layer's page_state).
      add("page_of_key", l, {T}, ElemKind::kI64);
      add("cover_alpha", l, {H, P + T}, ElemKind::kF32);
      add("refined_pages", l, {H, P}, ElemKind::kBool);
      add("summary_weights", l, {H, P}, ElemKind::kF32);
      // Wide enough for any top_k: a change of it records again without reserving again.
      add("page_top", l, {H, P}, ElemKind::kI64);
      add("page_top_keys", l, {H, P}, ElemKind::kI64);
      add("refine_threshold", l, {1}, ElemKind::kF32);  // the threshold rule's epsilon
      if (c.clustered.rule == RefineRule::kTopFrac) {
        add("page_budget", l, {P + 1}, ElemKind::kI64);  // top_frac: the pages refined of 0 .. P made
        add("page_budget_row", l, {1}, ElemKind::kI64);
      } else if (c.clustered.rule == RefineRule::kTopP) {
        // top_p: the ranked scores and their running sums in fp64 (as select_pages sums them), the
        // total and the cut per unit, top_p, and the ranks that pass as a mask and as counts.
        add("page_sums", l, {4, H, P}, ElemKind::kF64);
        add("page_cut", l, {2, H, 1}, ElemKind::kF64);
        add("refine_top_p", l, {2}, ElemKind::kF64);
        add("page_passed", l, {H, P}, ElemKind::kBool);
        add("page_passed_count", l, {H, P + 1}, ElemKind::kI64);
      }
      if (c.clustered.math == RefineMath::kMassPreserving)
        add("local", l, {H, P, c.clustered.page_size}, ElemKind::kF32);  // a refined page's softmax
    }
  }
  if (p.luka) {
    add("group_sum", -1, {KV, T}, ElemKind::kF32);  // a step's attention summed over each KV group
    // The largest page creation of any step: the compressor's weights of its tokens.
    std::int64_t most = 1;
    for (int l = 0; l < m.layers; ++l)
      for (const std::int64_t n : p.page_counts[static_cast<std::size_t>(l)])
        most = std::max(most, n * layers[static_cast<std::size_t>(l)].clustered.page_size);
    // Page creation at device offsets (static_step.cpp's enqueue_pages), for every KV head at
    // once: the pages' positions and slots, 0 .. most-1, the importance, compressor logits and
    // weights π over their tokens, their keys and values, and the summaries and biases made.
    std::int64_t slots = 1;
    for (const auto& counts : p.page_counts)
      for (const std::int64_t n : counts) slots = std::max(slots, n);
    add("page_index", -1, {most}, ElemKind::kI64);
    add("page_slots", -1, {slots}, ElemKind::kI64);
    add("page_counting", -1, {most}, ElemKind::kI64);
    add("page_importance", -1, {KV, most}, ElemKind::kF32);
    add("page_logits", -1, {KV, most}, ElemKind::kF32);
    add("page_weights", -1, {KV, most}, ElemKind::kF32);
    add("page_keys", -1, {KV, most, D}, ElemKind::kCompute);
    add("page_values", -1, {KV, most, D}, ElemKind::kCompute);
    add("page_summary", -1, {KV, slots, D}, ElemKind::kF32);
    add("page_bias", -1, {KV, slots}, ElemKind::kF32);
    const bool adaptive = std::any_of(layers.begin(), layers.end(),
                                      [](const LayerConfig& c) { return c.clustered.bias == SummaryBias::kAdaptive; });
    if (adaptive) add("page_scratch", -1, {5, most}, ElemKind::kF32);  // the adaptive bias's entropies
    // Scratch of the lined and clustered steps: ranking keys, scores, masks over keys or pages,
    // 0..S-1 and 2^31-1 minus it (the tie-break), and the key weights.
    std::int64_t S = T, ranked = 1;
    bool sparse = false;
    for (int l = 0; l < m.layers; ++l) {
      const LayerConfig& c = layers[static_cast<std::size_t>(l)];
      if (c.mode == AttentionMode::kLined) {
        sparse = true;
        ranked = std::max(ranked, p.buffer("heavy", l).shape[1]);
      } else if (c.mode == AttentionMode::kClustered) {
        sparse = true;
        S = std::max(S, p.max_pages[static_cast<std::size_t>(l)]);
        if (c.clustered.rule == RefineRule::kTopFrac) ranked = std::max(ranked, p.buffer("page_top", l).shape[1]);
      } else if (c.mode == AttentionMode::kKascade) {
        sparse = true;
        ranked = std::max(ranked, p.buffer("selected", l).shape[1]);
      }
    }
    if (sparse) {
      add("select_keys", -1, {H, S}, ElemKind::kI64);
      add("select_score", -1, {H, S}, ElemKind::kF32);
      add("select_mask", -1, {H, S}, ElemKind::kBool);
      add("key_mask", -1, {H, T}, ElemKind::kBool);
      add("key_weights", -1, {H, T}, ElemKind::kF32);
      add("bounds", -1, {3, S}, ElemKind::kBool);
      add("rank_mask", -1, {H, ranked}, ElemKind::kBool);
      add("counting", -1, {S}, ElemKind::kI64);
      add("tie_break", -1, {S}, ElemKind::kI64);
      add("select_constants", -1, {2}, ElemKind::kI64);  // 2^32, 0
      add("lined_row", -1, {1, 3}, ElemKind::kI64);
      add("row_sum", -1, {H, 1}, ElemKind::kF32);
    }
  }
  for (std::int64_t s = 1; s <= N; ++s)
    for (const auto& counts : p.page_counts)
      if (counts[static_cast<std::size_t>(s - 1)] > 0) {
        p.page_steps.push_back(s);
        break;
      }
  if (p.luka) add("page_schedule", -1, {N, m.layers}, ElemKind::kI32);  // pages each layer makes after step s

  p.moving_arguments = {"token", "position", "step"};
  return p;
}

StepChange step_change(const StepPlan& current, const std::vector<LayerConfig>& next) {
  const StepPlan fresh = plan_step(current.shape, current.run, next, current.recorded);
  if (fresh.buffers.size() != current.buffers.size()) return StepChange::kReplan;
  for (std::size_t i = 0; i < fresh.buffers.size(); ++i) {
    const StepBuffer &a = fresh.buffers[i], &b = current.buffers[i];
    if (a.name != b.name || a.layer != b.layer || a.shape != b.shape || a.kind != b.kind) return StepChange::kReplan;
  }
  if (next.size() != current.layers.size()) return StepChange::kReplan;
  for (std::size_t l = 0; l < next.size(); ++l)
    if (layer_key(next[l]) != layer_key(current.layers[l])) return StepChange::kRecapture;
  return StepChange::kNone;
}

}  // namespace luka
