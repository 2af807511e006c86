#include "core/eval/niah_results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/eval/sweep.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka::eval {

using nlohmann::json;

json to_json(const LongContextRecord& r) {
  json j = {{"preset", r.preset}, {"task", r.task}, {"length", r.length}};
  if (r.depth >= 0) j["depth"] = r.depth;
  j.update({{"sample", r.sample},
            {"query", r.query},
            {"answers", r.answers},
            {"metric", r.metric},
            {"prediction", r.prediction},
            {"score", r.score},
            {"prompt_tokens", r.prompt_tokens},
            {"new_tokens", r.new_tokens},
            {"seconds", r.seconds}});
  return j;
}

LongContextRecord long_context_record_from_json(const json& j) {
  if (!j.is_object()) throw Error("expected a JSON object");
  const auto field = [&](const char* key) -> const json& {
    if (!j.contains(key)) throw Error(std::string("missing \"") + key + "\"");
    return j[key];
  };
  LongContextRecord r;
  try {
    r.preset = field("preset").get<std::string>();
    r.task = field("task").get<std::string>();
    r.length = field("length").get<std::int64_t>();
    r.depth = j.contains("depth") ? j["depth"].get<double>() : -1.0;
    r.sample = field("sample").get<int>();
    r.query = field("query").get<std::string>();
    r.answers = field("answers").get<std::vector<std::string>>();
    r.metric = field("metric").get<std::string>();
    r.prediction = field("prediction").get<std::string>();
    r.score = field("score").get<double>();
    r.prompt_tokens = field("prompt_tokens").get<std::int64_t>();
    r.new_tokens = field("new_tokens").get<std::int64_t>();
    r.seconds = field("seconds").get<double>();
  } catch (const json::exception& e) {
    throw Error(std::string("a field has the wrong type (") + e.what() + ")");
  }
  if (!(r.score >= 0 && r.score <= 1)) throw Error("\"score\" is outside [0, 1]");
  return r;
}

std::string record_key(const std::string& preset, const std::string& task, std::int64_t length, double depth,
                       int sample) {
  char d[32];
  std::snprintf(d, sizeof d, "%.6g", depth);
  return preset + "\n" + task + "\n" + std::to_string(length) + "\n" + d + "\n" + std::to_string(sample);
}

LongContextResults read_long_context_results(const std::filesystem::path& path) {
  LongContextResults out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  const std::string text = read_text_file(path, "results file");
  std::size_t line_no = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t eol = text.find('\n', at);
    if (eol == std::string::npos) break;  // cut off by a kill: left out
    ++line_no;
    try {
      out.records.push_back(long_context_record_from_json(json::parse(text.substr(at, eol - at))));
    } catch (const json::exception& e) {
      fail(path.string() + ":" + std::to_string(line_no), std::string("not a JSON line (") + e.what() + ")");
    } catch (const Error& e) {
      fail(path.string() + ":" + std::to_string(line_no), e.what());
    }
    at = eol + 1;
    out.valid_bytes = at;
  }
  return out;
}

std::string preset_label(const std::string& preset, const std::vector<std::string>& presets) {
  const std::string label = file_names_only(preset);
  const bool unique = std::none_of(presets.begin(), presets.end(),
                                   [&](const std::string& q) { return q != preset && file_names_only(q) == label; });
  return unique ? label : preset;
}

namespace {

std::string percent_text(const ScoreCell& c) {
  if (c.samples == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", c.percent());
  return buf;
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// Rows of cells as aligned columns, two spaces apart.
std::string align(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  std::ostringstream out;
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i) out << "  ";
      out << row[i];
      if (i + 1 < row.size()) out << std::string(width[i] - row[i].size(), ' ');
    }
    out << "\n";
  }
  return out.str();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

NiahTable tabulate_niah(const std::vector<LongContextRecord>& records, const std::vector<std::string>& presets,
                        const std::vector<std::int64_t>& lengths, const std::vector<double>& depths) {
  NiahTable t;
  t.presets = presets;
  t.lengths = lengths;
  t.depths = depths;
  std::sort(t.lengths.begin(), t.lengths.end());
  std::sort(t.depths.begin(), t.depths.end());
  for (const LongContextRecord& r : records) {
    if (std::find(presets.begin(), presets.end(), r.preset) == presets.end()) continue;
    if (std::find(lengths.begin(), lengths.end(), r.length) == lengths.end()) continue;
    if (std::find(depths.begin(), depths.end(), r.depth) == depths.end()) continue;
    for (ScoreCell* c : {&t.cells[{r.preset, r.length, r.depth}], &t.totals[r.preset]}) {
      ++c->samples;
      c->sum += r.score;
    }
  }
  return t;
}

std::string format_niah_table(const NiahTable& t) {
  std::string out;
  for (const std::string& p : t.presets) {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> head = {"depth %"};
    for (const std::int64_t l : t.lengths) head.push_back(std::to_string(l));
    rows.push_back(head);
    for (const double d : t.depths) {
      std::vector<std::string> row = {number_text(d)};
      for (const std::int64_t l : t.lengths) {
        const auto it = t.cells.find({p, l, d});
        row.push_back(it == t.cells.end() ? "-" : percent_text(it->second));
      }
      rows.push_back(row);
    }
    const auto total = t.totals.find(p);
    out += preset_label(p, t.presets) + ": " + (total == t.totals.end() ? "-" : percent_text(total->second)) +
           " overall (score %, length in tokens)\n";
    out += align(rows) + "\n";
  }
  return out;
}

json niah_table_json(const NiahTable& t) {
  json cells = json::array();
  for (const auto& [key, c] : t.cells)
    cells.push_back({{"preset", std::get<0>(key)},
                     {"length", std::get<1>(key)},
                     {"depth", std::get<2>(key)},
                     {"score", c.percent()},
                     {"samples", c.samples}});
  json totals = json::object();
  for (const auto& [p, c] : t.totals) totals[p] = {{"score", c.percent()}, {"samples", c.samples}};
  return {{"presets", t.presets}, {"lengths", t.lengths}, {"depths", t.depths}, {"cells", cells}, {"totals", totals}};
}

std::string niah_table_csv(const NiahTable& t) {
  std::string out = "preset,length,depth,score,samples\n";
  for (const std::string& p : t.presets)
    for (const std::int64_t l : t.lengths)
      for (const double d : t.depths) {
        const auto it = t.cells.find({p, l, d});
        if (it == t.cells.end()) continue;
        out += csv_field(p) + "," + std::to_string(l) + "," + number_text(d) + "," + number_text(it->second.percent()) +
               "," + std::to_string(it->second.samples) + "\n";
      }
  return out;
}

RulerTable tabulate_ruler(const std::vector<LongContextRecord>& records, const std::vector<std::string>& presets,
                          const std::vector<std::int64_t>& lengths, const std::vector<std::string>& tasks) {
  RulerTable t;
  t.presets = presets;
  t.lengths = lengths;
  t.tasks = tasks;
  std::sort(t.lengths.begin(), t.lengths.end());
  for (const LongContextRecord& r : records) {
    if (std::find(presets.begin(), presets.end(), r.preset) == presets.end()) continue;
    if (std::find(lengths.begin(), lengths.end(), r.length) == lengths.end()) continue;
    if (std::find(tasks.begin(), tasks.end(), r.task) == tasks.end()) continue;
    ScoreCell& c = t.cells[{r.preset, r.length, r.task}];
    ++c.samples;
    c.sum += r.score;
  }
  return t;
}

double RulerTable::average(const std::string& preset, std::int64_t length) const {
  double sum = 0;
  int n = 0;
  for (const std::string& task : tasks) {
    const auto it = cells.find({preset, length, task});
    if (it == cells.end() || it->second.samples == 0) continue;
    sum += it->second.percent();
    ++n;
  }
  return n ? sum / n : std::numeric_limits<double>::quiet_NaN();
}

std::string format_ruler_table(const RulerTable& t) {
  std::string out;
  for (const std::int64_t l : t.lengths) {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> head = {std::to_string(l) + " tokens"};
    for (const std::string& p : t.presets) head.push_back(preset_label(p, t.presets));
    rows.push_back(head);
    for (const std::string& task : t.tasks) {
      std::vector<std::string> row = {task};
      for (const std::string& p : t.presets) {
        const auto it = t.cells.find({p, l, task});
        row.push_back(it == t.cells.end() ? "-"
                                          : percent_text(it->second) + " (" + std::to_string(it->second.samples) + ")");
      }
      rows.push_back(row);
    }
    std::vector<std::string> avg = {"average"};
    for (const std::string& p : t.presets) {
      const double a = t.average(p, l);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f", a);
      avg.push_back(std::isnan(a) ? "-" : buf);
    }
    rows.push_back(avg);
    out += align(rows) + "\n";
  }
  return out;
}

json ruler_table_json(const RulerTable& t) {
  json cells = json::array();
  for (const auto& [key, c] : t.cells)
    cells.push_back({{"preset", std::get<0>(key)},
                     {"length", std::get<1>(key)},
                     {"task", std::get<2>(key)},
                     {"score", c.percent()},
                     {"samples", c.samples}});
  json averages = json::array();
  for (const std::string& p : t.presets)
    for (const std::int64_t l : t.lengths) {
      const double a = t.average(p, l);
      averages.push_back({{"preset", p}, {"length", l}, {"score", std::isnan(a) ? json(nullptr) : json(a)}});
    }
  return {{"presets", t.presets}, {"lengths", t.lengths}, {"tasks", t.tasks}, {"cells", cells}, {"averages", averages}};
}

std::string ruler_table_csv(const RulerTable& t) {
  std::string out = "preset,length,task,score,samples\n";
  for (const std::string& p : t.presets)
    for (const std::int64_t l : t.lengths) {
      int samples = 0;
      for (const std::string& task : t.tasks) {
        const auto it = t.cells.find({p, l, task});
        if (it == t.cells.end()) continue;
        samples += it->second.samples;
        out += csv_field(p) + "," + std::to_string(l) + "," + task + "," + number_text(it->second.percent()) + "," +
               std::to_string(it->second.samples) + "\n";
      }
      const double a = t.average(p, l);
      if (!std::isnan(a))
        out += csv_field(p) + "," + std::to_string(l) + ",average," + number_text(a) + "," + std::to_string(samples) +
               "\n";
    }
  return out;
}

}  // namespace luka::eval
