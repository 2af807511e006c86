// The results of a QA evaluation: one JSON line per answered question (results.jsonl), read back
// to resume a run that was stopped, and tabulated as the LuKA paper's Table 1 (difficulties x
// presets, exact match in percent with question counts).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace luka::eval {

struct QaRecord {
  std::string preset;
  std::string file, difficulty, example_id;
  int example = 0, question = 0;
  std::string question_text;
  std::vector<std::string> answers;
  std::string prediction;
  bool match = false;
  std::int64_t prompt_tokens = 0, new_tokens = 0;
  double seconds = 0;
};

nlohmann::json to_json(const QaRecord& r);
QaRecord record_from_json(const nlohmann::json& j);  // throws luka::Error for a missing or mistyped field

// What identifies a question within a run: preset, file, example, question.
std::string record_key(const std::string& preset, const std::string& file, int example, int question);
inline std::string record_key(const QaRecord& r) { return record_key(r.preset, r.file, r.example, r.question); }

struct ResultsFile {
  std::vector<QaRecord> records;
  std::uintmax_t valid_bytes = 0;  // the complete lines; a killed run's cut last line lies beyond
};
// The records of a results file (none when it does not exist). A last line without its newline is
// a write cut off by a kill and is left out; any other malformed line is a luka::Error naming the
// line.
ResultsFile read_results(const std::filesystem::path& path);

struct EmCell {
  int questions = 0, matches = 0;
  double em() const { return questions ? 100.0 * matches / questions : 0.0; }
};
struct EmTable {
  std::vector<std::string> difficulties;  // rows, Table 1's order
  std::vector<std::string> presets;       // columns, in the order given
  std::map<std::pair<std::string, std::string>, EmCell> cells;  // (difficulty, preset)
  std::map<std::string, EmCell> totals;                          // per preset, all difficulties
};
// `presets` fixes the column order; records of other presets are left out.
EmTable tabulate(const std::vector<QaRecord>& records, const std::vector<std::string>& presets);
// The table as text: one row per difficulty and a total row, "EM (n)" per preset. A preset that
// is a layers-config path heads its column by its file name, unless another column's would be the
// same (then both keep their paths).
std::string format_table(const EmTable& table);
nlohmann::json table_json(const EmTable& table);

}  // namespace luka::eval
