// luka eval niah and luka eval ruler: the long-context suites (core/eval/niah.h, core/eval/ruler.h)
// run per preset, as `luka eval wikisalad` runs its questions: one JSON line per answered sample in
// OUT/results.jsonl, so a stopped run resumes; OUT/run.json holds what the results depend on, so a
// resume with other settings is refused; the table is printed and written as OUT/summary.json and
// OUT/table.csv; the needle grid is drawn as OUT/niah-grid.{png,svg,pdf}. --capture-dir records
// each sample's run as a capture with the needles marked as prompt segments.
//
// Index of this file:
//   [SECTION] options
//   [SECTION] the planned runs and their names
//   [SECTION] a sample's capture
//   [SECTION] figures and resuming
//   [SECTION] the model and presets, then the commands

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/cmd_eval_common.h"
#include "app/cli/commands.h"
#include "captures/pipeline.h"
#include "captures/recorder.h"
#include "captures/writer.h"
#include "core/chat/chat_format.h"
#include "core/device/device.h"
#include "core/eval/answer_match.h"
#include "core/eval/niah.h"
#include "core/eval/niah_results.h"
#include "core/eval/ruler.h"
#include "core/luka/config.h"
#include "core/luka/luka_layer.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/run/run_loop.h"
#include "core/run/session.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/output_file.h"
#include "core/util/text_file.h"
#include "core/util/version.h"
#include "viz/score_grid.h"

namespace luka::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kDefaultPresets = "dense,clustered";

// The shared texts beside the checkout: the haystack when --haystack is not given.
fs::path default_data(const char* what) { return fs::path(LUKA_SOURCE_DIR) / ".." / "shared" / "data" / what; }

// [SECTION] options

// "1024,2k,4K" -> {1024, 2048, 4096}, each at least 16 tokens.
std::vector<std::int64_t> parse_lengths(const std::string& text) {
  std::vector<std::int64_t> out;
  std::string item;
  for (const char c : text + ",") {
    if (c != ',') {
      item += c;
      continue;
    }
    std::int64_t scale = 1;
    if (!item.empty() && (item.back() == 'k' || item.back() == 'K')) {
      scale = 1024;
      item.pop_back();
    }
    std::size_t used = 0;
    std::int64_t v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v * scale < 16)
      throw UsageError("--lengths: expected token counts of at least 16 such as 1024,2k, got '" + text + "'");
    if (std::find(out.begin(), out.end(), v * scale) == out.end()) out.push_back(v * scale);
    item.clear();
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "0,25,50,75,100" -> depths in percent of the haystack, each in [0, 100].
std::vector<double> parse_depths(const std::string& text) {
  std::vector<double> out;
  std::string item;
  for (const char c : text + ",") {
    if (c != ',') {
      item += c;
      continue;
    }
    std::size_t used = 0;
    double v = -1;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || !(v >= 0 && v <= 100))
      throw UsageError("--depths: expected percentages in [0, 100] such as 0,25,50,75,100, got '" + text + "'");
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    item.clear();
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> parse_tasks(const std::string& text) {
  if (text == "all") return eval::ruler_tasks();
  std::vector<std::string> out;
  std::string item;
  for (const char c : text + ",") {
    if (c != ',') {
      item += c;
      continue;
    }
    if (!eval::is_ruler_task(item))
      throw UsageError("--tasks: unknown task '" + item +
                       "' (niah_single_1..3, niah_multikey_1..3, niah_multivalue, niah_multiquery, vt, "
                       "cwe, fwe, qa, or all)");
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    item.clear();
  }
  return out;
}

// The options both suites take, after their own.
void add_common_options(ArgParser& args) {
  args.option("model", "PATH", kModelOptionHelp)
      .option("samples", "N", "samples per cell (per length and depth, or per task and length)", 1)
      .range(1, 100000)
      .option("seed", "N", "the generators' seed: the same seed gives the same samples", 0)
      .range(0, 2147483647)
      .option("format", "chat|raw", "chat: through the model's chat template; raw: the text as it is", "chat")
      .option("presets", "LIST",
              "comma-separated presets (dense, lined, clustered, mixed(a,b), paper, authors_eval, auto:FILE) or\n"
              "layers-config .json files; one table column or figure panel each",
              kDefaultPresets)
      .option("set", "SPEC", "a config override applied to every preset (repeatable), e.g. \"top_k=8\"")
      .option("max-new-tokens", "N", "answer length limit", 32)
      .range(1, 100000)
      .option("capture-dir", "DIR",
              "also record each sample's run as DIR/PRESET/SAMPLE.h5 (needles marked as segments)")
      .option("capture-record", "SPEC", "what the captures record (luka capture's --record)", "all")
      .flag("query-agnostic",
            "prefill each sample's context before its question is seen, as kvpress evaluates: a press\n"
            "compresses the context alone, and the question attends to what it kept")
      .flag("restart", "discard the results already in OUT instead of resuming")
      .flag("quiet", "no progress on standard error");
  add_compute_options(args);
  add_device_option(args);
  add_weights_option(args);
}

// [SECTION] the planned runs and their names

// One sample to answer, the same for every preset.
struct Job {
  std::string task;
  double depth = -1;  // percent; -1 for RULER's tasks
  eval::LongContextSample sample;
};

// What both suites share once their samples are made.
struct Plan {
  std::string evaluation;  // "niah" or "ruler"
  std::vector<Job> jobs;
  json settings;  // the suite's own settings for run.json (haystack, lengths are not among them)
  std::vector<std::int64_t> lengths;
  std::vector<double> depths;      // niah
  std::vector<std::string> tasks;  // ruler
};

eval::PromptFormat prompt_format(const ArgParser& args, const Tokenizer& tokenizer) {
  const std::string f = args.get("format");
  if (f != "chat" && f != "raw") throw UsageError("--format: expected chat or raw, got '" + f + "'");
  eval::PromptFormat format;
  format.chat = f == "chat";
  format.system = default_system_prompt(tokenizer.config());
  format.hybrid_thinking = is_hybrid_thinking(tokenizer.config());
  return format;
}

// A file name for a sample's capture: task, length, depth and index.
std::string capture_name(const Job& j) {
  char buf[96];
  if (j.depth >= 0)
    std::snprintf(buf, sizeof buf, "%s-%lld-d%g-s%d.h5", j.task.c_str(), static_cast<long long>(j.sample.length),
                  j.depth, j.sample.index);
  else
    std::snprintf(buf, sizeof buf, "%s-%lld-s%d.h5", j.task.c_str(), static_cast<long long>(j.sample.length),
                  j.sample.index);
  return buf;
}

// A preset as a folder name: letters, digits, '-', '_' and '.' kept, the rest '_'.
std::string folder_name(const std::string& preset) {
  std::string out = fs::path(preset).filename().string();
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return out;
}

// The needles of a sample as prompt segments: the tokens that cover each needle's bytes.
void needle_segments(const Tokenizer& tokenizer, const eval::LongContextSample& s,
                     std::vector<capture::Segment>& segments, std::vector<std::int32_t>& segment_of) {
  segment_of.assign(s.ids.size(), -1);
  const std::vector<TokenSpan> spans = tokenizer.encode_with_offsets(s.text);
  const std::size_t shift = s.ids.size() - spans.size();  // a BOS token in front
  for (const eval::TokenSpanBytes& n : s.needles) {
    capture::Segment seg;
    seg.label = "needle " + std::to_string(segments.size() + 1);
    seg.colour = "#d62728";
    seg.begin = -1;
    for (std::size_t t = 0; t < spans.size(); ++t) {
      if (spans[t].end <= n.begin || spans[t].begin >= n.end) continue;
      if (seg.begin < 0) seg.begin = static_cast<std::int64_t>(t + shift);
      seg.end = static_cast<std::int64_t>(t + shift + 1);
    }
    if (seg.begin < 0) continue;
    for (std::int64_t t = seg.begin; t < seg.end; ++t)
      segment_of[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(segments.size());
    segments.push_back(seg);
  }
}

// [SECTION] a sample's capture

// What a capture needs besides the run.
struct CaptureContext {
  const Model* model = nullptr;
  const Tokenizer* tokenizer = nullptr;
  const Backend* device = nullptr;
  capture::RecordSpec spec;
};

// Runs `s` through `loop`, recording it to `file`.
RunResult run_captured(RunLoop& loop, const RunSettings& run, const eval::LongContextSample& s,
                       const LukaConfig& config, const std::vector<std::shared_ptr<LukaLayer>>& layers,
                       const CaptureContext& c, const fs::path& file) {
  std::vector<capture::Segment> segments;
  std::vector<std::int32_t> segment_of;
  needle_segments(*c.tokenizer, s, segments, segment_of);
  const std::int64_t n = static_cast<std::int64_t>(s.ids.size());
  capture::Manifest manifest = capture::make_manifest(*c.model, *c.tokenizer, config);
  manifest.tool_version = LUKA_VERSION;
  manifest.git_revision = git_revision();
  manifest.record = c.spec.to_string();
  manifest.device = c.device->name();
  json generation = {{"prompt", s.task + " sample " + std::to_string(s.index) + ": " + s.query},
                     {"prompt_tokens", n},
                     {"max_new_tokens", run.max_new_tokens},
                     {"temperature", 0.0},
                     {"answers", s.answers}};
  if (run.context_tokens > 0) generation["query_agnostic_context_tokens"] = run.context_tokens;  // prefilled before the question
  manifest.generation = generation.dump();
  const capture::Layout layout = capture::make_layout(*c.model, config, c.spec, n, n + run.max_new_tokens);
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  capture::CaptureWriter writer(file);
  capture::CapturePipeline pipeline(std::vector<capture::CaptureSink*>{&writer});
  pipeline.set_parallel(capture::model_parallel_for());
  std::vector<capture::Token> prompt;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t id = s.ids[static_cast<std::size_t>(i)];
    prompt.push_back({id, c.tokenizer->token_bytes(id), false, segment_of[static_cast<std::size_t>(i)]});
  }
  pipeline.begin(manifest, layout, std::move(prompt), segments);
  capture::CaptureRecorder recorder(pipeline, layout, layers);
  recorder.set_prefill_split(run.context_tokens);
  const Tokenizer& tokenizer = *c.tokenizer;
  capture::RecordingObserver recording(&recorder, [&tokenizer](std::int32_t id) { return tokenizer.token_bytes(id); });
  RunSettings with_probabilities = run;
  with_probabilities.probabilities = true;
  const RunResult result = loop.run(s.ids, with_probabilities, &recording);
  pipeline.finish(std::move(recording.pending));
  return result;
}

// [SECTION] figures and resuming

// The needle grid as a figure: one panel per preset, depth rows (top: 0%), length columns.
viz::ScoreGrid niah_figure(const eval::NiahTable& t) {
  viz::ScoreGrid g;
  g.title = "Needle in a haystack: score (%) by context length and needle depth";
  g.x_label = "context length (tokens)";
  g.y_label = "needle depth (%)";
  g.scale_label = "score (%)";
  for (const double d : t.depths) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", d);
    g.row_labels.push_back(buf);
  }
  for (const std::int64_t l : t.lengths) g.col_labels.push_back(std::to_string(l));
  for (const std::string& p : t.presets) {
    viz::ScoreGridPanel panel;
    const auto total = t.totals.find(p);
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.1f%%)", total == t.totals.end() ? 0.0 : total->second.percent());
    panel.title = eval::preset_label(p, t.presets) + buf;
    for (const double d : t.depths)
      for (const std::int64_t l : t.lengths) {
        const auto it = t.cells.find({p, l, d});
        panel.values.push_back(
            it == t.cells.end() || it->second.samples == 0 ? NAN : static_cast<float>(it->second.percent()));
      }
    g.panels.push_back(std::move(panel));
  }
  g.columns = std::min<int>(3, static_cast<int>(g.panels.size()));
  return g;
}

// The run.json keys a resume must match (presets are matched one by one).
const std::vector<std::string>& resume_keys() {
  static const std::vector<std::string> keys = {"evaluation",     "model", "dtype",  "weights",
                                                "max_new_tokens", "seed",  "format", "suite"};
  return keys;
}

// Checks OUT's run.json against `run_info` (adding the presets only it has), or refuses.
void check_resume(const fs::path& out_dir, const fs::path& run_path, json& run_info, bool have_results) {
  if (!fs::exists(run_path)) {
    if (have_results)
      fail(out_dir.string(), "results.jsonl is there without run.json; give another --out, or --restart to discard it");
    return;
  }
  const json before = read_json_file(run_path, "run settings");
  for (const std::string& key : resume_keys())
    if (!before.contains(key) || before[key] != run_info[key])
      fail(out_dir.string(), "its results were made with another " + key + " (" +
                                 (before.contains(key) ? before[key].dump() : "none") +
                                 "); give another --out, or --restart to discard them");
  // Runs from before --query-agnostic existed asked their questions with the context.
  if (before.value("query_agnostic", false) != run_info.value("query_agnostic", false))
    fail(out_dir.string(), std::string("its results were made ") + (before.value("query_agnostic", false) ? "with" : "without") +
                               " --query-agnostic; give another --out, or --restart to discard them");
  if (before.contains("presets") && before["presets"].is_object())
    for (const auto& [name, c] : before["presets"].items()) {
      if (run_info["presets"].contains(name) && run_info["presets"][name] != c)
        fail(out_dir.string(),
             "its results for preset " + name + " were made with another config; give another --out, or --restart");
      if (!run_info["presets"].contains(name)) run_info["presets"][name] = c;
    }
}

// Prints the table and writes OUT/summary.json, OUT/table.csv and, for the needle grid, its figure.
void write_tables(const Plan& plan, const std::vector<eval::LongContextRecord>& records,
                  const std::vector<std::string>& presets, const json& run_info, const fs::path& out_dir, bool quiet) {
  json summary = {{"run", run_info}};
  std::string text, csv;
  if (plan.evaluation == "niah") {
    const eval::NiahTable table = eval::tabulate_niah(records, presets, plan.lengths, plan.depths);
    text = eval::format_niah_table(table);
    csv = eval::niah_table_csv(table);
    summary["table"] = eval::niah_table_json(table);
    const viz::ScoreGrid grid = niah_figure(table);
    for (const char* ext : {"png", "svg", "pdf"})
      viz::write_score_grid(grid, out_dir / (std::string("niah-grid.") + ext));
  } else {
    const eval::RulerTable table = eval::tabulate_ruler(records, presets, plan.lengths, plan.tasks);
    text = eval::format_ruler_table(table);
    csv = eval::ruler_table_csv(table);
    summary["table"] = eval::ruler_table_json(table);
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  write_file_atomically(out_dir / "summary.json", summary.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  write_file_atomically(out_dir / "table.csv", csv);
  if (!quiet)
    std::fprintf(stderr, "wrote %s, summary.json and table.csv%s\n", (out_dir / "results.jsonl").string().c_str(),
                 plan.evaluation == "niah" ? " and niah-grid.{png,svg,pdf}" : "");
}

// [SECTION] the model and presets, then the commands

// The device, the model and the presets' configs, made before any evaluation data is read, so
// that a bad value on the command line (--device, --dtype, --weights, --presets, --set,
// --capture-record) is refused as such (exit 2) whatever the data.
struct LoadedRun {
  std::vector<std::string> presets;
  std::optional<CaptureContext> capture_context;
  std::shared_ptr<const Backend> device;
  std::shared_ptr<const Model> model;
  std::map<std::string, LukaConfig> configs;
};

LoadedRun load_run(const ArgParser& args, const fs::path& model_path) {
  LoadedRun r;
  r.presets = split_presets(args.get("presets"));
  const capture::RecordSpec spec =
      option_value("capture-record", [&] { return capture::RecordSpec::parse(args.get("capture-record")); });
  if (args.has("capture-dir")) {
    r.capture_context.emplace();
    r.capture_context->spec = spec;
  }
  r.device = device_option(args);
  r.model = Model::load(model_path, load_options(args, *r.device));
  const std::int64_t n_layers = r.model->config().num_layers;
  for (const std::string& p : r.presets) r.configs.emplace(p, preset_config(p, n_layers, args.get_all("set")));
  return r;
}

// Runs every job under every preset, appending to OUT/results.jsonl, then writes the tables.
int run_plan(const ArgParser& args, const Tokenizer& tokenizer, const fs::path& model_path, Plan& plan,
             LoadedRun& loaded) {
  const std::vector<std::string>& presets = loaded.presets;
  const std::int64_t max_new = args.get_int("max-new-tokens");
  const fs::path out_dir = args.get("out");
  std::optional<CaptureContext>& capture_context = loaded.capture_context;
  const std::shared_ptr<const Backend> device = loaded.device;
  const std::shared_ptr<const Model> model = loaded.model;
  const std::map<std::string, LukaConfig>& configs = loaded.configs;
  for (const Job& j : plan.jobs) check_context(model->config().max_position_embeddings, 0, j.sample.length, max_new);

  json run_info = {{"evaluation", plan.evaluation}, {"model", model_identity(model_path)},
                   {"dtype", args.get("dtype")},    {"weights", to_string(model->weight_format())},
                   {"max_new_tokens", max_new},     {"seed", args.get_int("seed")},
                   {"format", args.get("format")},  {"suite", plan.settings},
                   {"presets", json::object()}};
  const bool query_agnostic = args.get_flag("query-agnostic");
  if (query_agnostic) run_info["query_agnostic"] = true;
  for (const auto& [name, c] : configs) run_info["presets"][name] = json::parse(c.to_json());
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail(out_dir.string(), "cannot create the folder: " + ec.message());
  const fs::path results_path = out_dir / "results.jsonl", run_path = out_dir / "run.json";
  const OutputLock lock(results_path);
  if (args.get_flag("restart")) {
    fs::remove(results_path, ec);
    fs::remove(run_path, ec);
  }
  eval::LongContextResults previous = eval::read_long_context_results(results_path);
  check_resume(out_dir, run_path, run_info, !previous.records.empty());
  write_file_atomically(run_path, run_info.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  if (fs::exists(results_path) && fs::file_size(results_path) != previous.valid_bytes)
    fs::resize_file(results_path, previous.valid_bytes);
  std::set<std::string> done;
  for (const eval::LongContextRecord& r : previous.records) done.insert(eval::record_key(r));
  const auto key_of = [](const std::string& preset, const Job& j) {
    return eval::record_key(preset, j.task, j.sample.length, j.depth, j.sample.index);
  };
  std::size_t todo = 0;
  for (const std::string& p : presets)
    for (const Job& j : plan.jobs) todo += done.count(key_of(p, j)) ? 0 : 1;
  const bool quiet = args.get_flag("quiet");
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (!quiet)
    std::fprintf(stderr, "%zu samples x %zu presets; %zu answered already in %s, %zu to go\n", plan.jobs.size(),
                 presets.size(), presets.size() * plan.jobs.size() - todo, results_path.string().c_str(), todo);

  std::ofstream results(results_path, std::ios::binary | std::ios::app);
  if (!results) fail(results_path.string(), "cannot open for appending");
  std::vector<eval::LongContextRecord> records = previous.records;
  RunSession session(device, model, &tokenizer);
  RunSettings run;
  run.max_new_tokens = max_new;
  run.stop_ids = stop_token_ids(model->config().eos_token_ids, tokenizer);
  if (capture_context) {
    capture_context->model = model.get();
    capture_context->tokenizer = &tokenizer;
    capture_context->device = device.get();
  }
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto last_print = t0;
  std::size_t answered = 0;
  for (std::size_t pi = 0; pi < presets.size(); ++pi) {
    const std::string& preset = presets[pi];
    const LukaConfig& config = configs.at(preset);
    session.use(config);
    RunLoop& loop = session.loop();
    const std::vector<std::shared_ptr<LukaLayer>>& layers = session.layers();
    double sum = 0;
    int scored = 0;
    for (const Job& j : plan.jobs) {
      if (done.count(key_of(preset, j))) continue;
      const auto start = Clock::now();
      run.context_tokens =
          query_agnostic ? eval::context_token_count(tokenizer, j.sample.text, j.sample.question_at, j.sample.ids) : 0;
      const RunResult result =
          capture_context ? run_captured(loop, run, j.sample, config, layers, *capture_context,
                                         fs::path(args.get("capture-dir")) / folder_name(preset) / capture_name(j))
                          : loop.run(j.sample.ids, run);
      std::vector<std::int32_t> shown;
      for (const std::int32_t id : result.ids)
        if (!tokenizer.is_special(id)) shown.push_back(id);
      eval::LongContextRecord r;
      r.preset = preset;
      r.task = j.task;
      r.length = j.sample.length;
      r.depth = j.depth;
      r.sample = j.sample.index;
      r.query = j.sample.query;
      r.answers = j.sample.answers;
      r.metric = eval::to_string(j.sample.metric);
      r.prediction = eval::strip_space(tokenizer.decode(shown));
      r.score = eval::score(j.sample.metric, r.prediction, r.answers);
      r.prompt_tokens = result.prompt_tokens;
      r.new_tokens = static_cast<std::int64_t>(result.ids.size());
      r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      results << eval::to_json(r).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      results.flush();
      if (!results) fail(results_path.string(), "write failed (disk full?)");
      records.push_back(r);
      ++answered;
      ++scored;
      sum += r.score;
      if (!quiet && (tty || answered == todo || Clock::now() - last_print > std::chrono::seconds(10))) {
        last_print = Clock::now();
        const double per = std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(answered);
        std::fprintf(stderr, "%s[%s %zu/%zu] %zu/%zu samples, score %.1f%% of %d, %.1f s per sample, %s left%s",
                     tty ? "\r\033[K" : "", preset.c_str(), pi + 1, presets.size(), answered, todo,
                     100.0 * sum / scored, scored, per,
                     duration_text(per * static_cast<double>(todo - answered)).c_str(), tty ? "" : "\n");
        std::fflush(stderr);
      }
    }
  }
  if (!quiet && tty && answered) std::fputc('\n', stderr);

  write_tables(plan, records, presets, run_info, out_dir, quiet);
  return 0;
}

const char* const kOutputHelp =
    "\nPrints the table; writes OUT/results.jsonl (one line per answered sample), OUT/summary.json,\n"
    "OUT/table.csv and OUT/run.json. A stopped run started again with the same settings resumes where\n"
    "it was; more lengths, depths, tasks, samples or presets only add samples.";

}  // namespace

int run_eval_niah(int argc, char** argv) {
  ArgParser args(
      "eval niah", "[--model PATH] [--lengths LIST] [--depths LIST] [--presets LIST] [--out DIR]",
      std::string("Needle in a haystack: \"The special magic number for KEY is VALUE.\" (a random key and\n"
                  "7-digit value per sample) hidden at a sentence boundary at each depth of a haystack text cut\n"
                  "to exactly each length in tokens, then asked for; scored by whether the answer contains the\n"
                  "value (with --values above 1, the fraction of the values it contains). Greedy decoding. Also\n"
                  "draws OUT/niah-grid.{png,svg,pdf}: depth down, length across, one panel per preset.\n") +
          kOutputHelp);
  args.option("haystack", "PATH", "a text file, or a folder of .txt files joined (default: the shared texts)")
      .option("lengths", "LIST", "context lengths in tokens, e.g. 1k,2k,4k", "1k,2k")
      .option("depths", "LIST", "needle depths in percent of the haystack", "0,25,50,75,100")
      .option("values", "N", "needles (values) of the one key per sample; above 1 the score is the fraction found", 1)
      .range(1, 16)
      .option("out", "DIR", "where results go", "niah-eval");
  add_common_options(args);
  args.epilog(
      std::string("example:\n  luka eval niah --lengths 1k,2k --depths 0,25,50,75,100 --presets dense,clustered\n\n") +
      kEnvironmentHelp);
  if (!args.parse(argc, argv, 3)) return 0;
  Plan plan;
  plan.evaluation = "niah";
  plan.lengths = parse_lengths(args.get("lengths"));
  plan.depths = parse_depths(args.get("depths"));
  split_presets(args.get("presets"));  // a bad list before anything loads
  const int values = static_cast<int>(args.get_int("values"));
  const fs::path haystack_path = args.has("haystack") ? fs::path(args.get("haystack")) : default_data("texts");
  const fs::path model_path = resolve_model_path(args);
  LoadedRun loaded = load_run(args, model_path);
  const Tokenizer tokenizer = Tokenizer::load(model_path);
  const eval::PromptFormat format = prompt_format(args, tokenizer);
  const eval::Haystack haystack = eval::Haystack::load(haystack_path);
  const int samples = static_cast<int>(args.get_int("samples"));
  const std::uint64_t seed = static_cast<std::uint64_t>(args.get_int("seed"));
  for (const std::int64_t length : plan.lengths)
    for (const double depth : plan.depths)
      for (int i = 0; i < samples; ++i)
        plan.jobs.push_back(
            {"niah", depth,
             eval::make_niah_sample(haystack, tokenizer, format, length, depth / 100.0, values, i, seed)});
  plan.settings = {{"haystack", fs::weakly_canonical(haystack_path).string()}, {"values", values}};
  return run_plan(args, tokenizer, model_path, plan, loaded);
}

int run_eval_ruler(int argc, char** argv) {
  ArgParser args(
      "eval ruler", "[--model PATH] [--tasks LIST] [--lengths LIST] [--samples N] [--presets LIST] [--out DIR]",
      std::string("RULER's synthetic tasks (niah_single_1..3, niah_multikey_1..3, niah_multivalue, niah_multiquery,\n"
                  "vt, cwe, fwe, and qa over WikiSalad's paragraphs), each input exactly each length in tokens;\n"
                  "scored as RULER scores them (the fraction of the answers found; qa: any answer found) and\n"
                  "averaged over the tasks per preset and length. Greedy decoding.\n") +
          kOutputHelp);
  args.option("tasks", "LIST", "comma-separated tasks, or all", "all")
      .option("lengths", "LIST", "context lengths in tokens, e.g. 1k,2k,4k", "1k,2k")
      .option("essay", "PATH", "the essay haystack: a text file or a folder of .txt files (default: the shared texts)")
      .option("qa-data", "PATH", "WikiSalad .json file or folder for the qa task (default: the shared WikiSalad data)")
      .option("out", "DIR", "where results go", "ruler-eval");
  add_common_options(args);
  args.epilog(std::string("example:\n  luka eval ruler --lengths 1k,2k --samples 5 --presets dense,clustered\n\n") +
              kEnvironmentHelp);
  if (!args.parse(argc, argv, 3)) return 0;
  Plan plan;
  plan.evaluation = "ruler";
  plan.lengths = parse_lengths(args.get("lengths"));
  plan.tasks = parse_tasks(args.get("tasks"));
  split_presets(args.get("presets"));
  const fs::path essay_path = args.has("essay") ? fs::path(args.get("essay")) : default_data("texts");
  const fs::path qa_path = args.has("qa-data") ? fs::path(args.get("qa-data")) : default_data("wikisalad");
  const fs::path model_path = resolve_model_path(args);
  LoadedRun loaded = load_run(args, model_path);
  const Tokenizer tokenizer = Tokenizer::load(model_path);
  const eval::PromptFormat format = prompt_format(args, tokenizer);
  const eval::Haystack essay = eval::Haystack::load(essay_path);
  std::optional<eval::QaPool> qa;
  if (std::find(plan.tasks.begin(), plan.tasks.end(), "qa") != plan.tasks.end()) qa = eval::load_qa_pool(qa_path);
  eval::RulerSources sources;
  sources.essay = &essay;
  sources.qa = qa ? &*qa : nullptr;
  sources.words = eval::RulerSources::vocabulary(essay);
  const int samples = static_cast<int>(args.get_int("samples"));
  const std::uint64_t seed = static_cast<std::uint64_t>(args.get_int("seed"));
  for (const std::int64_t length : plan.lengths)
    for (const std::string& task : plan.tasks)
      for (int i = 0; i < samples; ++i)
        plan.jobs.push_back({task, -1, eval::make_ruler_sample(task, sources, tokenizer, format, length, i, seed)});
  plan.settings = {{"essay", fs::weakly_canonical(essay_path).string()},
                   {"qa_data", fs::weakly_canonical(qa_path).string()}};
  return run_plan(args, tokenizer, model_path, plan, loaded);
}

}  // namespace luka::cli
