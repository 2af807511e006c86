#include "core/eval/qa_results.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/eval/sweep.h"
#include "core/eval/wikisalad_qa.h"
#include "core/util/error.h"
#include "core/util/text_file.h"

namespace luka::eval {

using nlohmann::json;

json to_json(const QaRecord& r) {
  return {{"preset", r.preset},
          {"file", r.file},
          {"difficulty", r.difficulty},
          {"example", r.example},
          {"example_id", r.example_id},
          {"question", r.question},
          {"question_text", r.question_text},
          {"answers", r.answers},
          {"prediction", r.prediction},
          {"match", r.match},
          {"prompt_tokens", r.prompt_tokens},
          {"new_tokens", r.new_tokens},
          {"seconds", r.seconds}};
}

QaRecord record_from_json(const json& j) {
  if (!j.is_object()) throw Error("expected a JSON object");
  const auto field = [&](const char* key) -> const json& {
    if (!j.contains(key)) throw Error(std::string("missing \"") + key + "\"");
    return j[key];
  };
  QaRecord r;
  try {
    r.preset = field("preset").get<std::string>();
    r.file = field("file").get<std::string>();
    r.difficulty = field("difficulty").get<std::string>();
    r.example = field("example").get<int>();
    r.example_id = field("example_id").get<std::string>();
    r.question = field("question").get<int>();
    r.question_text = field("question_text").get<std::string>();
    r.answers = field("answers").get<std::vector<std::string>>();
    r.prediction = field("prediction").get<std::string>();
    r.match = field("match").get<bool>();
    r.prompt_tokens = field("prompt_tokens").get<std::int64_t>();
    r.new_tokens = field("new_tokens").get<std::int64_t>();
    r.seconds = field("seconds").get<double>();
  } catch (const json::exception& e) {
    throw Error(std::string("a field has the wrong type (") + e.what() + ")");
  }
  return r;
}

std::string record_key(const std::string& preset, const std::string& file, int example, int question) {
  return preset + "\n" + file + "\n" + std::to_string(example) + "\n" + std::to_string(question);
}

ResultsFile read_results(const std::filesystem::path& path) {
  ResultsFile out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  const std::string text = read_text_file(path, "results file");
  std::size_t line_no = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t eol = text.find('\n', at);
    if (eol == std::string::npos) break;  // cut off by a kill: left out
    ++line_no;
    const std::string line = text.substr(at, eol - at);
    try {
      out.records.push_back(record_from_json(json::parse(line)));
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

EmTable tabulate(const std::vector<QaRecord>& records, const std::vector<std::string>& presets) {
  EmTable t;
  t.presets = presets;
  for (const QaRecord& r : records) {
    if (std::find(presets.begin(), presets.end(), r.preset) == presets.end()) continue;
    if (std::find(t.difficulties.begin(), t.difficulties.end(), r.difficulty) == t.difficulties.end()) t.difficulties.push_back(r.difficulty);
    for (EmCell* c : {&t.cells[{r.difficulty, r.preset}], &t.totals[r.preset]}) {
      ++c->questions;
      c->matches += r.match ? 1 : 0;
    }
  }
  std::stable_sort(t.difficulties.begin(), t.difficulties.end(), [](const std::string& a, const std::string& b) {
    const int ra = difficulty_rank(a), rb = difficulty_rank(b);
    return ra != rb ? ra < rb : (ra == 4 && a < b);
  });
  return t;
}

std::string format_table(const EmTable& t) {
  const auto cell = [](const EmCell& c) {
    if (c.questions == 0) return std::string("-");
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.1f (%d)", c.em(), c.questions);
    return std::string(buf);
  };
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head = {"dataset"};
  for (const std::string& p : t.presets) {
    const std::string label = file_names_only(p);
    const bool unique = std::none_of(t.presets.begin(), t.presets.end(),
                                     [&](const std::string& q) { return q != p && file_names_only(q) == label; });
    head.push_back(unique ? label : p);
  }
  rows.push_back(head);
  for (const std::string& d : t.difficulties) {
    std::vector<std::string> row = {d};
    for (const std::string& p : t.presets) {
      const auto it = t.cells.find({d, p});
      row.push_back(it == t.cells.end() ? "-" : cell(it->second));
    }
    rows.push_back(row);
  }
  std::vector<std::string> total = {"all"};
  for (const std::string& p : t.presets) {
    const auto it = t.totals.find(p);
    total.push_back(it == t.totals.end() ? "-" : cell(it->second));
  }
  rows.push_back(total);
  std::vector<std::size_t> width(head.size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
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

json table_json(const EmTable& t) {
  json rows = json::array();
  for (const auto& [key, c] : t.cells)
    rows.push_back({{"difficulty", key.first}, {"preset", key.second}, {"em", c.em()}, {"questions", c.questions}, {"matches", c.matches}});
  json totals = json::object();
  for (const auto& [preset, c] : t.totals) totals[preset] = {{"em", c.em()}, {"questions", c.questions}, {"matches", c.matches}};
  return {{"difficulties", t.difficulties}, {"presets", t.presets}, {"cells", rows}, {"totals", totals}};
}

}  // namespace luka::eval
