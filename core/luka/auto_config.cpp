#include "core/luka/auto_config.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka {

std::vector<int> choose_layer_options(const std::vector<std::vector<LayerOption>>& options, std::int64_t budget) {
  const std::size_t L = options.size();
  if (L == 0) return {};
  std::int64_t least = 0;
  for (std::size_t l = 0; l < L; ++l) {
    if (options[l].empty()) fail("auto config", "layer " + std::to_string(l) + " has no options");
    std::int64_t m = std::numeric_limits<std::int64_t>::max();
    for (const LayerOption& o : options[l]) {
      if (o.cost < 0) fail("auto config", "a negative cost");
      m = std::min(m, o.cost);
    }
    least += m;
  }
  if (least > budget)
    fail("auto config", "the budget of " + std::to_string(budget) + " entries per step is below the cheapest choice (" +
                            std::to_string(least) + ")");
  // best[l][b]: the least loss of layers [0, l] with total cost exactly b; pick[l][b] the option.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const std::size_t B = static_cast<std::size_t>(budget) + 1;
  std::vector<double> best(B, kInf), next(B);
  std::vector<std::vector<int>> pick(L, std::vector<int>(B, -1));
  best[0] = 0;
  for (std::size_t l = 0; l < L; ++l) {
    std::fill(next.begin(), next.end(), kInf);
    for (std::size_t b = 0; b < B; ++b) {
      if (best[b] == kInf) continue;
      for (std::size_t o = 0; o < options[l].size(); ++o) {
        const std::size_t c = b + static_cast<std::size_t>(options[l][o].cost);
        if (c >= B) continue;
        const double v = best[b] + options[l][o].loss;
        if (v < next[c]) {
          next[c] = v;
          pick[l][c] = static_cast<int>(o);
        }
      }
    }
    best.swap(next);
  }
  std::size_t at = 0;
  for (std::size_t b = 1; b < B; ++b)
    if (best[b] < best[at]) at = b;
  std::vector<int> choice(L);
  for (std::size_t l = L; l-- > 0;) {
    choice[l] = pick[l][at];
    at -= static_cast<std::size_t>(options[l][static_cast<std::size_t>(choice[l])].cost);
  }
  return choice;
}

AutoSpec parse_auto_spec(const std::string& spec) {
  AutoSpec s;
  // Options are taken from the end, so a file name may itself hold commas.
  std::string rest = spec;
  bool seen_budget = false, seen_loss = false;
  for (std::size_t comma = rest.rfind(','); comma != std::string::npos; comma = rest.rfind(',')) {
    const std::string option = rest.substr(comma + 1);
    if (option.rfind("budget=", 0) == 0 && !seen_budget) {
      const std::string b = option.substr(7);
      char* end = nullptr;
      s.budget = std::strtod(b.c_str(), &end);
      if (b.empty() || end != b.c_str() + b.size() || !(s.budget > 0 && s.budget <= 1))
        fail("luka config", "auto: budget must be a number in (0, 1], got '" + b + "'");
      seen_budget = true;
    } else if (option.rfind("loss=", 0) == 0 && !seen_loss) {
      const std::string l = option.substr(5);
      if (l == "kl") {
        s.loss = AutoLoss::kKl;
      } else if (l == "output") {
        s.loss = AutoLoss::kOutput;
      } else {
        fail("luka config", "auto: loss must be kl or output, got '" + l + "'");
      }
      seen_loss = true;
    } else {
      break;
    }
    rest.erase(comma);
  }
  s.file = rest;
  if (s.file.empty()) fail("luka config", "auto: needs a calibration file (auto:FILE[,budget=B][,loss=kl|output])");
  return s;
}

LukaConfig auto_config(const AutoSpec& spec, std::int64_t num_layers) {
  using nlohmann::json;
  const json cal = read_json_file(spec.file, "calibration file");
  const std::string where = spec.file;
  std::vector<std::vector<LayerOption>> options;
  std::vector<json> candidates;
  std::int64_t dense_total = 0;
  try {
    if (cal.at("num_layers").get<std::int64_t>() != num_layers)
      fail(where, "is a calibration of a " + std::to_string(cal.at("num_layers").get<std::int64_t>()) + "-layer model, this one has " +
                      std::to_string(num_layers));
    for (const json& c : cal.at("candidates")) candidates.push_back(c.at("config"));
    const json& layers = cal.at("layers");
    if (static_cast<std::int64_t>(layers.size()) != num_layers) fail(where, "has " + std::to_string(layers.size()) + " layers");
    // Entry counts are costs and losses are minimized: a negative or non-finite one would be chosen
    // for free (or not convert), so each is refused naming its layer, candidate and field.
    const auto count = [&](const json& at, const char* key, const std::string& field_name, double most) {
      const double v = at.at(key).get<double>();
      if (!std::isfinite(v) || v < 0 || v > most)
        fail(where, "calibration field '" + field_name + "' is " + at.at(key).dump() + ", not a count of entries (0 or more)");
      return v;
    };
    const char* loss = spec.loss == AutoLoss::kKl ? "kl" : "rel_l2";
    constexpr double kMostEntries = 0x1p52;  // exact in a double and far below int64's range
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const json& layer = layers[l];
      const std::string at = "layers[" + std::to_string(l) + "]";
      const double dense = count(layer, "dense_entries", at + ".dense_entries", kMostEntries);
      std::vector<LayerOption> o = {{static_cast<std::int64_t>(std::llround(dense)), 0.0}};  // dense: exact, every entry
      dense_total += o[0].cost;
      const json& per = layer.at("candidates");
      if (per.size() != candidates.size()) fail(where, "a layer's candidates do not match the candidate list");
      for (std::size_t k = 0; k < per.size(); ++k) {
        const std::string cat = at + ".candidates[" + std::to_string(k) + "].";
        const double entries = count(per[k], "entries", cat + "entries", kMostEntries);
        const double v = per[k].at(loss).get<double>();
        // (A computed KL may come out a rounding error below 0: only a non-finite loss is refused.)
        if (!std::isfinite(v)) fail(where, "calibration field '" + cat + loss + "' is " + per[k].at(loss).dump() + ", not a finite loss");
        o.push_back({static_cast<std::int64_t>(std::llround(entries)), v});
      }
      options.push_back(std::move(o));
    }
  } catch (const json::exception& e) {
    fail(where, std::string("not a calibration file from luka calibrate (") + e.what() + ")");
  }
  const std::int64_t budget = static_cast<std::int64_t>(std::floor(spec.budget * static_cast<double>(dense_total)));
  const std::vector<int> choice = choose_layer_options(options, budget);
  json layers = json::object();
  for (std::int64_t l = 0; l < num_layers; ++l) {
    const int c = choice[static_cast<std::size_t>(l)];
    layers[std::to_string(l)] = c == 0 ? json{{"mode", "dense"}} : candidates[static_cast<std::size_t>(c - 1)];
  }
  return LukaConfig::from_json(json{{"layers", layers}}.dump(), num_layers, where);
}

}  // namespace luka
