// The results of the long-context evaluations (`luka eval niah`, `luka eval ruler`): one JSON line
// per answered sample, read back to resume a stopped run, and their tables: the needle grid (per
// preset, depth x length, mean score in percent) and RULER's table (per preset and length, each
// task's mean score and their average, as RULER reports it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

namespace luka::eval {

struct LongContextRecord {
  std::string preset, task;
  std::int64_t length = 0;
  double depth = -1;  // percent; -1 for tasks without a depth
  int sample = 0;
  std::string query;
  std::vector<std::string> answers;
  std::string metric;  // "string_match_all" or "string_match_part"
  std::string prediction;
  double score = 0;  // in [0, 1]
  std::int64_t prompt_tokens = 0, new_tokens = 0;
  double seconds = 0;
};

nlohmann::json to_json(const LongContextRecord& r);
LongContextRecord long_context_record_from_json(
    const nlohmann::json& j);  // throws luka::Error for a missing or mistyped field

// What identifies a sample within a run: preset, task, length, depth, sample.
std::string record_key(const std::string& preset, const std::string& task, std::int64_t length, double depth,
                       int sample);
inline std::string record_key(const LongContextRecord& r) {
  return record_key(r.preset, r.task, r.length, r.depth, r.sample);
}

struct LongContextResults {
  std::vector<LongContextRecord> records;
  std::uintmax_t valid_bytes = 0;  // the complete lines; a killed run's cut last line lies beyond
};
// The records of a results file (none when it does not exist). A last line without its newline is
// left out; any other malformed line is a luka::Error naming the file and line.
LongContextResults read_long_context_results(const std::filesystem::path& path);

struct ScoreCell {
  int samples = 0;
  double sum = 0;  // of scores in [0, 1]
  double percent() const { return samples ? 100.0 * sum / samples : 0.0; }
};

// The needle grid: for each preset, rows are depths and columns lengths (both ascending).
struct NiahTable {
  std::vector<std::string> presets;
  std::vector<std::int64_t> lengths;
  std::vector<double> depths;                                                // percent
  std::map<std::tuple<std::string, std::int64_t, double>, ScoreCell> cells;  // (preset, length, depth)
  std::map<std::string, ScoreCell> totals;                                   // per preset
};
// Records of the given presets, lengths and depths only (a resumed folder may hold more).
NiahTable tabulate_niah(const std::vector<LongContextRecord>& records, const std::vector<std::string>& presets,
                        const std::vector<std::int64_t>& lengths, const std::vector<double>& depths);
std::string format_niah_table(
    const NiahTable& t);  // a block per preset: "depth" rows, length columns, scores in percent
nlohmann::json niah_table_json(const NiahTable& t);
std::string niah_table_csv(const NiahTable& t);  // preset,length,depth,score,samples

// RULER's table: per preset and length, each task's mean score and the average over the tasks.
struct RulerTable {
  std::vector<std::string> presets, tasks;
  std::vector<std::int64_t> lengths;
  std::map<std::tuple<std::string, std::int64_t, std::string>, ScoreCell> cells;  // (preset, length, task)
  // The mean of the tasks' scores (percent) with a result; NaN when none has one.
  double average(const std::string& preset, std::int64_t length) const;
};
RulerTable tabulate_ruler(const std::vector<LongContextRecord>& records, const std::vector<std::string>& presets,
                          const std::vector<std::int64_t>& lengths, const std::vector<std::string>& tasks);
std::string format_ruler_table(const RulerTable& t);  // a block per length: task rows and "average", preset columns
nlohmann::json ruler_table_json(const RulerTable& t);
std::string ruler_table_csv(const RulerTable& t);  // preset,length,task,score,samples (task "average" last)

// A preset's column heading: a layers-config path by its file name unless two would share it.
std::string preset_label(const std::string& preset, const std::vector<std::string>& presets);

}  // namespace luka::eval
