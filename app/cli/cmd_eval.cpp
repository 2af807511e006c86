// luka eval wikisalad: the LuKA paper's Table 1 — exact match on WikiSalad's interwoven-topic
// questions per attention preset and difficulty (core/eval). One JSON line per answered question
// in OUT/results.jsonl; a stopped run resumes from it. OUT/run.json holds what the results depend
// on (model, decoding, each preset's full config), so a resume with other settings is refused.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/cmd_eval_common.h"
#include "app/cli/commands.h"
#include "core/device/device.h"
#include "core/eval/qa_results.h"
#include "core/eval/wikisalad_qa.h"
#include "core/luka/config.h"
#include "core/luka/luka_layer.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/run/session.h"
#include "core/run/run_loop.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/output_file.h"
#include "core/util/text_file.h"

namespace luka::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kDefaultPresets = "dense,lined,clustered,mixed(8,8)";

// The WikiSalad files: --file in order, or every .json of --data in Table 1's order.
std::vector<fs::path> question_files(const ArgParser& args) {
  std::vector<fs::path> files;
  for (const std::string& f : args.get_all("file")) files.emplace_back(f);
  if (args.has("data")) {
    const fs::path dir = args.get("data");
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(dir.string() + ": --data must name a folder of WikiSalad .json files");
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") found.push_back(e.path());
    if (found.empty()) throw Error(dir.string() + ": no .json files in the folder");
    std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) {
      const int ra = eval::difficulty_rank(eval::difficulty_of(a.stem().string()));
      const int rb = eval::difficulty_rank(eval::difficulty_of(b.stem().string()));
      return ra != rb ? ra < rb : a.filename() < b.filename();
    });
    files.insert(files.end(), found.begin(), found.end());
  }
  if (files.empty()) throw UsageError("give --data DIR (a folder of WikiSalad files) or --file FILE");
  return files;
}

// A resumed run's settings against the results already in `out_dir`: the same evaluation, model,
// dtype, answer length, system prompt, query-agnostic setting and weights, and each preset run
// before with the same config (those not asked for now are kept in `run_info`).
void check_resume(const fs::path& out_dir, const fs::path& run_path, bool query_agnostic, const eval::ResultsFile& previous,
                  json& run_info) {
  if (fs::exists(run_path)) {
    const json before = read_json_file(run_path, "run settings");
    for (const char* key : {"evaluation", "model", "dtype", "max_new_tokens", "system_prompt"})
      if (!before.contains(key) || before[key] != run_info[key])
        fail(out_dir.string(), std::string("its results were made with another ") + key + " (" + (before.contains(key) ? before[key].dump() : "none") +
                                   "); give another --out, or --restart to discard them");
    if (before.value("query_agnostic", false) != query_agnostic)
      fail(out_dir.string(), std::string("its results were made ") + (query_agnostic ? "without" : "with") +
                                 " --query-agnostic; give another --out, or --restart to discard them");
    // Runs from before --weights existed used the dequantized weights.
    if (before.value("weights", std::string("dequantized")) != run_info["weights"].get<std::string>())
      fail(out_dir.string(), "its results were made with --weights " + before.value("weights", std::string("dequantized")) +
                                 "; give another --out, or --restart to discard them");
    if (before.contains("presets") && before["presets"].is_object())
      for (const auto& [name, c] : before["presets"].items()) {
        if (run_info["presets"].contains(name) && run_info["presets"][name] != c)
          fail(out_dir.string(), "its results for preset " + name + " were made with another config; give another --out, or --restart");
        if (!run_info["presets"].contains(name)) run_info["presets"][name] = c;
      }
  } else if (!previous.records.empty()) {
    fail(out_dir.string(), "results.jsonl is there without run.json; give another --out, or --restart to discard it");
  }
}

int run_eval_wikisalad(int argc, char** argv) {
  ArgParser args("eval wikisalad",
                 "[--model PATH] (--data DIR | --file F...) [--examples N] [--presets LIST] [--out DIR]",
                 "Exact match on WikiSalad's interwoven-topic questions, per preset and difficulty, as the LuKA\n"
                 "paper's Table 1: each question is asked on its own after its example's whole prompt, through the\n"
                 "chat template with the system prompt \"You are a helpful assistant that answers questions based on\n"
                 "the given context. Answer in a few words or a short phrase. Do not include explanations.\" and the\n"
                 "user message \"{context}\\n\\nQuestion: {question}\\nAnswer:\"; greedy decoding; lenient exact match\n"
                 "(lower case, no punctuation, articles or extra spaces; equal, or either contains the other;\n"
                 "unanswerable questions score 0). Prints the table; writes OUT/results.jsonl (one line per\n"
                 "question), OUT/summary.json and OUT/run.json. A stopped run started again with the same\n"
                 "settings resumes where it was.");
  args.option("model", "PATH", kModelOptionHelp)
      .option("data", "DIR", "a folder of WikiSalad .json files (all of them, easy to very_hard)")
      .option("file", "F", "a WikiSalad .json file (repeatable; with or instead of --data)")
      .option("examples", "N", "examples per file (the paper's Table 1 used 10)", 10)
      .range(1, 1000000)
      .option("first", "K", "the first example of each file (0-based)", 0)
      .range(0, 1000000)
      .option("presets", "LIST", "comma-separated presets (dense, lined, clustered, mixed(a,b), paper, authors_eval, auto:FILE) or\n"
              "layers-config .json files; one table column each (a file's headed by its file name)", kDefaultPresets)
      .option("set", "SPEC", "a config override applied to every preset (repeatable), e.g. \"top_k=8\"")
      .option("max-new-tokens", "N", "answer length limit", 100)
      .range(1, 100000)
      .option("out", "DIR", "where results go", "wikisalad-eval")
      .flag("query-agnostic",
            "prefill each example's context before the question is seen, as kvpress evaluates: a press\n"
            "compresses the context alone, and the question attends to what it kept")
      .flag("restart", "discard the results already in OUT instead of resuming")
      .flag("quiet", "no progress on standard error");
  add_compute_options(args);
  add_device_option(args);
  add_weights_option(args);
  args.epilog(std::string("example:\n  luka eval wikisalad --data ../shared/data/wikisalad --presets \"dense,clustered,mixed(8,8)\"\n\n") +
              kEnvironmentHelp);
  if (!args.parse(argc, argv, 3)) return 0;
  const std::int64_t examples = args.get_int("examples");
  const std::int64_t first = args.get_int("first");
  const std::int64_t max_new = args.get_int("max-new-tokens");
  const std::vector<std::string> presets = split_presets(args.get("presets"));
  const std::vector<std::string> overrides = args.get_all("set");
  const fs::path out_dir = args.get("out");

  const std::vector<fs::path> files = question_files(args);
  std::vector<eval::QaQuestion> questions;
  for (const fs::path& f : files) {
    auto q = eval::load_qa_questions(f, static_cast<int>(first), static_cast<int>(examples));
    questions.insert(questions.end(), q.begin(), q.end());
  }
  if (questions.empty()) throw Error("the chosen examples have no questions");

  const fs::path path = resolve_model_path(args);
  const Tokenizer tokenizer = Tokenizer::load(path);
  const std::shared_ptr<const Backend> device = device_option(args);
  const auto model = Model::load(path, load_options(args, *device));
  const std::int64_t n_layers = model->config().num_layers;
  std::map<std::string, LukaConfig> configs;
  for (const std::string& p : presets) configs.emplace(p, preset_config(p, n_layers, overrides));

  // The prompts, checked against the context before anything runs; query-agnostic: with the ids
  // of each context, prefilled before its question.
  const bool query_agnostic = args.get_flag("query-agnostic");
  std::vector<eval::QaPrompt> prompts;
  for (const eval::QaQuestion& q : questions) {
    prompts.push_back(eval::qa_prompt(tokenizer, q, query_agnostic));
    check_context(model->config().max_position_embeddings, 0, static_cast<std::int64_t>(prompts.back().ids.size()), max_new);
  }

  // What the results depend on; a resume must match it.
  json run_info = {{"evaluation", "wikisalad"},
                   {"model", model_identity(path)},
                   {"dtype", args.get("dtype")},
                   {"weights", to_string(model->weight_format())},
                   {"max_new_tokens", max_new},
                   {"system_prompt", eval::kQaSystemPrompt},
                   {"presets", json::object()}};
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
  eval::ResultsFile previous = eval::read_results(results_path);
  check_resume(out_dir, run_path, query_agnostic, previous, run_info);
  write_file_atomically(run_path, run_info.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  if (fs::exists(results_path) && fs::file_size(results_path) != previous.valid_bytes) fs::resize_file(results_path, previous.valid_bytes);
  std::set<std::string> done;
  for (const eval::QaRecord& r : previous.records) done.insert(eval::record_key(r));

  std::size_t todo = 0;
  for (const std::string& p : presets)
    for (const eval::QaQuestion& q : questions) todo += done.count(eval::record_key(p, q.file, q.example, q.question)) ? 0 : 1;
  const bool quiet = args.get_flag("quiet");
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (!quiet)
    std::fprintf(stderr, "%zu questions x %zu presets from %zu files; %zu answered already in %s, %zu to go\n", questions.size(),
                 presets.size(), files.size(), presets.size() * questions.size() - todo, results_path.string().c_str(), todo);

  std::ofstream results(results_path, std::ios::binary | std::ios::app);
  if (!results) fail(results_path.string(), "cannot open for appending");
  std::vector<eval::QaRecord> records = previous.records;
  RunSession session(device, model, &tokenizer);
  const std::vector<std::int32_t> stop_ids = stop_token_ids(model->config().eos_token_ids, tokenizer);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::size_t answered = 0;
  auto last_print = t0;
  for (std::size_t pi = 0; pi < presets.size(); ++pi) {
    const std::string& preset = presets[pi];
    const LukaConfig& config = configs.at(preset);
    session.use(config);
    int matches = 0, scored = 0;
    for (std::size_t qi = 0; qi < questions.size(); ++qi) {
      const eval::QaQuestion& q = questions[qi];
      if (done.count(eval::record_key(preset, q.file, q.example, q.question))) continue;
      const eval::QaRecord r = eval::answer_question(session, tokenizer, preset, q, prompts[qi], max_new, stop_ids);
      results << to_json(r).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      results.flush();
      if (!results) fail(results_path.string(), "write failed (disk full?)");
      records.push_back(r);
      ++answered;
      ++scored;
      matches += r.match ? 1 : 0;
      const bool preset_done = qi + 1 == questions.size();
      if (!quiet && (tty || preset_done || Clock::now() - last_print > std::chrono::seconds(10))) {
        last_print = Clock::now();
        const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
        const double per = elapsed / static_cast<double>(answered);
        std::fprintf(stderr, "%s[%s %zu/%zu] %zu/%zu questions, EM %.1f%% of %d, %.1f s per question, %s left%s", tty ? "\r\033[K" : "",
                     preset.c_str(), pi + 1, presets.size(), answered, todo, 100.0 * matches / scored, scored, per,
                     duration_text(per * static_cast<double>(todo - answered)).c_str(), tty ? "" : "\n");
        std::fflush(stderr);
      }
    }
  }
  if (!quiet && tty && answered) std::fputc('\n', stderr);

  const eval::EmTable table = eval::tabulate(records, presets);
  const std::string text = eval::format_table(table);
  std::fwrite(text.data(), 1, text.size(), stdout);
  json summary = {{"run", run_info}, {"table", eval::table_json(table)}};
  write_file_atomically(out_dir / "summary.json", summary.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  if (!quiet) std::fprintf(stderr, "wrote %s and %s\n", results_path.string().c_str(), (out_dir / "summary.json").string().c_str());
  return 0;
}

}  // namespace

int run_eval(int argc, char** argv) {
  const std::string usage =
      "usage: luka eval <evaluation> [options]\n\n"
      "evaluations:\n"
      "  wikisalad  exact match on WikiSalad's interwoven-topic questions, per preset and difficulty\n"
      "  niah       needle in a haystack: a grid of context length x needle depth, per preset\n"
      "  ruler      RULER's synthetic long-context tasks, per task and averaged, per preset\n\n"
      "'luka eval <evaluation> --help' describes its options.\n";
  if (argc < 3) {
    std::fputs(usage.c_str(), stderr);
    return 2;
  }
  const std::string what = argv[2];
  if (what == "--help" || what == "-h") {
    std::fputs(usage.c_str(), stdout);
    return 0;
  }
  if (what == "wikisalad") return run_eval_wikisalad(argc, argv);
  if (what == "niah") return run_eval_niah(argc, argv);
  if (what == "ruler") return run_eval_ruler(argc, argv);
  throw UsageError("unknown evaluation '" + what + "' (see luka eval --help)");
}

}  // namespace luka::cli
