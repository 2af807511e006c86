#include "core/eval/sweep.h"

#include <cstdlib>
#include <set>

#include "core/util/error.h"

namespace luka::eval {

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t next = text.find(sep, at);
    out.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + 1;
  }
  return out;
}

std::string trim(const std::string& s) {
  const std::size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

}  // namespace

std::vector<GridAxis> parse_grid(const std::string& text) {
  std::vector<GridAxis> axes;
  std::set<std::string> keys;
  for (const std::string& part : split(text, ';')) {
    const std::string axis = trim(part);
    if (axis.empty()) fail("grid", "empty axis in \"" + text + "\" (axes are separated by ';')");
    const std::size_t eq = axis.find('=');
    if (eq == std::string::npos) fail("grid", "\"" + axis + "\" needs key=value[,value...]");
    GridAxis a;
    a.key = trim(axis.substr(0, eq));
    if (a.key.empty()) fail("grid", "\"" + axis + "\" has no key");
    if (!keys.insert(a.key).second) fail("grid", "key " + a.key + " is given twice");
    // A preset's own commas (mixed(8,8)) stay inside its parentheses.
    std::string value;
    int depth = 0;
    for (const char c : axis.substr(eq + 1) + ",") {
      if (c == ',' && depth == 0) {
        value = trim(value);
        if (value.empty()) fail("grid", "key " + a.key + " has an empty value");
        a.values.push_back(value);
        value.clear();
        continue;
      }
      depth += c == '(' ? 1 : c == ')' ? -1 : 0;
      value += c;
    }
    std::set<std::string> seen;
    for (const std::string& v : a.values)
      if (!seen.insert(v).second) fail("grid", "key " + a.key + " lists " + v + " twice");
    axes.push_back(std::move(a));
  }
  return axes;
}

std::vector<Settings> expand_grid(const std::vector<GridAxis>& axes) {
  std::vector<Settings> out = {{}};
  for (const GridAxis& a : axes) {
    std::vector<Settings> next;
    for (const Settings& s : out)
      for (const std::string& v : a.values) {
        Settings t = s;
        t.emplace_back(a.key, v);
        next.push_back(std::move(t));
      }
    out = std::move(next);
  }
  return out;
}

std::string settings_label(const Settings& s) {
  std::string out;
  for (const auto& [k, v] : s) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

std::string file_names_only(const std::string& value) {
  std::string out;
  std::size_t start = 0;
  while (start <= value.size()) {
    std::size_t end = value.find_first_of(":,=", start);
    if (end == std::string::npos) end = value.size();
    const std::string part = value.substr(start, end - start);
    const std::size_t slash = part.find_last_of('/');
    out += slash == std::string::npos || slash + 1 == part.size() ? part : part.substr(slash + 1);
    if (end < value.size()) out += value[end];
    start = end + 1;
  }
  return out;
}

std::string settings_caption(const Settings& s) {
  std::string out;
  for (const auto& [k, v] : s) out += (out.empty() ? "" : ",") + k + "=" + file_names_only(v);
  return out;
}

std::string settings_set_spec(const Settings& s) {
  std::string out;
  for (const auto& [k, v] : s)
    if (k != "preset") out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

std::optional<std::string> settings_preset(const Settings& s) {
  for (const auto& [k, v] : s)
    if (k == "preset") return v;
  return std::nullopt;
}

Metric parse_metric(const std::string& name) {
  if (name == "perplexity") return Metric::kPerplexity;
  if (name == "eval") return Metric::kEval;
  fail("--metric", "'" + name + "' is not perplexity or eval");
}

const char* to_string(Metric m) { return m == Metric::kPerplexity ? "perplexity" : "eval"; }
const char* metric_label(Metric m) { return m == Metric::kPerplexity ? "perplexity" : "exact match (%)"; }

std::vector<std::string> item_arguments(Metric metric, const std::vector<std::string>& base_args, const Settings& point,
                                        const std::string& item_dir) {
  std::vector<std::string> args;
  if (metric == Metric::kPerplexity)
    args = {"perplexity"};
  else
    args = {"eval", "wikisalad"};
  args.insert(args.end(), base_args.begin(), base_args.end());
  const std::optional<std::string> preset = settings_preset(point);
  if (metric == Metric::kPerplexity) {
    if (preset) args.insert(args.end(), {"--preset", *preset});
    if (const std::string spec = settings_set_spec(point); !spec.empty()) args.insert(args.end(), {"--set", spec});
    args.push_back("--json");
  } else {
    args.insert(args.end(), {"--presets", preset.value_or("clustered")});
    if (const std::string spec = settings_set_spec(point); !spec.empty()) args.insert(args.end(), {"--set", spec});
    args.insert(args.end(), {"--out", item_dir, "--quiet"});
  }
  return args;
}

double metric_value(Metric metric, const nlohmann::json& output) {
  try {
    if (metric == Metric::kPerplexity) return output.at("perplexity").get<double>();
    const nlohmann::json& totals = output.at("table").at("totals");
    if (totals.size() != 1) throw Error("expected one preset in the summary, found " + std::to_string(totals.size()));
    return totals.begin().value().at("em").get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("the run's output has no ") + metric_label(metric) + " (" + e.what() + ")");
  }
}

std::string results_csv(const std::vector<GridAxis>& axes, Metric metric, const std::vector<SweepResult>& results) {
  const auto cell = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (const char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  std::string out = "item";
  for (const GridAxis& a : axes) out += "," + cell(a.key);
  out += std::string(",") + (metric == Metric::kPerplexity ? "perplexity" : "exact_match") + "\n";
  for (const SweepResult& r : results) {
    out += r.baseline ? "baseline" : std::to_string(r.index);
    for (const GridAxis& a : axes) {
      std::string v;
      for (const auto& [k, value] : r.settings)
        if (k == a.key) v = value;
      out += "," + cell(v);
    }
    char buf[40];
    std::snprintf(buf, sizeof buf, ",%.6g\n", r.value);
    out += buf;
  }
  return out;
}

std::string choose_x_axis(const std::vector<GridAxis>& axes, const std::string& x_key) {
  if (axes.empty()) fail("grid", "no axes");
  if (!x_key.empty()) {
    for (const GridAxis& a : axes)
      if (a.key == x_key) return x_key;
    fail("--x", x_key + " is not a grid key");
  }
  for (auto it = axes.rbegin(); it != axes.rend(); ++it) {
    bool numeric = it->values.size() > 1;
    for (const std::string& v : it->values) numeric = numeric && is_number(v);
    if (numeric) return it->key;
  }
  return axes.back().key;
}

}  // namespace luka::eval
