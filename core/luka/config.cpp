#include "core/luka/config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/util/error.h"

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

const std::pair<const char*, AttentionMode> kModes[] = {
    {"dense", AttentionMode::kDense}, {"lined", AttentionMode::kLined}, {"clustered", AttentionMode::kClustered}};
const std::pair<const char*, Selection> kSelections[] = {
    {"head", Selection::kPerHead}, {"group", Selection::kPerGroup}, {"layer", Selection::kPerLayer}};
const std::pair<const char*, Compressor> kCompressors[] = {{"mean", Compressor::kMean},
                                                           {"attention_weighted", Compressor::kAttentionWeighted},
                                                           {"random", Compressor::kRandom}};
const std::pair<const char*, SummaryBias> kBiases[] = {
    {"none", SummaryBias::kNone}, {"fixed", SummaryBias::kFixed}, {"adaptive", SummaryBias::kAdaptive}};
const std::pair<const char*, RefineRule> kRules[] = {{"threshold", RefineRule::kThreshold},
                                                     {"top_k", RefineRule::kTopK},
                                                     {"top_frac", RefineRule::kTopFrac},
                                                     {"top_p", RefineRule::kTopP}};
const std::pair<const char*, RefineMath> kMaths[] = {{"mass_preserving", RefineMath::kMassPreserving},
                                                     {"exact", RefineMath::kExact}};

template <typename E, std::size_t N>
const char* name_of(E e, const std::pair<const char*, E> (&names)[N]) {
  for (const auto& [name, v] : names)
    if (v == e) return name;
  return "?";
}

double parse_double(const std::string& key, const std::string& value) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  // Fractions like 1/8 are allowed.
  if (used != value.size()) {
    const std::size_t slash = value.find('/');
    if (slash != std::string::npos) return parse_double(key, value.substr(0, slash)) / parse_double(key, value.substr(slash + 1));
    fail("luka config", key + " must be a number, got '" + value + "'");
  }
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

bool parse_bool(const std::string& key, const std::string& value) {
  if (value == "true" || value == "1" || value == "on") return true;
  if (value == "false" || value == "0" || value == "off") return false;
  fail("luka config", key + " must be true or false, got '" + value + "'");
}

void set_key(LayerConfig& c, const std::string& key, const std::string& v) {
  LinedConfig& l = c.lined;
  ClusteredConfig& k = c.clustered;
  if (key == "mode") c.mode = parse_enum(v, key, kModes);
  else if (key == "dense_shadow") c.dense_shadow = parse_bool(key, v);
  else if (key == "window") l.window = parse_int(key, v);
  else if (key == "window_frac") l.window_frac = parse_double(key, v);
  else if (key == "rho") l.rho = parse_double(key, v);
  else if (key == "lined_selection") l.selection = parse_enum(v, key, kSelections);
  else if (key == "decay") l.decay = parse_double(key, v);
  else if (key == "sparse_prefill") l.sparse_prefill = parse_bool(key, v);
  else if (key == "page_size") k.page_size = parse_int(key, v);
  else if (key == "tail") k.tail = parse_int(key, v);
  else if (key == "interval") k.interval = parse_int(key, v);
  else if (key == "compressor") k.compressor = parse_enum(v, key, kCompressors);
  else if (key == "tau") k.tau = parse_double(key, v);
  else if (key == "seed") k.seed = static_cast<std::uint64_t>(parse_int(key, v));
  else if (key == "zero_v") k.zero_v = parse_bool(key, v);
  else if (key == "bias") k.bias = parse_enum(v, key, kBiases);
  else if (key == "rule") k.rule = parse_enum(v, key, kRules);
  else if (key == "epsilon") k.epsilon = parse_double(key, v);
  else if (key == "top_k") k.top_k = parse_int(key, v);
  else if (key == "top_frac") k.top_frac = parse_double(key, v);
  else if (key == "top_p") k.top_p = parse_double(key, v);
  else if (key == "always_refine_first") k.always_refine_first = parse_int(key, v);
  else if (key == "refine_selection") k.selection = parse_enum(v, key, kSelections);
  else if (key == "refine_math") k.math = parse_enum(v, key, kMaths);
  else
    fail("luka config", "unknown key '" + key +
                            "' (expected mode, dense_shadow, window, window_frac, rho, lined_selection, decay, "
                            "sparse_prefill, page_size, tail, interval, compressor, tau, seed, zero_v, bias, rule, "
                            "epsilon, top_k, top_frac, top_p, always_refine_first, refine_selection, refine_math)");
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

void validate(const LayerConfig& c, std::int64_t layer) {
  const std::string where = "luka config: layer " + std::to_string(layer);
  const LinedConfig& l = c.lined;
  const ClusteredConfig& k = c.clustered;
  if (l.window < 0) fail(where, "window must be >= 0");
  if (l.window_frac < 0 || l.window_frac > 1) fail(where, "window_frac must be in [0, 1]");
  if (!(l.rho > 0 && l.rho <= 1)) fail(where, "rho must be in (0, 1], got " + std::to_string(l.rho));
  if (!(l.decay > 0 && l.decay <= 1)) fail(where, "decay must be in (0, 1]");
  if (k.page_size <= 0) fail(where, "page_size must be positive, got " + std::to_string(k.page_size));
  if (k.tail < 0) fail(where, "tail must be >= 0");
  if (k.interval <= 0) fail(where, "interval must be positive, got " + std::to_string(k.interval));
  if (!(k.tau > 0)) fail(where, "tau must be positive");
  if (!(k.epsilon >= 0 && k.epsilon <= 1)) fail(where, "epsilon must be in [0, 1]");
  if (k.top_k < 0) fail(where, "top_k must be >= 0");
  if (!(k.top_frac > 0 && k.top_frac <= 1)) fail(where, "top_frac must be in (0, 1], got " + std::to_string(k.top_frac));
  if (!(k.top_p > 0 && k.top_p <= 1)) fail(where, "top_p must be in (0, 1], got " + std::to_string(k.top_p));
  if (k.always_refine_first < 0) fail(where, "always_refine_first must be >= 0");
}

std::vector<std::int64_t> LukaConfig::parse_layers(const std::string& spec) const {
  const std::int64_t n = static_cast<std::int64_t>(layers.size());
  std::vector<std::int64_t> out;
  if (spec == "all") {
    for (std::int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  std::stringstream parts(spec);
  std::string part;
  while (std::getline(parts, part, '|')) {
    const std::size_t dash = part.find('-', 1);
    std::int64_t a, b;
    if (dash == std::string::npos) {
      a = b = parse_int("layer", part);
    } else {
      a = parse_int("layer", part.substr(0, dash));
      b = parse_int("layer", part.substr(dash + 1));
    }
    if (a < 0 || b >= n || a > b)
      fail("luka config", "layer range '" + part + "' is out of range [0, " + std::to_string(n) + ")");
    for (std::int64_t i = a; i <= b; ++i) out.push_back(i);
  }
  if (out.empty()) fail("luka config", "empty layer list '" + spec + "'");
  return out;
}

void LukaConfig::set(const std::vector<std::int64_t>& which, const std::string& key, const std::string& value) {
  for (const std::int64_t i : which) {
    LayerConfig& c = layers.at(static_cast<std::size_t>(i));
    set_key(c, key, value);
    validate(c, i);
  }
}

void LukaConfig::apply_override(const std::string& spec) {
  // Pairs separated by ',' or ':'; "layer"/"layers" picks the layers (default all).
  std::vector<std::pair<std::string, std::string>> pairs;
  std::string which = "all";
  std::vector<std::string> items;
  std::string cur;
  for (char ch : spec) {
    if (ch == ',' || ch == ':') {
      items.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  items.push_back(cur);
  for (const std::string& it : items) {
    if (it.empty()) continue;
    const std::size_t eq = it.find('=');
    if (eq == std::string::npos || eq == 0) fail("luka config", "expected key=value in '" + spec + "', got '" + it + "'");
    const std::string key = it.substr(0, eq), value = it.substr(eq + 1);
    if (key == "layer" || key == "layers") {
      which = value;
    } else {
      pairs.emplace_back(key, value);
    }
  }
  const auto idx = parse_layers(which);
  for (const auto& [key, value] : pairs) set(idx, key, value);
}

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
    // The settings the paper states: pages of 16, attention-weighted compressor, top_k 3, lined
    // with rho 1/8 and W 128, raw tail 128; first 8 and last 8 layers lined.
    for (auto& l : c.layers) {
      l.clustered.page_size = 16;
      l.clustered.compressor = Compressor::kAttentionWeighted;
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
    // What the authors' evaluation code ran: pages of 8, tail 128, tau 7, adaptive bias, exact
    // refinement selected per layer; lined with shared selection of 10% heavy hitters + 10%
    // recent window and sparse prefill; layers 0-5 and the last 5 lined.
    for (auto& l : c.layers) {
      l.clustered.page_size = 8;
      l.clustered.tail = 128;
      l.clustered.compressor = Compressor::kAttentionWeighted;
      l.clustered.tau = 7;
      l.clustered.bias = SummaryBias::kAdaptive;
      l.clustered.math = RefineMath::kExact;
      l.clustered.selection = Selection::kPerLayer;
      l.lined.selection = Selection::kPerLayer;
      l.lined.rho = 0.1;
      l.lined.window_frac = 0.1;
      l.lined.sparse_prefill = true;
    }
    const std::int64_t first = std::min<std::int64_t>(6, num_layers);
    mixed(first, std::min<std::int64_t>(5, num_layers - first));
    return c;
  }
  fail("luka config", "unknown preset '" + name + "' (expected dense, lined, clustered, mixed(a,b), paper, authors_eval)");
}

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
    for (const auto& [key, value] : obj.items()) c.set(which, key, json_value_text(value, key, where));
  };
  if (j.contains("default")) apply_object(j["default"], c.parse_layers("all"), "'default'");
  if (j.contains("layers")) {
    if (!j["layers"].is_object()) fail(where, "'layers' must map layer ranges (\"0-7\", \"12\", \"all\") to objects");
    for (const auto& [range, obj] : j["layers"].items()) apply_object(obj, c.parse_layers(range), "layers '" + range + "'");
  }
  return c;
}

LukaConfig LukaConfig::from_json_file(const std::string& path, std::int64_t num_layers) {
  std::ifstream in(path);
  if (!in) fail(path, "cannot open the layers config file");
  std::ostringstream s;
  s << in.rdbuf();
  try {
    return from_json(s.str(), num_layers, path);
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
    const LayerConfig& c = layers[i];
    const LinedConfig& l = c.lined;
    const ClusteredConfig& k = c.clustered;
    layers_json[std::to_string(i)] = {
        {"mode", to_string(c.mode)}, {"dense_shadow", c.dense_shadow},
        {"window", l.window}, {"window_frac", l.window_frac}, {"rho", l.rho}, {"lined_selection", to_string(l.selection)},
        {"decay", l.decay}, {"sparse_prefill", l.sparse_prefill},
        {"page_size", k.page_size}, {"tail", k.tail}, {"interval", k.interval}, {"compressor", to_string(k.compressor)},
        {"tau", k.tau}, {"seed", k.seed}, {"zero_v", k.zero_v}, {"bias", to_string(k.bias)}, {"rule", to_string(k.rule)},
        {"epsilon", k.epsilon}, {"top_k", k.top_k}, {"top_frac", k.top_frac}, {"top_p", k.top_p},
        {"always_refine_first", k.always_refine_first}, {"refine_selection", to_string(k.selection)},
        {"refine_math", to_string(k.math)}};
  }
  return json({{"layers", layers_json}}).dump(2);
}

}  // namespace luka
