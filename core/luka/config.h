// LuKA attention configuration (docs/design.md §5.6): one LayerConfig per layer, presets, JSON files
// and `key=value` overrides. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/luka_params.h"
#include "kernels/common/luka_rules.h"

namespace luka {

const char* to_string(AttentionMode m);
const char* to_string(Selection s);
const char* to_string(Compressor c);
const char* to_string(SummaryBias b);
const char* to_string(RefineRule r);
const char* to_string(RefineMath m);
const char* to_string(ImportanceSource s);
const char* to_string(BudgetRounding r);
const char* to_string(PrefillWindow w);
const char* to_string(PageSchedule s);
const char* to_string(BiasEntropy b);
const char* to_string(RefineOn r);
const char* to_string(PageRank r);
const char* to_string(KascadePrefill p);
const char* to_string(DarKeys k);
const char* to_string(Segmenter s);
const char* to_string(DelimiterMatch m);
const char* to_string(PressMethod m);
const char* to_string(PressAllocation a);

// Kascade (docs/papers/kascade.md, docs/methods.md): an anchor layer computes its exact attention, pools it
// post-softmax over each KV head's query heads (decode) or over a tile of queries and their heads
// (prefill), keeps the top-k keys and attends to them only (layer 0 keeps its dense output); a
// reuse layer attends only to the top-k of its anchor, each KV head through a head map.
struct KascadeConfig {
  std::int64_t source = -1;             // -1: an anchor; else the anchor layer (< this one) it reuses
  std::vector<std::int64_t> head_map;   // reuse: per KV head, the anchor's KV head (empty: identity)
  // How many keys an anchor keeps of the T it sees: ⌈top_frac·T⌉ with at least min_k, or top_k
  // when top_frac is 0; always in [1, T]. The paper's runs: 10% with a minimum of 128.
  std::int64_t top_k = 64;
  double top_frac = 0.1;
  std::int64_t min_k = 128;
  bool shared = false;                  // an anchor's one top-k pooled over every head (the ablation)
  KascadePrefill prefill = KascadePrefill::kTopK;  // top_k: the paper's rolling prefill
  std::int64_t tile = 128;              // prefill queries that share one top-k
};

// The distance-adaptive-dimension probe (dar-dual-dimensionality.md, docs/methods.md), for
// dense, lined and clustered layers: a key or value more than `window` positions behind the query
// is replaced by its projection onto the `rank` leading principal directions of its layer and KV
// head, mean + U_r U_rᵀ (x − mean), from the basis `luka calibrate --dar` measured. Keys are
// projected before RoPE, as the paper reduces the hidden state its keys are computed from (the
// cached key rotated back, projected, rotated again), or as the cache holds them (post_rope). A
// query within the window sees the token whole. A training-free probe of the paper's idea (which
// trains low-dimensional projections), not its method.
struct DarConfig {
  std::int64_t window = 0;  // 0: off
  std::int64_t rank = 0;    // 0: a quarter of the head dimension
  std::string basis;        // the .npy file `luka calibrate --dar` wrote
  DarKeys keys = DarKeys::kPreRope;
  std::int64_t sink = 0;    // the first `sink` positions are always seen whole (attention sinks)
};

// A press (core/press/press.h, docs/methods.md): kvpress's scoring of the prompt's cache once,
// after prefill; each KV head then attends to its kept prompt positions and to every position
// after the prompt. Defaults are kvpress 0.5.5's. budget_tokens > 0 replaces compression_ratio.
struct PressConfig {
  PressMethod method = PressMethod::kSnapKv;
  PressAllocation allocation = PressAllocation::kUniform;
  double compression_ratio = 0.5;  // the fraction of the prompt removed, in [0, 1)
  std::int64_t budget_tokens = 0;
  std::int64_t n_sink = 4;         // streaming_llm, expected_attention
  std::int64_t window_size = 64;   // snapkv, pyramidkv
  std::int64_t kernel_size = 5;    // snapkv
  std::int64_t n_future_positions = 512;  // expected_attention
  bool use_covariance = true;      // expected_attention
  bool use_vnorm = true;           // expected_attention
  double epsilon = 0;              // expected_attention
  std::int64_t seed = 0;           // random
  std::int64_t beta = 20;          // pyramidkv
  double alpha_safeguard = 0.2;    // adakv
  // Compression during decoding (kvpress's DecodingPress): every `interval` decode steps (0: never)
  // the layer's kept set is scored again with the method and cut to `target_size` positions per KV
  // head. With interval 1 and method tova it is TOVA's own per-step eviction.
  std::int64_t interval = 0;
  std::int64_t target_size = 2048;
};

// Quest (core/press/quest.h, docs/methods.md): pages of page_size positions bounded by the
// per-channel min and max of their keys; each decode step a query head attends exactly to the
// `pages` pages of highest bound and to the last `window` positions; the other pages are left out.
struct QuestConfig {
  std::int64_t page_size = 16;
  std::int64_t pages = 64;
  std::int64_t window = 16;
};

struct LayerConfig {
  AttentionMode mode = AttentionMode::kDense;
  LinedConfig lined;
  ClusteredConfig clustered;
  KascadeConfig kascade;
  DarConfig dar;
  PressConfig press;
  QuestConfig quest;
  bool dense_shadow = false;     // also run dense attention and report fidelity
  ImportanceSource importance_source = ImportanceSource::kEffective;
};

struct LukaConfig {
  std::vector<LayerConfig> layers;

  // Presets (docs/design.md §5.6): "dense", "lined", "clustered", "mixed(a,b)" (first a and last b
  // layers lined, the rest clustered), "paper", "authors_eval", "kascade" (anchors spaced as the
  // paper's Qwen3-8B ones; `luka calibrate --kascade` measures a model's own), "semanticache"
  // (every layer clustered with delimiter chunks, GSC and proportional attention), kvpress's methods
  // (streaming_llm, snapkv, tova, knorm, expected_attention, random, pyramidkv, adakv), decoding and
  // tova_decoding (compression during decoding), quest (every layer but the first two). Throws
  // luka::Error for others.
  static LukaConfig preset(const std::string& name, std::int64_t num_layers);

  // JSON: {"preset": NAME?, "default": {key: value...}?, "layers": {"0-7": {...}, "12": {...}}?}.
  // Keys are those of apply(). Throws luka::Error naming `where`.
  static LukaConfig from_json(const std::string& text, std::int64_t num_layers, const std::string& where);
  static LukaConfig from_json_file(const std::string& path, std::int64_t num_layers);

  // One override: "layer=5,mode=lined,rho=0.25" or "layers=0-7:mode=clustered" style, with
  // layer/layers a layer list (core/util/layer_range.h: N, A-B, A-B|C, A-B,C or all; default all).
  // Throws luka::Error.
  void apply_override(const std::string& spec);

  // Sets one parameter on the given layers; throws luka::Error for an unknown key or a bad value.
  void set(const std::vector<std::int64_t>& layers, const std::string& key, const std::string& value);

  // The full per-layer config as JSON (what `luka info --config` prints and captures store).
  std::string to_json() const;

  // Layer indices, ascending, from a layer list (core/util/layer_range.h), checked against the
  // layer count.
  std::vector<std::int64_t> parse_layers(const std::string& spec) const;
};

// Throws luka::Error when a layer's parameters are out of range (page size 0, rho outside (0, 1], ...).
void validate(const LayerConfig& c, std::int64_t layer);

// Throws luka::Error unless every Kascade reuse layer names an earlier layer that is a Kascade
// anchor. Presets, layers-config files and overrides check it; a live switch meets it at the step.
void validate_kascade_sources(const LukaConfig& config);

// "clustered 2-25, lined 0-1|26-27": which layers run which mode.
std::string describe_modes(const LukaConfig& config);

// The per-layer keys of --set and layers-config files, in the order to_json writes them.
std::vector<std::string> layer_config_key_names();
std::string layer_config_keys();  // the same, comma-separated

}  // namespace luka
