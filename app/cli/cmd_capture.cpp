// luka capture: runs a prompt under a LuKA config and records the run to an HDF5 capture
// (docs/capture-format.md), with a progress line and the size written.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/luka_options.h"
#include "app/cli/prompt_input.h"
#include "captures/recorder.h"
#include "captures/pipeline.h"
#include "captures/writer.h"
#include "core/eval/calibration.h"
#include "core/util/error.h"
#include "core/util/text_file.h"
#include "core/util/version.h"
#include "core/device/device.h"
#include "core/generate/sampler.h"
#include "core/run/run_loop.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/run/session.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"

namespace luka::cli {
namespace {

std::string megabytes(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::uint64_t size_on_disk(const std::filesystem::path& p) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(p, ec);
  return ec ? 0 : n;
}

// Records the run as it goes: the prefill maps, then each decode step with the tokens since the
// last one (the step's query token first).
struct Recording final : capture::RecordingObserver {
  Recording(capture::CaptureRecorder* recorder, const Tokenizer& t)
      : RecordingObserver(recorder, [&t](std::int32_t id) { return t.token_bytes(id); }), tokenizer(&t) {}
  const Tokenizer* tokenizer;
  std::function<void(const std::string&, bool)> progress;
  std::int64_t total_steps = 0;
  std::string text;
  std::chrono::steady_clock::time_point decode_start, last_step_end;
  void prefill_begin(std::int64_t tokens) override {
    progress("prefill of " + std::to_string(tokens) + " tokens", true);
    RecordingObserver::prefill_begin(tokens);
  }
  void prefill_end(std::int64_t tokens, double seconds) override {
    RecordingObserver::prefill_end(tokens, seconds);
    decode_start = std::chrono::steady_clock::now();
  }
  bool token(const ChosenToken& t) override {
    if (!t.stop) text += tokenizer->token_bytes(t.id);
    return RecordingObserver::token(t);
  }
  void after_step(std::int64_t step, double seconds) override {
    RecordingObserver::after_step(step, seconds);
    last_step_end = std::chrono::steady_clock::now();
    progress("decode step " + std::to_string(step) + "/" + std::to_string(total_steps), step == total_steps);
  }
};

// luka capture's options (after --model).
void add_capture_options(ArgParser& args) {
  add_prompt_options(args);
  args.option("out", "FILE", "the capture file to write (replaced if it exists)")
      .option("max-new-tokens", "N", "tokens to generate (N - 1 decode steps are recorded)", 64)
      .range(1, 1000000)
      .flag("ignore-eos", "generate all --max-new-tokens tokens, past end-of-sequence tokens (a run of fixed length)")
      .option("max-prompt-tokens", "N", "keep only the first N prompt tokens (segments are clipped)", Default::integer())
      .range(1, 1e12)
      .option("record", "SPEC", "what to record: all, maps, rows, covers, none (run only), or e.g.\n"
              "\"layers=0-3,8;heads=0,2;parts=maps,covers;map_cap=2048;map_min=64\" (layers and heads:\n"
              "layer lists, docs/luka-config.md#layer-lists)", "all")
      .option("deflate", "LEVEL", "compression: shuffle + deflate level 0-9 (1: fast run-length + Huffman), or none",
              Default::described_text("1, or --record's deflate="))
      .option("schedule", "SPEC", "LuKA mode changes during decoding (as for luka generate)")
      .option("calibration", "FILE", "attach a luka calibrate file of this model: the Studio's Head scores tab and\n"
                                      "luka inspect --calibration show its per-head scores beside the run")
      .flag("quiet", "no progress line");
  add_compute_options(args, "CPU threads for the model (and the recording's compression)");
  add_device_option(args);
  add_static_step_option(args);
  add_weights_option(args);
  add_sampling_options(args);
  add_luka_options(args);
  args.epilog(std::string("examples:\n"
                          "  luka capture --prompt-file assets/prompts/demo.json --preset paper --out demo.h5\n"
                          "  luka capture --wikisalad ../shared/data/wikisalad/easy_2topic_short.json --example 3 \\\n"
                          "      --preset clustered --set dense_shadow=true --record \"layers=0-3\" --out ws3.h5\n"
                          "  luka inspect demo.h5\n\n") +
              kPromptOptionsHelp + "\n\n" + kLukaOptionsHelp + "\n\n" + kEnvironmentHelp);
}

// --record's spec (or all, for a run that records nothing) with --deflate's level.
capture::RecordSpec record_spec(const ArgParser& args, bool record) {
  capture::RecordSpec spec =
      option_value("record", [&] { return capture::RecordSpec::parse(record ? args.get("record") : "all"); });
  if (args.has("deflate")) {
    const std::string level = args.get("deflate");
    spec.deflate = option_value("deflate", [&] {
      try {
        return capture::RecordSpec::parse("deflate=" + level).deflate;
      } catch (const Error&) {
        throw UsageError("--deflate: expected a level 0-9 or none, got '" + level + "'");
      }
    });
  }
  return spec;
}

// The prompt, encoded only as far as the run can use it: the context (from the model's config,
// before the weights load), or --max-prompt-tokens when that is fewer (segments clipped).
PromptInput capture_prompt(const ArgParser& args, const Tokenizer& tokenizer, const std::filesystem::path& path,
                           std::int64_t max_new) {
  const std::int64_t keep = args.has("max-prompt-tokens") ? args.get_int("max-prompt-tokens") : INT64_MAX;
  if (keep < 1) throw UsageError("--max-prompt-tokens must be >= 1");
  const std::int64_t context = model_context(path);
  PromptInput prompt = build_prompt(args, tokenizer, std::min(prompt_token_limit(context, max_new), static_cast<std::size_t>(keep)));
  if (keep < static_cast<std::int64_t>(prompt.ids.size())) {
    prompt.ids.resize(static_cast<std::size_t>(keep));
    prompt.segment.resize(static_cast<std::size_t>(keep));
    for (capture::Segment& s : prompt.segments) {
      s.begin = std::min(s.begin, keep);
      s.end = std::min(s.end, keep);
    }
    prompt.source += " (first " + std::to_string(keep) + " tokens)";
    prompt.complete = true;  // what runs is the first `keep` tokens, whole
  }
  check_prompt_context(prompt, context, max_new);  // before the weights load
  return prompt;
}

// The capture's manifest: the model, tokenizer and config, and how this run was made.
capture::Manifest capture_manifest(const ArgParser& args, const Model& model, const Tokenizer& tokenizer,
                                   const LukaConfig& luka, const SamplingParams& sampling, const capture::RecordSpec& spec,
                                   const Backend& device, const std::string& calibration_text,
                                   const PromptInput& prompt, std::int64_t n, std::int64_t max_new) {
  capture::Manifest manifest = capture::make_manifest(model, tokenizer, luka);
  manifest.seed = static_cast<std::int64_t>(sampling.seed);
  manifest.created = utc_now();
  manifest.tool_version = LUKA_VERSION;
  manifest.git_revision = git_revision();
  manifest.record = spec.to_string();
  manifest.device = device.name();
  if (!calibration_text.empty()) manifest.calibration = nlohmann::json::parse(calibration_text).dump();  // compact
  nlohmann::json g;
  g["prompt"] = prompt.source;
  if (!prompt.question_topic.empty()) g["question_topic"] = prompt.question_topic;  // the analysis's decode topic
  g["prompt_tokens"] = n;
  g["max_new_tokens"] = max_new;
  g["temperature"] = sampling.temperature;
  g["top_k"] = sampling.top_k;
  g["top_p"] = sampling.top_p;
  g["schedule"] = args.get("schedule");
  manifest.generation = g.dump();
  return manifest;
}

}  // namespace

int run_capture(int argc, char** argv) {
  ArgParser args("capture", "[--model PATH] (--prompt STR | --prompt-file F | --wikisalad F --example N) --out run.h5 [options]",
                 "Runs the prompt (prefill, then greedy or sampled decoding) under a LuKA config and records\n"
                 "the run to an HDF5 capture: the prefill attention of every recorded layer and head as a\n"
                 "max-pooled pyramid, and per decode step each layer's mode, effective attention rows,\n"
                 "covers, refined pages, heavy hitters and (with dense_shadow) fidelity. Every step is\n"
                 "flushed: a run that is killed leaves a file readable up to its last complete step.");
  args.option("model", "PATH", kModelOptionHelp);
  add_capture_options(args);
  if (!args.parse(argc, argv, 2)) return 0;
  // --record none runs the same code path without recording (the baseline of bench/run_capture_bench.sh).
  const bool record = args.get("record") != "none";
  if (record && !args.has("out")) throw UsageError("--out FILE is required");
  const std::int64_t max_new = args.get_int("max-new-tokens");
  const capture::RecordSpec spec = record_spec(args, record);

  const SamplingParams sampling = sampling_options(args);
  // Read before the model, so a bad file fails fast; its shape is checked against the model below.
  std::optional<eval::Calibration> calibration;
  std::string calibration_text;
  if (args.has("calibration")) {
    calibration_text = read_text_file(args.get("calibration"), "calibration file");
    calibration = eval::parse_calibration(calibration_text, args.get("calibration"));
  }

  const auto path = resolve_model_path(args);
  const Tokenizer tokenizer = Tokenizer::load(path);
  const PromptInput prompt = capture_prompt(args, tokenizer, path, max_new);
  const std::filesystem::path out = args.get("out");

  // Recording keeps every core for the model: the pyramids, half conversion and compression run
  // on the model's threads between its steps, and the I/O thread only writes.
  RunSettings run;
  run.schedule = schedule_option(args);
  const std::shared_ptr<const Backend> device = device_option(args, /*records_steps=*/true);
  check_decode_engine_option(args, sampling.temperature);
  const auto model = Model::load(path, load_options(args, *device));
  const std::int64_t n = static_cast<std::int64_t>(prompt.ids.size());
  check_context(model->config().max_position_embeddings, 0, n, max_new);  // before the capture file exists
  RunSession run_session(device, model, &tokenizer);
  const std::int64_t n_layers = model->config().num_layers;
  if (calibration && (calibration->num_layers != n_layers || calibration->num_heads != model->config().num_heads))
    fail(args.get("calibration"), "is a calibration of a model with " + std::to_string(calibration->num_layers) + " layers and " +
                                      std::to_string(calibration->num_heads) + " heads; this one has " + std::to_string(n_layers) + " and " +
                                      std::to_string(model->config().num_heads));
  LukaConfig luka = luka_config(args, n_layers).value_or(LukaConfig::preset("dense", n_layers));
  check_schedule_option(luka, run.schedule);  // before the capture file exists
  run_session.use(luka);
  const std::vector<std::shared_ptr<LukaLayer>>& layers = run_session.layers();

  const capture::Manifest manifest =
      capture_manifest(args, *model, tokenizer, luka, sampling, spec, *device, calibration_text, prompt, n, max_new);
  // Its errors are --record's layers or heads beyond the model's.
  const capture::Layout layout = option_value("record", [&] { return capture::make_layout(*model, luka, spec, n, n + max_new); });

  const bool quiet = args.get_flag("quiet");
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::fprintf(stderr, "attention: %s\n", describe_modes(luka).c_str());
  if (record)
    std::fprintf(stderr, "recording %zu layers x %zu heads (%s) of %lld prompt tokens + %lld decode steps to %s: %s of data before compression\n",
                 layout.layers.size(), layout.heads.size(), spec.to_string().c_str(), static_cast<long long>(n),
                 static_cast<long long>(max_new - 1), out.string().c_str(),
                 megabytes(capture::estimate_bytes(layout, max_new - 1)).c_str());

  std::optional<capture::CaptureWriter> writer;
  std::optional<capture::CapturePipeline> pipeline;
  std::optional<capture::CaptureRecorder> recorder;
  if (record) {
    writer.emplace(out);
    pipeline.emplace(std::vector<capture::CaptureSink*>{&*writer});
    pipeline->set_parallel(capture::model_parallel_for());
    // On the GPU the host thread bounds a step (it launches every kernel): compress off it.
    if (device->is_cuda()) pipeline->set_step_encoding(capture::CapturePipeline::StepEncoding::kWriter);
    std::vector<capture::Token> prompt_tokens;
    for (std::int64_t i = 0; i < n; ++i)
      prompt_tokens.push_back({prompt.ids[static_cast<std::size_t>(i)], tokenizer.token_bytes(prompt.ids[static_cast<std::size_t>(i)]),
                               false, prompt.segment[static_cast<std::size_t>(i)]});
    pipeline->begin(manifest, layout, std::move(prompt_tokens), prompt.segments);
    recorder.emplace(*pipeline, layout, layers);
  }

  run.max_new_tokens = max_new;
  run.sampling = sampling;
  if (!args.get_flag("ignore-eos")) run.stop_ids = stop_token_ids(model->config().eos_token_ids, tokenizer);
  run.probabilities = true;

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto last_print = t0;
  const auto progress = [&](const std::string& what, bool force) {
    if (quiet) return;
    const auto now = Clock::now();
    if (!force && now - last_print < std::chrono::milliseconds(tty ? 200 : 5000)) return;
    last_print = now;
    std::fprintf(stderr, "%s%s, %s written, %.1f s%s", tty ? "\r\033[K" : "", what.c_str(), megabytes(size_on_disk(writer ? writer->partial_path() : out)).c_str(),
                 std::chrono::duration<double>(now - t0).count(), tty ? "" : "\n");
    std::fflush(stderr);
  };

  Recording recording(recorder ? &*recorder : nullptr, tokenizer);
  recording.progress = progress;
  recording.total_steps = max_new - 1;
  RunLoop& loop = run_session.loop();
  use_decode_engine_option(args, *device, loop);
  RunResult result;
  try {
    // The run holds the KV caches and LuKA state for the whole context, and the recording's buffers.
    result = name_out_of_memory("run", "running " + path.string() + " over " + std::to_string(n) + " prompt tokens and " +
                                           std::to_string(max_new) + " new tokens",
                                [&] { return loop.run(prompt.ids, run, &recording); });
    if (pipeline) pipeline->finish(std::move(recording.pending));
  } catch (const Error& e) {
    if (!writer || !writer->created_partial()) throw;  // refused before writing (another run holds the path)
    // The writer leaves what it wrote as a killed run leaves it: say where.
    pipeline.reset();
    if (!quiet && tty) std::fputc('\n', stderr);
    throw Error(std::string(e.what()) + "; the " + std::to_string(writer->complete_steps()) + " complete decode steps are readable in " +
                writer->partial_path().string());
  }
  const std::int64_t steps = result.decode_steps;
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!quiet && tty) std::fputc('\n', stderr);
  const double decode_s = std::chrono::duration<double>(recording.last_step_end - recording.decode_start).count();
  if (record)
    std::fprintf(stderr, "wrote %s: %s, %lld decode steps, %.3f s\n", out.string().c_str(), megabytes(size_on_disk(out)).c_str(),
                 static_cast<long long>(steps), seconds);
  else
    std::fprintf(stderr, "ran %lld decode steps without recording, %.3f s\n", static_cast<long long>(steps), seconds);
  // What a decode step costs with the recording it does (bench/ and scripts/gpu_run.sh read this).
  if (steps > 0)
    std::fprintf(stderr, "decode: %lld steps in %.3f s, %.3f ms per step\n", static_cast<long long>(steps), decode_s,
                 1e3 * decode_s / static_cast<double>(steps));
  // Of which the recording's share on the model thread, and of that the wait for the writer.
  if (steps > 0 && recorder) {
    const capture::CapturePipeline::ProducerTime p = pipeline->producer_time();
    const double per = 1e3 / static_cast<double>(steps);
    std::fprintf(stderr, "recording: %.3f ms per step on the model thread (%.3f waiting for the writer; compression on the %s)\n",
                 per * recorder->step_seconds(), per * p.wait_seconds, device->is_cuda() ? "writer's threads" : "model's threads");
  }
  std::fwrite(recording.text.data(), 1, recording.text.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace luka::cli
