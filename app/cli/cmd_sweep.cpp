// luka sweep: a grid over LuKA config keys, each point one run of `luka perplexity` or `luka eval
// wikisalad` (core/eval/sweep.h). The runs are listed in OUT/manifest.json and each writes
// OUT/items/<i>.json, so a sweep runs here one run after another (resuming where it stopped), or
// as a Slurm job array from --plan, one run per task; --merge collects either into a CSV table,
// a JSON file and a line plot (PNG, SVG, PDF).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "core/eval/sweep.h"
#include "core/util/output_file.h"
#include "core/util/text_file.h"
#include "viz/line_plot.h"

extern char** environ;

namespace luka::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json settings_json(const eval::Settings& s) {
  json out = json::array();
  for (const auto& [k, v] : s) out.push_back({k, v});
  return out;
}

eval::Settings settings_from(const json& j) {
  eval::Settings s;
  for (const json& kv : j) s.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
  return s;
}

fs::path self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("luka sweep", "cannot find its own executable: " + ec.message());
  return p;
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  const std::size_t nl = t.find_last_of("\r\n");
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

struct Manifest {
  fs::path dir;
  json doc;
  eval::Metric metric = eval::Metric::kPerplexity;
  std::vector<eval::GridAxis> axes;
  std::size_t items() const { return doc.at("items").size(); }
};

Manifest read_manifest(const fs::path& dir) {
  Manifest m;
  m.dir = dir;
  m.doc = read_json_file(dir / "manifest.json", "sweep manifest");
  try {
    m.metric = eval::parse_metric(m.doc.at("metric").get<std::string>());
    m.axes = eval::parse_grid(m.doc.at("grid").get<std::string>());
    (void)m.doc.at("items").size();
  } catch (const json::exception& e) {
    fail((dir / "manifest.json").string(), std::string("not a sweep manifest (") + e.what() + ")");
  }
  return m;
}

fs::path item_result(const Manifest& m, std::size_t i) { return m.dir / "items" / (std::to_string(i) + ".json"); }

// Runs item i as its own process (the luka named in the manifest) and writes its result file.
void run_item(const Manifest& m, std::size_t i) {
  if (i >= m.items())
    throw UsageError("--run-item " + std::to_string(i) + " is out of range (the sweep has " + std::to_string(m.items()) + " runs)");
  const json& item = m.doc["items"][i];
  const fs::path items = m.dir / "items";
  fs::create_directories(items);
  const fs::path out = items / (std::to_string(i) + ".out"), log = items / (std::to_string(i) + ".log");
  std::vector<std::string> args = {m.doc.at("luka").get<std::string>()};
  for (const json& a : item.at("args")) args.push_back(a.get<std::string>());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) fail(args[0], std::string("cannot start: ") + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string label = item.at("label").get<std::string>();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : "killed by signal " + std::to_string(WTERMSIG(status));
    fail("run " + std::to_string(i) + " (" + label + ")", "failed (" + how + "): " + last_line(read_text_file(log, "run log")) + "; see " + log.string());
  }
  json output;
  try {
    output = m.metric == eval::Metric::kPerplexity ? json::parse(read_text_file(out, "run output"))
                                                   : read_json_file(items / std::to_string(i) / "summary.json", "run summary");
  } catch (const json::exception& e) {
    fail(out.string(), std::string("the run printed no JSON result (") + e.what() + ")");
  }
  const json result = {{"index", i},
                       {"label", label},
                       {"settings", item.at("settings")},
                       {"baseline", item.value("baseline", false)},
                       {"value", eval::metric_value(m.metric, output)},
                       {"output", output}};
  write_file_atomically(item_result(m, i), result.dump(2) + "\n");
}

// Collects every result into results.csv, results.json and plot.{png,svg,pdf}; prints the table.
int merge(const Manifest& m, const std::string& x_key, const std::string& title) {
  std::vector<eval::SweepResult> results;
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < m.items(); ++i) {
    if (!fs::exists(item_result(m, i))) {
      missing.push_back(i);
      continue;
    }
    const json r = read_json_file(item_result(m, i), "run result");
    eval::SweepResult s;
    s.index = static_cast<int>(i);
    s.settings = settings_from(r.at("settings"));
    s.baseline = r.value("baseline", false);
    s.value = r.at("value").get<double>();
    results.push_back(std::move(s));
  }
  if (!missing.empty()) {
    std::string list;
    for (const std::size_t i : missing) list += (list.empty() ? "" : ", ") + std::to_string(i);
    fail(m.dir.string(), std::to_string(missing.size()) + " of " + std::to_string(m.items()) + " runs have no result yet (" + list +
                             "); run them (luka sweep --run-item I --out DIR) before merging");
  }
  write_file_atomically(m.dir / "results.csv", eval::results_csv(m.axes, m.metric, results));
  json all = json::array();
  for (const auto& r : results)
    all.push_back({{"index", r.index}, {"settings", settings_json(r.settings)}, {"baseline", r.baseline}, {"value", r.value}});
  write_file_atomically(m.dir / "results.json", json({{"metric", eval::to_string(m.metric)}, {"grid", m.doc["grid"]}, {"results", all}}).dump(2) + "\n");

  // One line per setting of the other keys, the x key along the axis.
  // A bad --x is the command line's; a bad x in the manifest, the manifest's.
  const std::string x = x_key.empty() ? eval::choose_x_axis(m.axes, m.doc.value("x", ""))
                                      : option_value("x", [&] { return eval::choose_x_axis(m.axes, x_key); });
  const eval::GridAxis* xa = nullptr;
  for (const auto& a : m.axes)
    if (a.key == x) xa = &a;
  bool numeric = true;
  for (const std::string& v : xa->values) {
    char* end = nullptr;
    std::strtod(v.c_str(), &end);
    numeric = numeric && end == v.c_str() + v.size();
  }
  viz::LinePlot plot;
  plot.title = title.empty() ? m.doc.value("title", std::string()) : title;
  if (plot.title.empty()) plot.title = std::string(eval::metric_label(m.metric)) + " against " + x;
  plot.x_label = x;
  plot.y_label = eval::metric_label(m.metric);
  if (!numeric) plot.x_categories = xa->values;
  // Keys with one value are said once, under the title, not in every line's label.
  std::set<std::string> constant;
  eval::Settings fixed;
  for (const auto& a : m.axes)
    if (a.values.size() == 1 && a.key != x) constant.insert(a.key), fixed.emplace_back(a.key, a.values[0]);
  if (!fixed.empty()) plot.subtitle = eval::settings_caption(fixed);
  std::map<std::string, std::size_t> series_of;
  for (const auto& r : results) {
    if (r.baseline) {
      plot.reference_y = r.value;
      plot.reference_label = eval::settings_caption(r.settings);
      continue;
    }
    eval::Settings others;  // the keys that vary, but x
    std::string xv;
    for (const auto& [k, v] : r.settings) {
      if (k == x)
        xv = v;
      else if (!constant.count(k))
        others.emplace_back(k, v);
    }
    const std::string label = others.empty() ? std::string(eval::metric_label(m.metric)) : eval::settings_caption(others);
    auto [it, added] = series_of.emplace(label, plot.series.size());
    if (added) plot.series.push_back({label, {}, {}});
    viz::LineSeries& s = plot.series[it->second];
    const double xd = numeric ? std::strtod(xv.c_str(), nullptr)
                              : static_cast<double>(std::find(xa->values.begin(), xa->values.end(), xv) - xa->values.begin());
    s.x.push_back(xd);
    s.y.push_back(r.value);
  }
  for (const char* ext : {".png", ".svg", ".pdf"}) viz::write_line_plot(plot, m.dir / (std::string("plot") + ext));

  int width = 8;
  for (const auto& r : results) width = std::max(width, static_cast<int>(eval::settings_label(r.settings).size()));
  std::printf("%-5s %-*s  %s\n", "run", width, "settings", eval::metric_label(m.metric));
  for (const auto& r : results)
    std::printf("%-5s %-*s  %.4f\n", r.baseline ? "base" : std::to_string(r.index).c_str(), width, eval::settings_label(r.settings).c_str(), r.value);
  std::fprintf(stderr, "wrote %s, results.json and plot.png, plot.svg, plot.pdf\n", (m.dir / "results.csv").string().c_str());
  return 0;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

int run_sweep(int argc, char** argv) {
  // Everything after "--" goes to the metric command.
  int split = argc;
  for (int i = 2; i < argc; ++i)
    if (std::string(argv[i]) == "--") {
      split = i;
      break;
    }
  std::vector<std::string> base_args;
  for (int i = split + 1; i < argc; ++i) base_args.emplace_back(argv[i]);

  ArgParser args("sweep", "--grid SPEC --metric perplexity|eval --out DIR [options] -- METRIC OPTIONS...",
                 "Runs `luka perplexity` or `luka eval wikisalad` once per point of a grid over LuKA config keys\n"
                 "(and \"preset\"), each point a process of its own writing OUT/items/<i>.json, then merges the\n"
                 "results into OUT/results.csv, OUT/results.json and a line plot OUT/plot.{png,svg,pdf}: the\n"
                 "metric against one key, one line per setting of the others. Stopped sweeps resume. With --plan\n"
                 "the runs go to a Slurm job array instead: submit OUT/sweep.sbatch, then --merge.");
  args.option("grid", "SPEC", "axes separated by ';', values by ',', e.g.\n"
              "\"compressor=mean,attention_weighted;rule=top_frac;top_frac=0,0.0625,0.25,1\"")
      .option("metric", "NAME", "perplexity (luka perplexity --json) or eval (luka eval wikisalad: exact match)")
      .option("out", "DIR", "the sweep's folder (manifest, results, plot)")
      .option("baseline", "SPEC", "one more run drawn as a dashed reference line, e.g. \"preset=dense\"")
      .option("x", "KEY", "the key along the plot's x axis", Default::described_text("the last numeric axis"))
      .option("title", "TEXT", "the plot's title")
      .flag("plan", "write OUT/manifest.json and a Slurm job-array script OUT/sweep.sbatch; run nothing")
      .option("slurm-cpus", "N", "CPUs per array task (with --plan)", 2)
      .range(1, 1e6)
      .option("slurm-gpus", "N", "GPUs per array task (with --plan; 0 = a CPU node)", 0)
      .range(0, 1e6)
      .option("slurm-time", "HH:MM:SS", "time limit per array task (with --plan)", "02:00:00")
      .option("slurm-partition", "NAME", "Slurm partition (with --plan)", Default::described_text("the cluster's"))
      .option("run-item", "I", "run item I of OUT's manifest (what each array task does)", Default::integer())
      .range(0, 1e12)
      .flag("merge", "collect OUT's results into the table and plot (after an array job)")
      .flag("restart", "discard OUT's manifest and results instead of resuming")
      .flag("quiet", "no progress on standard error");
  args.epilog(
      "The metric's options follow \"--\": they are the same in every run; the grid adds --preset and --set.\n\n"
      "examples:\n"
      "  luka sweep --metric perplexity --out fig4 --baseline preset=dense \\\n"
      "      --grid \"preset=clustered;compressor=mean,attention_weighted,random;rule=top_frac;top_frac=0,0.0625,0.25,1\" \\\n"
      "      -- --text-file emma.txt --max-tokens 2048 --prompt-tokens 1024\n"
      "  luka sweep --metric eval --out em --grid \"preset=lined,clustered,mixed(8,8)\" -- --data wikisalad/ --examples 2\n"
      "  luka sweep ... --plan && sbatch fig4/sweep.sbatch     # later: luka sweep --merge --out fig4");
  if (!args.parse(split, argv, 2)) return 0;
  // Slurm's time formats (sbatch --time): M, M:S, H:M:S, D-H, D-H:M and D-H:M:S; anything else
  // would fail only when the job array is submitted.
  if (!std::regex_match(args.get("slurm-time"), std::regex(R"((\d+-)?\d+(:\d+){0,2})")))
    throw UsageError("--slurm-time: '" + args.get("slurm-time") + "' is not a Slurm time limit (HH:MM:SS, MM or D-HH:MM:SS)");
  if (!args.has("out")) throw UsageError("--out DIR is required");
  const fs::path dir = fs::absolute(args.get("out"));
  const bool quiet = args.get_flag("quiet");

  if (args.has("run-item")) {
    const std::int64_t i = args.get_int("run-item");
    run_item(read_manifest(dir), static_cast<std::size_t>(i));
    return 0;
  }
  if (args.get_flag("merge")) return merge(read_manifest(dir), args.get("x"), args.get("title"));

  if (!args.has("grid")) throw UsageError("--grid SPEC is required");
  if (!args.has("metric")) throw UsageError("--metric perplexity|eval is required");
  const eval::Metric metric = option_value("metric", [&] { return eval::parse_metric(args.get("metric")); });
  const std::vector<eval::GridAxis> axes = option_value("grid", [&] { return eval::parse_grid(args.get("grid")); });
  if (!args.get("x").empty()) option_value("x", [&] { (void)eval::choose_x_axis(axes, args.get("x")); });
  for (const std::string& a : base_args)
    if (a == "--preset" || a == "--presets" || a == "--json" || a == "--out")
      throw UsageError("the metric options must not hold " + a + ": the sweep sets it");

  // The manifest: every run's command line.
  json items = json::array();
  std::vector<std::pair<eval::Settings, bool>> points;
  for (eval::Settings& s : eval::expand_grid(axes)) points.emplace_back(std::move(s), false);
  if (args.has("baseline")) {
    eval::Settings base;
    for (const eval::GridAxis& a : option_value("baseline", [&] { return eval::parse_grid(args.get("baseline")); })) {
      if (a.values.size() != 1) throw UsageError("--baseline takes one value per key");
      base.emplace_back(a.key, a.values[0]);
    }
    points.emplace_back(std::move(base), true);
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& [s, baseline] = points[i];
    json a = eval::item_arguments(metric, base_args, s, (dir / "items" / std::to_string(i)).string());
    items.push_back({{"index", i}, {"label", eval::settings_label(s)}, {"settings", settings_json(s)}, {"baseline", baseline}, {"args", a}});
  }
  const json manifest = {{"metric", eval::to_string(metric)}, {"grid", args.get("grid")}, {"luka", self_exe().string()},
                         {"base_args", base_args},           {"x", args.get("x")},       {"title", args.get("title")},
                         {"items", items}};
  std::error_code ec;
  if (args.get_flag("restart")) fs::remove_all(dir, ec);
  fs::create_directories(dir / "items", ec);
  if (ec) fail(dir.string(), "cannot create the folder: " + ec.message());
  const OutputLock lock(dir / "manifest.json");
  if (fs::exists(dir / "manifest.json")) {
    const json before = read_json_file(dir / "manifest.json", "sweep manifest");
    for (const char* key : {"metric", "grid", "base_args"})
      if (!before.contains(key) || before[key] != manifest[key])
        fail(dir.string(), std::string("holds a sweep with another ") + key + " (" + (before.contains(key) ? before[key].dump() : "none") +
                               "); give another --out, or --restart to discard it");
    if (before.value("items", json::array()).size() != items.size())
      fail(dir.string(), "holds a sweep with another baseline; give another --out, or --restart to discard it");
  }
  write_file_atomically(dir / "manifest.json", manifest.dump(2) + "\n");

  if (args.get_flag("plan")) {
    const std::int64_t cpus = args.get_int("slurm-cpus"), gpus = args.get_int("slurm-gpus");
    std::string s = "#!/bin/bash\n# luka sweep: one run of " + dir.string() + "/manifest.json per array task; then\n#   " +
                    self_exe().string() + " sweep --merge --out " + dir.string() + "\n";
    s += "#SBATCH --job-name=luka-sweep\n";
    s += "#SBATCH --array=0-" + std::to_string(items.size() - 1) + "\n";
    s += "#SBATCH --cpus-per-task=" + std::to_string(cpus) + "\n";
    if (gpus > 0) s += "#SBATCH --gres=gpu:" + std::to_string(gpus) + "\n";
    s += "#SBATCH --time=" + args.get("slurm-time") + "\n";
    if (args.has("slurm-partition")) s += "#SBATCH --partition=" + args.get("slurm-partition") + "\n";
    s += "#SBATCH --output=" + (dir / "items" / "slurm-%A_%a.out").string() + "\n";
    s += "exec " + shell_quote(self_exe().string()) + " sweep --run-item \"$SLURM_ARRAY_TASK_ID\" --out " + shell_quote(dir.string()) + "\n";
    write_file_atomically(dir / "sweep.sbatch", s);
    fs::permissions(dir / "sweep.sbatch", fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add, ec);
    std::printf("%zu runs planned in %s\nsubmit: sbatch %s\nmerge:  luka sweep --merge --out %s\n", items.size(),
                (dir / "manifest.json").string().c_str(), (dir / "sweep.sbatch").string().c_str(), dir.string().c_str());
    return 0;
  }

  // Here, one run after another; runs with a result are done.
  const Manifest m = read_manifest(dir);
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < m.items(); ++i)
    if (!fs::exists(item_result(m, i))) todo.push_back(i);
  if (!quiet) std::fprintf(stderr, "%zu runs, %zu done already, %zu to go\n", m.items(), m.items() - todo.size(), todo.size());
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t k = 0; k < todo.size(); ++k) {
    const std::size_t i = todo[k];
    if (!quiet) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::string eta;
      if (k > 0) {
        const double left = elapsed / static_cast<double>(k) * static_cast<double>(todo.size() - k);
        char buf[48];
        std::snprintf(buf, sizeof buf, ", about %.0f min left", std::ceil(left / 60));
        eta = buf;
      }
      std::fprintf(stderr, "[%zu/%zu] run %zu: %s%s\n", k + 1, todo.size(), i, m.doc["items"][i]["label"].get<std::string>().c_str(), eta.c_str());
    }
    run_item(m, i);
  }
  return merge(m, args.get("x"), args.get("title"));
}

}  // namespace luka::cli
