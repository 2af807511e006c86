// Index of this file:
//   [SECTION] the keys' names and values
//   [SECTION] describing and validating a config
//   [SECTION] layer lists and overrides
//   [SECTION] presets
//   [SECTION] JSON files

#include "core/luka/config.h"

#include <algorithm>
#include <map>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/luka/auto_config.h"
#include "core/util/error.h"
#include "core/util/layer_range.h"
#include "core/util/text_file.h"

namespace luka {

namespace {

using nlohmann::json;

template <typename E, std::size_t N>
E parse_enum(const std::string& value, const std::string& key, const std::pair<const char*, E> (&names)[N]) {
  std::string options;
  for (const auto& [name, e] : names) {
    if (value == name) return e;
    options += (options.empty() ? "" : ", ") + std::string(name);
  }
  fail("luka config", "unknown " + key + " '" + value + "' (expected " + options + ")");
}

// [SECTION] the keys' names and values

const std::pair<const char*, AttentionMode> kModes[] = {
    {"dense", AttentionMode::kDense},
    {"lined", AttentionMode::kLined},
    {"clustered", AttentionMode::kClustered},
    {"kascade", AttentionMode::kKascade},
    {"press", AttentionMode::kPress},
    {"quest", AttentionMode::kQuest}};
const std::pair<const char*, PressMethod> kPressMethods[] = {
    {"streaming_llm", PressMethod::kStreamingLlm}, {"snapkv", PressMethod::kSnapKv},
    {"tova", PressMethod::kTova},                  {"knorm", PressMethod::kKnorm},
    {"expected_attention", PressMethod::kExpectedAttention}, {"random", PressMethod::kRandom}};
const std::pair<const char*, PressAllocation> kPressAllocations[] = {
    {"uniform", PressAllocation::kUniform}, {"pyramidkv", PressAllocation::kPyramid}, {"adakv", PressAllocation::kAdaKv}};
const std::pair<const char*, Selection> kSelections[] = {
    {"head", Selection::kPerHead}, {"group", Selection::kPerGroup}, {"layer", Selection::kPerLayer}};
const std::pair<const char*, Compressor> kCompressors[] = {{"mean", Compressor::kMean},
                                                           {"attention_weighted", Compressor::kAttentionWeighted},
                                                           {"random", Compressor::kRandom},
                                                           {"gsc", Compressor::kGsc}};
const std::pair<const char*, SummaryBias> kBiases[] = {
    {"none", SummaryBias::kNone}, {"fixed", SummaryBias::kFixed}, {"adaptive", SummaryBias::kAdaptive}};
const std::pair<const char*, RefineRule> kRules[] = {{"threshold", RefineRule::kThreshold},
                                                     {"top_k", RefineRule::kTopK},
                                                     {"top_frac", RefineRule::kTopFrac},
                                                     {"top_p", RefineRule::kTopP}};
const std::pair<const char*, RefineMath> kMaths[] = {{"mass_preserving", RefineMath::kMassPreserving},
                                                     {"exact", RefineMath::kExact}};
const std::pair<const char*, ImportanceSource> kImportanceSources[] = {{"effective", ImportanceSource::kEffective},
                                                                       {"cover", ImportanceSource::kCover}};
const std::pair<const char*, BudgetRounding> kRoundings[] = {{"ceil", BudgetRounding::kCeil}, {"floor", BudgetRounding::kFloor}};
const std::pair<const char*, PrefillWindow> kPrefillWindows[] = {{"sliding", PrefillWindow::kSliding},
                                                                 {"fixed", PrefillWindow::kFixed}};
const std::pair<const char*, PageSchedule> kSchedules[] = {{"interval", PageSchedule::kInterval},
                                                           {"authors", PageSchedule::kAuthors}};
const std::pair<const char*, BiasEntropy> kBiasEntropies[] = {{"weights", BiasEntropy::kWeights},
                                                              {"importance_mean", BiasEntropy::kImportanceMean}};
const std::pair<const char*, RefineOn> kRefineOns[] = {{"biased", RefineOn::kBiased}, {"unbiased", RefineOn::kUnbiased}};
const std::pair<const char*, PageRank> kPageRanks[] = {{"max", PageRank::kMax}, {"sum", PageRank::kSum}};
const std::pair<const char*, KascadePrefill> kKascadePrefills[] = {{"dense", KascadePrefill::kDense},
                                                                   {"top_k", KascadePrefill::kTopK}};
const std::pair<const char*, DarKeys> kDarKeys[] = {{"pre_rope", DarKeys::kPreRope}, {"post_rope", DarKeys::kPostRope}};
const std::pair<const char*, Segmenter> kSegmenters[] = {{"fixed", Segmenter::kFixed}, {"delimiter", Segmenter::kDelimiter}};
const std::pair<const char*, DelimiterMatch> kDelimiterMatches[] = {{"exact", DelimiterMatch::kExact},
                                                                   {"composed", DelimiterMatch::kComposed}};
// The delimiters by name (a text value cannot hold ',' or ':', which separate --set pairs).
const std::pair<const char*, const char*> kDelimiterNames[] = {
    {"period", "."}, {"comma", ","}, {"question", "?"}, {"exclamation", "!"}, {"semicolon", ";"},
    {"colon", ":"},  {"space", " "}, {"tab", "\t"},     {"newline", "\n"}};

// "period|comma|newline" -> {".", ",", "\n"}; each name once.
std::vector<std::string> parse_delimiters(const std::string& key, const std::string& value) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (true) {
    const std::size_t bar = value.find('|', begin);
    const std::string name = value.substr(begin, bar == std::string::npos ? std::string::npos : bar - begin);
    const char* text = nullptr;
    for (const auto& [n, t] : kDelimiterNames)
      if (name == n) text = t;
    if (!text) {
      std::string names;
      for (const auto& [n, t] : kDelimiterNames) names += (names.empty() ? "" : ", ") + std::string(n);
      fail("luka config", key + " must name delimiters separated by '|' (of " + names + "), got '" + value + "'");
    }
    if (std::find(out.begin(), out.end(), text) != out.end()) fail("luka config", key + " names '" + name + "' twice");
    out.emplace_back(text);
    if (bar == std::string::npos) return out;
    begin = bar + 1;
  }
}

std::string delimiters_text(const std::vector<std::string>& texts) {
  std::string out;
  for (const std::string& t : texts)
    for (const auto& [n, d] : kDelimiterNames)
      if (t == d) out += (out.empty() ? "" : "|") + std::string(n);
  return out;
}

template <typename E, std::size_t N>
const char* name_of(E e, const std::pair<const char*, E> (&names)[N]) {
  for (const auto& [name, v] : names)
    if (v == e) return name;
  return "?";
}

double parse_double(const std::string& key, const std::string& value) {
  // A number, or a fraction of two ("1/8"); 1/0 and 0/0 are not finite.
  const auto number = [&](const std::string& text) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size()) fail("luka config", key + " must be a number, got '" + value + "'");
    return v;
  };
  const std::size_t slash = value.find('/');
  const double v = slash == std::string::npos ? number(value) : number(value.substr(0, slash)) / number(value.substr(slash + 1));
  if (!std::isfinite(v)) fail("luka config", key + " must be finite, got '" + value + "'");
  return v;
}

std::int64_t parse_int(const std::string& key, const std::string& value) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || value.empty()) fail("luka config", key + " must be an integer, got '" + value + "'");
  return v;
}

// A head map: KV head indices separated by '|' ("0|0|3|1"); "" or "identity" is the identity.
std::vector<std::int64_t> parse_head_map(const std::string& key, const std::string& value) {
  std::vector<std::int64_t> out;
  if (value.empty() || value == "identity") return out;
  std::size_t begin = 0;
  while (true) {
    const std::size_t bar = value.find('|', begin);
    const std::int64_t h = parse_int(key, value.substr(begin, bar == std::string::npos ? std::string::npos : bar - begin));
    if (h < 0) fail("luka config", key + " must list KV heads >= 0 separated by '|', got '" + value + "'");
    out.push_back(h);
    if (bar == std::string::npos) return out;
    begin = bar + 1;
  }
}

std::string head_map_text(const std::vector<std::int64_t>& map) {
  std::string out;
  for (const std::int64_t h : map) out += (out.empty() ? "" : "|") + std::to_string(h);
  return out;
}

bool parse_bool(const std::string& key, const std::string& value) {
  if (value == "true" || value == "1" || value == "on") return true;
  if (value == "false" || value == "0" || value == "off") return false;
  fail("luka config", key + " must be true or false, got '" + value + "'");
}

// Every per-layer key, once: its name, how a text value sets it, and its JSON value. --set, the
// layers-config files and captures' stored configs all go through this table.
struct Key {
  const char* name;
  void (*set)(LayerConfig&, const std::string& key, const std::string& value);
  json (*get)(const LayerConfig&);
};

#define LUKA_KEY_INT(NAME, FIELD) \
  {NAME, [](LayerConfig& c, const std::string& k, const std::string& v) { c.FIELD = parse_int(k, v); }, \
   [](const LayerConfig& c) { return json(c.FIELD); }}
#define LUKA_KEY_DOUBLE(NAME, FIELD) \
  {NAME, [](LayerConfig& c, const std::string& k, const std::string& v) { c.FIELD = parse_double(k, v); }, \
   [](const LayerConfig& c) { return json(c.FIELD); }}
#define LUKA_KEY_BOOL(NAME, FIELD) \
  {NAME, [](LayerConfig& c, const std::string& k, const std::string& v) { c.FIELD = parse_bool(k, v); }, \
   [](const LayerConfig& c) { return json(c.FIELD); }}
#define LUKA_KEY_ENUM(NAME, FIELD, TABLE) \
  {NAME, [](LayerConfig& c, const std::string& k, const std::string& v) { c.FIELD = parse_enum(v, k, TABLE); }, \
   [](const LayerConfig& c) { return json(name_of(c.FIELD, TABLE)); }}

const Key kKeys[] = {
    LUKA_KEY_ENUM("mode", mode, kModes),
    LUKA_KEY_BOOL("dense_shadow", dense_shadow),
    LUKA_KEY_ENUM("importance_source", importance_source, kImportanceSources),
    LUKA_KEY_INT("window", lined.window),
    LUKA_KEY_DOUBLE("window_frac", lined.window_frac),
    LUKA_KEY_DOUBLE("rho", lined.rho),
    LUKA_KEY_ENUM("lined_selection", lined.selection, kSelections),
    LUKA_KEY_DOUBLE("decay", lined.decay),
    LUKA_KEY_BOOL("sparse_prefill", lined.sparse_prefill),
    LUKA_KEY_ENUM("sparse_prefill_window", lined.sparse_prefill_window, kPrefillWindows),
    LUKA_KEY_ENUM("lined_rounding", lined.rounding, kRoundings),
    LUKA_KEY_BOOL("heavy_late", lined.heavy_late),
    LUKA_KEY_INT("page_size", clustered.page_size),
    LUKA_KEY_INT("tail", clustered.tail),
    LUKA_KEY_INT("interval", clustered.interval),
    LUKA_KEY_ENUM("page_schedule", clustered.schedule, kSchedules),
    LUKA_KEY_INT("page_counter_start", clustered.page_counter_start),
    LUKA_KEY_BOOL("page_bypass", clustered.page_bypass),
    LUKA_KEY_INT("max_pages", clustered.max_pages),
    LUKA_KEY_ENUM("segmenter", clustered.segmenter, kSegmenters),
    {"delimiters",
     [](LayerConfig& c, const std::string& k, const std::string& v) { c.clustered.delimiters = parse_delimiters(k, v); },
     [](const LayerConfig& c) { return json(delimiters_text(c.clustered.delimiters)); }},
    LUKA_KEY_ENUM("delimiter_match", clustered.delimiter_match, kDelimiterMatches),
    LUKA_KEY_ENUM("compressor", clustered.compressor, kCompressors),
    LUKA_KEY_DOUBLE("tau", clustered.tau),
    LUKA_KEY_DOUBLE("gsc_tau", clustered.gsc_tau),
    {"seed", [](LayerConfig& c, const std::string& k, const std::string& v) { c.clustered.seed = static_cast<std::uint64_t>(parse_int(k, v)); },
     [](const LayerConfig& c) { return json(c.clustered.seed); }},
    LUKA_KEY_BOOL("zero_v", clustered.zero_v),
    LUKA_KEY_ENUM("bias", clustered.bias, kBiases),
    LUKA_KEY_ENUM("bias_entropy", clustered.bias_entropy, kBiasEntropies),
    LUKA_KEY_ENUM("rule", clustered.rule, kRules),
    LUKA_KEY_DOUBLE("epsilon", clustered.epsilon),
    LUKA_KEY_INT("top_k", clustered.top_k),
    LUKA_KEY_DOUBLE("top_frac", clustered.top_frac),
    LUKA_KEY_DOUBLE("top_p", clustered.top_p),
    LUKA_KEY_INT("always_refine_first", clustered.always_refine_first),
    LUKA_KEY_ENUM("refine_selection", clustered.selection, kSelections),
    LUKA_KEY_ENUM("refine_math", clustered.math, kMaths),
    LUKA_KEY_ENUM("refine_on", clustered.refine_on, kRefineOns),
    LUKA_KEY_ENUM("page_rank", clustered.page_rank, kPageRanks),
    LUKA_KEY_INT("kascade_source", kascade.source),
    {"kascade_head_map",
     [](LayerConfig& c, const std::string& k, const std::string& v) { c.kascade.head_map = parse_head_map(k, v); },
     [](const LayerConfig& c) { return json(head_map_text(c.kascade.head_map)); }},
    LUKA_KEY_INT("kascade_top_k", kascade.top_k),
    LUKA_KEY_DOUBLE("kascade_top_frac", kascade.top_frac),
    LUKA_KEY_INT("kascade_min_k", kascade.min_k),
    LUKA_KEY_BOOL("kascade_shared", kascade.shared),
    LUKA_KEY_ENUM("kascade_prefill", kascade.prefill, kKascadePrefills),
    LUKA_KEY_INT("kascade_tile", kascade.tile),
    LUKA_KEY_INT("dar_window", dar.window),
    LUKA_KEY_INT("dar_rank", dar.rank),
    {"dar_basis", [](LayerConfig& c, const std::string&, const std::string& v) { c.dar.basis = v; },
     [](const LayerConfig& c) { return json(c.dar.basis); }},
    LUKA_KEY_ENUM("dar_keys", dar.keys, kDarKeys),
    LUKA_KEY_INT("dar_sink", dar.sink),
    LUKA_KEY_ENUM("press_method", press.method, kPressMethods),
    LUKA_KEY_ENUM("press_allocation", press.allocation, kPressAllocations),
    LUKA_KEY_DOUBLE("compression_ratio", press.compression_ratio),
    LUKA_KEY_INT("budget_tokens", press.budget_tokens),
    LUKA_KEY_INT("press_sink", press.n_sink),
    LUKA_KEY_INT("press_window", press.window_size),
    LUKA_KEY_INT("press_kernel", press.kernel_size),
    LUKA_KEY_INT("press_future_positions", press.n_future_positions),
    LUKA_KEY_BOOL("press_covariance", press.use_covariance),
    LUKA_KEY_BOOL("press_vnorm", press.use_vnorm),
    LUKA_KEY_DOUBLE("press_epsilon", press.epsilon),
    LUKA_KEY_INT("press_seed", press.seed),
    LUKA_KEY_INT("press_beta", press.beta),
    LUKA_KEY_DOUBLE("press_alpha", press.alpha_safeguard),
    LUKA_KEY_INT("press_interval", press.interval),
    LUKA_KEY_INT("press_target_size", press.target_size),
    LUKA_KEY_INT("quest_page_size", quest.page_size),
    LUKA_KEY_INT("quest_pages", quest.pages),
    LUKA_KEY_INT("quest_window", quest.window),
};

#undef LUKA_KEY_INT
#undef LUKA_KEY_DOUBLE
#undef LUKA_KEY_BOOL
#undef LUKA_KEY_ENUM

void set_key(LayerConfig& c, const std::string& key, const std::string& v) {
  for (const Key& k : kKeys)
    if (key == k.name) return k.set(c, key, v);
  fail("luka config", "unknown key '" + key + "' (expected " + layer_config_keys() + ")");
}

std::string json_value_text(const json& v, const std::string& key, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number()) {
    std::ostringstream s;
    s.precision(17);
    s << v.get<double>();
    return s.str();
  }
  fail(where, "value of '" + key + "' must be a string, number or boolean");
}

}  // namespace

const char* to_string(AttentionMode m) { return name_of(m, kModes); }
const char* to_string(Selection s) { return name_of(s, kSelections); }
const char* to_string(Compressor c) { return name_of(c, kCompressors); }
const char* to_string(SummaryBias b) { return name_of(b, kBiases); }
const char* to_string(RefineRule r) { return name_of(r, kRules); }
const char* to_string(RefineMath m) { return name_of(m, kMaths); }
const char* to_string(ImportanceSource s) { return name_of(s, kImportanceSources); }
const char* to_string(BudgetRounding r) { return name_of(r, kRoundings); }
const char* to_string(PrefillWindow w) { return name_of(w, kPrefillWindows); }
const char* to_string(PageSchedule s) { return name_of(s, kSchedules); }
const char* to_string(BiasEntropy b) { return name_of(b, kBiasEntropies); }
const char* to_string(RefineOn r) { return name_of(r, kRefineOns); }
const char* to_string(PageRank r) { return name_of(r, kPageRanks); }
const char* to_string(KascadePrefill p) { return name_of(p, kKascadePrefills); }
const char* to_string(DarKeys k) { return name_of(k, kDarKeys); }
const char* to_string(Segmenter s) { return name_of(s, kSegmenters); }
const char* to_string(DelimiterMatch m) { return name_of(m, kDelimiterMatches); }
const char* to_string(PressMethod m) { return name_of(m, kPressMethods); }
const char* to_string(PressAllocation a) { return name_of(a, kPressAllocations); }

// [SECTION] describing and validating a config

std::string describe_modes(const LukaConfig& config) {
  std::string out;
  for (const auto& [name, mode] : kModes) {
    std::vector<std::int64_t> of_mode;
    for (std::size_t i = 0; i < config.layers.size(); ++i)
      if (config.layers[i].mode == mode) of_mode.push_back(static_cast<std::int64_t>(i));
    // '|' between ranges: ", " separates the modes.
    if (!of_mode.empty()) out += (out.empty() ? "" : ", ") + std::string(name) + " " + format_layer_range(of_mode, '|');
  }
  return out;
}

std::vector<std::string> layer_config_key_names() {
  std::vector<std::string> out;
  for (const Key& k : kKeys) out.emplace_back(k.name);
  return out;
}

std::string layer_config_keys() {
  std::string out;
  for (const Key& k : kKeys) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

void validate(const LayerConfig& c, std::int64_t layer) {
  const std::string where = "luka config: layer " + std::to_string(layer);
  const LinedConfig& l = c.lined;
  const ClusteredConfig& k = c.clustered;
  if (l.window < 0) fail(where, "window must be >= 0");
  if (!(l.window_frac >= 0 && l.window_frac <= 1)) fail(where, "window_frac must be in [0, 1]");
  if (!(l.rho > 0 && l.rho <= 1)) fail(where, "rho must be in (0, 1], got " + std::to_string(l.rho));
  if (!(l.decay > 0 && l.decay <= 1)) fail(where, "decay must be in (0, 1]");
  if (k.page_size <= 0) fail(where, "page_size must be positive, got " + std::to_string(k.page_size));
  if (k.tail < 0) fail(where, "tail must be >= 0");
  if (k.interval <= 0) fail(where, "interval must be positive, got " + std::to_string(k.interval));
  if (!(k.tau > 0)) fail(where, "tau must be positive");
  if (!(k.epsilon >= 0 && k.epsilon <= 1)) fail(where, "epsilon must be in [0, 1]");
  if (k.top_k < 0) fail(where, "top_k must be >= 0");
  if (!(k.top_frac >= 0 && k.top_frac <= 1)) fail(where, "top_frac must be in [0, 1], got " + std::to_string(k.top_frac));
  if (!(k.top_p > 0 && k.top_p <= 1)) fail(where, "top_p must be in (0, 1], got " + std::to_string(k.top_p));
  if (k.always_refine_first < 0) fail(where, "always_refine_first must be >= 0");
  if (k.page_counter_start < 0) fail(where, "page_counter_start must be >= 0");
  if (k.max_pages < 0) fail(where, "max_pages must be >= 0 (0: no limit)");
  if (!(k.gsc_tau >= -1 && k.gsc_tau <= 1)) fail(where, "gsc_tau must be in [-1, 1] (a cosine), got " + std::to_string(k.gsc_tau));
  if (k.segmenter == Segmenter::kDelimiter && k.delimiters.empty()) fail(where, "segmenter=delimiter needs at least one delimiter");
  if (k.schedule == PageSchedule::kAuthors && k.tail < 1)
    fail(where, "page_schedule=authors needs tail >= 1 (their tail_len is tail - 1)");
  const KascadeConfig& a = c.kascade;
  if (a.source < -1) fail(where, "kascade_source must be -1 (an anchor) or an earlier layer");
  if (a.source >= layer) fail(where, "kascade_source must name an earlier layer, got " + std::to_string(a.source));
  if (a.top_k < 1) fail(where, "kascade_top_k must be >= 1");
  if (!(a.top_frac >= 0 && a.top_frac <= 1)) fail(where, "kascade_top_frac must be in [0, 1]");
  if (a.min_k < 0) fail(where, "kascade_min_k must be >= 0");
  if (a.tile < 1) fail(where, "kascade_tile must be >= 1");
  const DarConfig& d = c.dar;
  if (d.window < 0) fail(where, "dar_window must be >= 0 (0: off)");
  if (d.rank < 0) fail(where, "dar_rank must be >= 0 (0: a quarter of the head dimension)");
  if (d.sink < 0) fail(where, "dar_sink must be >= 0");
  if (d.window > 0 && d.basis.empty()) fail(where, "dar_window needs dar_basis, the file luka calibrate --dar writes");
  if (d.window > 0 && c.mode == AttentionMode::kKascade) fail(where, "dar applies to dense, lined and clustered layers, not kascade");
  const PressConfig& p = c.press;
  if (!(p.compression_ratio >= 0 && p.compression_ratio < 1))
    fail(where, "compression_ratio must be in [0, 1), got " + std::to_string(p.compression_ratio));
  if (p.budget_tokens < 0) fail(where, "budget_tokens must be >= 0 (0: use compression_ratio)");
  if (p.n_sink < 0) fail(where, "press_sink must be >= 0");
  if (p.window_size < 1) fail(where, "press_window must be >= 1");
  if (p.kernel_size < 1 || p.kernel_size % 2 == 0) fail(where, "press_kernel must be odd and positive");
  if (p.n_future_positions < 1) fail(where, "press_future_positions must be >= 1");
  if (p.beta < 1) fail(where, "press_beta must be >= 1");
  if (!(p.alpha_safeguard >= 0 && p.alpha_safeguard <= 1)) fail(where, "press_alpha must be in [0, 1]");
  if (p.interval < 0) fail(where, "press_interval must be >= 0 (0: no compression during decoding)");
  if (p.target_size < 1) fail(where, "press_target_size must be >= 1");
  if (p.interval > 0 && p.allocation != PressAllocation::kUniform)
    fail(where, "press_interval (compression during decoding) needs press_allocation=uniform");
  if (d.window > 0 && (c.mode == AttentionMode::kPress || c.mode == AttentionMode::kQuest))
    fail(where, std::string("dar applies to dense, lined and clustered layers, not ") + to_string(c.mode));
  const QuestConfig& q = c.quest;
  if (q.page_size < 1) fail(where, "quest_page_size must be >= 1");
  if (q.pages < 0) fail(where, "quest_pages must be >= 0");
  if (q.window < 1) fail(where, "quest_window must be >= 1 (the decoding token attends to itself)");
}

void validate_kascade_sources(const LukaConfig& config) {
  for (std::size_t i = 0; i < config.layers.size(); ++i) {
    const LayerConfig& c = config.layers[i];
    if (c.mode != AttentionMode::kKascade || c.kascade.source < 0) continue;
    const auto s = static_cast<std::size_t>(c.kascade.source);
    if (s >= i || config.layers[s].mode != AttentionMode::kKascade || config.layers[s].kascade.source >= 0)
      fail("luka config: layer " + std::to_string(i),
           "kascade_source " + std::to_string(s) + " is not a Kascade anchor (mode=kascade with kascade_source=-1)");
  }
}

// [SECTION] layer lists and overrides

std::vector<std::int64_t> LukaConfig::parse_layers(const std::string& spec) const {
  return parse_layer_range(spec, static_cast<std::int64_t>(layers.size()), "luka config");
}

void LukaConfig::set(const std::vector<std::int64_t>& which, const std::string& key, const std::string& value) {
  for (const std::int64_t i : which) {
    LayerConfig& c = layers.at(static_cast<std::size_t>(i));
    set_key(c, key, value);
    validate(c, i);
  }
}

void LukaConfig::apply_override(const std::string& spec) {
  // Pairs separated by ',' or ':'; "layer"/"layers" picks the layers (default all). A layer list
  // may use ',' too (core/util/layer_range.h): after layers=, an item without '=' that follows a
  // ',' is more of the list ("layers=0-3,8,mode=lined").
  std::vector<std::pair<std::string, std::string>> pairs;
  std::string which = "all";
  std::vector<std::pair<char, std::string>> items;  // (the separator before it, the item)
  char before = ',';
  std::string cur;
  for (char ch : spec) {
    if (ch == ',' || ch == ':') {
      items.emplace_back(before, cur);
      before = ch;
      cur.clear();
    } else {
      cur += ch;
    }
  }
  items.emplace_back(before, cur);
  bool in_layers = false;
  for (const auto& [sep, it] : items) {
    if (it.empty()) {
      in_layers = false;
      continue;
    }
    const std::size_t eq = it.find('=');
    if (eq == std::string::npos && in_layers && sep == ',') {
      which += "," + it;
      continue;
    }
    in_layers = false;
    if (eq == std::string::npos || eq == 0) fail("luka config", "expected key=value in '" + spec + "', got '" + it + "'");
    const std::string key = it.substr(0, eq), value = it.substr(eq + 1);
    if (key == "layer" || key == "layers") {
      which = value;
      in_layers = true;
    } else {
      pairs.emplace_back(key, value);
    }
  }
  // All or nothing: a bad pair leaves the config as it was.
  const auto idx = parse_layers(which);
  // Checked once every pair is set: some keys only make sense together (dar_window, dar_basis).
  LukaConfig next = *this;
  for (const auto& [key, value] : pairs)
    for (const std::int64_t i : idx) set_key(next.layers.at(static_cast<std::size_t>(i)), key, value);
  for (const std::int64_t i : idx) validate(next.layers.at(static_cast<std::size_t>(i)), i);
  validate_kascade_sources(next);
  *this = std::move(next);
}

// [SECTION] presets

LukaConfig LukaConfig::preset(const std::string& name, std::int64_t num_layers) {
  if (num_layers <= 0) fail("luka config", "the model has no layers");
  LukaConfig c;
  c.layers.assign(static_cast<std::size_t>(num_layers), LayerConfig{});
  const auto mixed = [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t i = 0; i < num_layers; ++i)
      c.layers[static_cast<std::size_t>(i)].mode =
          (i < first || i >= num_layers - last) ? AttentionMode::kLined : AttentionMode::kClustered;
  };
  if (name == "dense") return c;
  if (name.rfind("auto:", 0) == 0) return auto_config(parse_auto_spec(name.substr(5)), num_layers);
  if (name == "lined" || name == "clustered") {
    for (auto& l : c.layers) l.mode = name == "lined" ? AttentionMode::kLined : AttentionMode::kClustered;
    return c;
  }
  if (name.rfind("mixed(", 0) == 0 && name.back() == ')') {
    const std::string inner = name.substr(6, name.size() - 7);
    const std::size_t comma = inner.find(',');
    if (comma == std::string::npos) fail("luka config", "preset '" + name + "': expected mixed(a,b)");
    const std::int64_t a = parse_int("mixed a", inner.substr(0, comma)), b = parse_int("mixed b", inner.substr(comma + 1));
    if (a < 0 || b < 0 || a + b > num_layers)
      fail("luka config", "preset '" + name + "': a and b must be >= 0 with a + b <= " + std::to_string(num_layers));
    mixed(a, b);
    return c;
  }
  if (name == "paper") {
    // The settings the paper states: pages of 16, attention-weighted compressor (tau 1, no bias),
    // top_k 3 with the paper's mass-preserving refinement, lined with rho 1/8 and W 128, raw tail
    // 128; first 8 and last 8 layers lined. Pinned here, not taken from the defaults.
    for (auto& l : c.layers) {
      l.clustered.page_size = 16;
      l.clustered.compressor = Compressor::kAttentionWeighted;
      l.clustered.tau = 1;
      l.clustered.bias = SummaryBias::kNone;
      l.clustered.math = RefineMath::kMassPreserving;  // the paper's Eq. 2-3
      l.clustered.rule = RefineRule::kTopK;
      l.clustered.top_k = 3;
      l.clustered.tail = 128;
      l.lined.rho = 0.125;
      l.lined.window = 128;
    }
    mixed(std::min<std::int64_t>(8, num_layers), std::min<std::int64_t>(8, std::max<std::int64_t>(0, num_layers - 8)));
    return c;
  }
  if (name == "authors_eval") {
    // What the authors' evaluation code ran (their LuKAQwenModel with run_all_evals.sh; docs/design.md
    // §5.6, docs/luka-config.md): pages of 8 with tail_len 128 (our tail 129) and at most 256 made
    // at once under their controller's gate (every forward, a large cover skipping the gates),
    // attention-weighted summaries at tau 7 with the adaptive bias from the entropy of
    // softmax(importance) averaged over KV heads, importance from the cover softmax at raw slots,
    // exact refinement of the top 3 pages selected per layer on the unbiased softmax; lined with
    // one shared selection of max(1, floor(0.1 T)) heavy hitters picked after the previous step
    // and the same recent window, the fixed-window sparse prefill; layers 0-5 and the last 5 lined.
    for (auto& l : c.layers) {
      l.importance_source = ImportanceSource::kCover;
      ClusteredConfig& k = l.clustered;
      k.page_size = 8;
      k.tail = 129;
      k.interval = 1;
      k.schedule = PageSchedule::kAuthors;
      k.page_counter_start = 0;  // their reset() primes it to interval - 1
      k.page_bypass = true;
      k.max_pages = 256;
      k.compressor = Compressor::kAttentionWeighted;
      k.tau = 7;
      k.bias = SummaryBias::kAdaptive;
      k.bias_entropy = BiasEntropy::kImportanceMean;
      k.rule = RefineRule::kTopK;
      k.top_k = 3;
      k.math = RefineMath::kExact;
      k.selection = Selection::kPerLayer;
      k.refine_on = RefineOn::kUnbiased;
      k.page_rank = PageRank::kSum;
      LinedConfig& n = l.lined;
      n.selection = Selection::kPerLayer;
      n.rho = 0.1;
      n.window_frac = 0.1;
      n.rounding = BudgetRounding::kFloor;
      n.heavy_late = true;
      n.sparse_prefill = true;
      n.sparse_prefill_window = PrefillWindow::kFixed;
    }
    const std::int64_t first = std::min<std::int64_t>(6, num_layers);
    mixed(first, std::min<std::int64_t>(5, num_layers - first));
    return c;
  }
  if (name == "kascade") {
    // The paper's Qwen3-8B anchors (0, 2, 7, 14, 23 of 36 layers) at the same relative depths,
    // identity head maps, top-k 10% with a minimum of 128, the rolling top-k prefill over tiles
    // of 128. `luka calibrate --kascade` chooses a model's own anchors and head maps.
    std::vector<std::int64_t> anchors;
    for (const std::int64_t a : {0, 2, 7, 14, 23}) {
      const auto l = static_cast<std::int64_t>(std::lround(static_cast<double>(a) * static_cast<double>(num_layers) / 36.0));
      if (l < num_layers && (anchors.empty() || l > anchors.back())) anchors.push_back(l);
    }
    std::int64_t source = 0;
    for (std::int64_t i = 0; i < num_layers; ++i) {
      LayerConfig& l = c.layers[static_cast<std::size_t>(i)];
      l.mode = AttentionMode::kKascade;
      const bool anchor = std::find(anchors.begin(), anchors.end(), i) != anchors.end();
      if (anchor) source = i;
      l.kascade.source = anchor ? -1 : source;
    }
    return c;
  }
  if (name == "semanticache") {
    // SemantiCache (docs/papers/semanticache.md) in the clustered core: delimiter chunks with the delimiters
    // raw, GSC clusters at tau 0.7 merged by the mean, proportional attention (bias log |S|) and
    // no refinement, as the paper runs it; the recent tail of 128 raw, pages made every 16 steps.
    for (auto& l : c.layers) {
      l.mode = AttentionMode::kClustered;
      ClusteredConfig& k = l.clustered;
      k.segmenter = Segmenter::kDelimiter;
      k.compressor = Compressor::kGsc;
      k.gsc_tau = 0.7;
      k.bias = SummaryBias::kFixed;
      k.math = RefineMath::kExact;
      k.rule = RefineRule::kTopK;
      k.top_k = 0;
      k.tail = 128;
    }
    return c;
  }
  // Quest as its paper runs it: every layer but the first two (which it leaves dense).
  if (name == "quest") {
    for (std::size_t l = 2; l < c.layers.size(); ++l) c.layers[l].mode = AttentionMode::kQuest;
    return c;
  }
  // Compression during decoding only, at kvpress's DecodingPress defaults (every 512 steps to
  // 2,048 per KV head) with Knorm, which needs no queries; tova_decoding is TOVA's own policy,
  // one eviction a step once the cache holds 2,048.
  if (name == "decoding" || name == "tova_decoding") {
    for (auto& l : c.layers) {
      l.mode = AttentionMode::kPress;
      l.press.compression_ratio = 0;
      l.press.method = name == "decoding" ? PressMethod::kKnorm : PressMethod::kTova;
      l.press.interval = name == "decoding" ? 512 : 1;
    }
    return c;
  }
  // kvpress's presses at its defaults on every layer: a scorer's name, or pyramidkv (SnapKV with
  // pyramid layer budgets, as kvpress's PyramidKVPress) and adakv (AdaKV over SnapKV).
  const bool pyramid = name == "pyramidkv", adakv = name == "adakv";
  for (const auto& [method_name, method] : kPressMethods)
    if (name == method_name || pyramid || adakv) {
      for (auto& l : c.layers) {
        l.mode = AttentionMode::kPress;
        l.press.method = pyramid || adakv ? PressMethod::kSnapKv : method;
        l.press.allocation = pyramid ? PressAllocation::kPyramid : adakv ? PressAllocation::kAdaKv : PressAllocation::kUniform;
      }
      return c;
    }
  fail("luka config", "unknown preset '" + name + "' (expected dense, lined, clustered, mixed(a,b), paper, authors_eval, kascade, semanticache, "
       "streaming_llm, snapkv, tova, knorm, expected_attention, random, pyramidkv, adakv, decoding, tova_decoding, "
       "quest, "
       "auto:FILE[,budget=B][,loss=output|kl])");
}

// [SECTION] JSON files

LukaConfig LukaConfig::from_json(const std::string& text, std::int64_t num_layers, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(where, std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) fail(where, "expected a JSON object");
  for (const auto& [key, value] : j.items())
    if (key != "preset" && key != "default" && key != "layers")
      fail(where, "unknown top-level key '" + key + "' (expected preset, default, layers)");
  const std::string preset_name = j.contains("preset") && j["preset"].is_string() ? j["preset"].get<std::string>() : "dense";
  LukaConfig c = preset(preset_name, num_layers);
  const auto apply_object = [&](const json& obj, const std::vector<std::int64_t>& which, const std::string& what) {
    if (!obj.is_object()) fail(where, what + " must be an object of key: value");
    for (const auto& [key, value] : obj.items())
      for (const std::int64_t i : which) set_key(c.layers.at(static_cast<std::size_t>(i)), key, json_value_text(value, key, where));
    for (const std::int64_t i : which) validate(c.layers.at(static_cast<std::size_t>(i)), i);  // once the object's keys are set
  };
  if (j.contains("default")) apply_object(j["default"], c.parse_layers("all"), "'default'");
  if (j.contains("layers")) {
    if (!j["layers"].is_object()) fail(where, "'layers' must map layer ranges (\"0-7\", \"12\", \"all\") to objects");
    // JSON objects have no order (this reader sorts the ranges by name), so two ranges that cover
    // one layer must agree on every key both set there; what they share belongs in "default".
    std::map<std::pair<std::int64_t, std::string>, std::pair<std::string, json>> set_by;  // (layer, key) -> (range, value)
    for (const auto& [range, obj] : j["layers"].items()) {
      const std::vector<std::int64_t> which =
          parse_layer_range(range, static_cast<std::int64_t>(c.layers.size()), where + ": 'layers'");
      apply_object(obj, which, "layers '" + range + "'");
      for (const auto& [key, value] : obj.items()) {
        for (const std::int64_t i : which) {
          // The value as the layer holds it: "1/8" and 0.125 agree.
          LayerConfig probe;
          set_key(probe, key, json_value_text(value, key, where));
          json held;
          for (const Key& k : kKeys)
            if (key == k.name) held = k.get(probe);
          const auto [it, fresh] = set_by.emplace(std::make_pair(i, key), std::make_pair(range, held));
          if (!fresh && it->second.second != held)
            fail(where, "'layers': ranges '" + it->second.first + "' and '" + range + "' both cover layer " + std::to_string(i) +
                            " and set " + key + " to " + it->second.second.dump() + " and " + held.dump() +
                            " (overlapping ranges must agree; put a setting for several layers in \"default\" or in one range)");
        }
      }
    }
  }
  try {
    validate_kascade_sources(c);
  } catch (const Error& e) {
    fail(where, e.what());
  }
  return c;
}

LukaConfig LukaConfig::from_json_file(const std::string& path, std::int64_t num_layers) {
  const std::string text = read_text_file(path, "layers-config file");
  try {
    return from_json(text, num_layers, path);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind(path, 0) == 0) throw;
    fail(path, what);
  }
}

std::string LukaConfig::to_json() const {
  // The layers-config file format (from_json reads it back): every layer with every key, under
  // the same names as --set.
  json layers_json = json::object();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    json layer = json::object();
    for (const Key& k : kKeys) layer[k.name] = k.get(layers[i]);
    layers_json[std::to_string(i)] = std::move(layer);
  }
  return json({{"layers", layers_json}}).dump(2);
}

}  // namespace luka
