// luka generate: streams a continuation of a prompt, then prints prefill and decode tokens/s.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/luka_options.h"
#include "core/luka/luka_attention.h"
#include "core/chat/chat_format.h"
#include "core/device/device.h"
#include "core/run/run_loop.h"
#include "core/run/session.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"

namespace luka::cli {

int run_generate(int argc, char** argv) {
  ArgParser args("generate", "[--model PATH] --prompt STR [--chat] [--max-new-tokens N] [sampling options]",
                 "Generates a continuation of the prompt and streams it to standard output, then prints\n"
                 "prefill and decode tokens/s to standard error. Greedy unless --temperature > 0.");
  args.option("model", "PATH", kModelOptionHelp)
      .option("prompt", "STR", "the prompt text")
      .flag("chat", "format the prompt as a chat turn (ChatML with the generation prompt)")
      .option("system", "STR", "system message (with --chat)")
      .flag("thinking", "let hybrid-thinking models think (with --chat; default: thinking off)")
      .option("max-new-tokens", "N", "stop after N generated tokens", 128)
      .range(0, 1000000)
      .flag("ignore-eos", "generate all --max-new-tokens tokens, past end-of-sequence tokens")
      .option("schedule", "SPEC", "LuKA mode changes during decoding, e.g.\n"
              "\"step=10:layers=0-7:mode=clustered;step=20:layers=all:mode=dense\" (step 1 = first decode step;\n"
              "layers: a layer list, docs/luka-config.md#layer-lists)");
  add_compute_options(args);
  add_device_option(args);
  add_weights_option(args);
  args.flag("json", "print one JSON object at the end (text, ids, timings, device) instead of streaming the text");
  add_static_step_option(args);
  args.flag("verbose", "say on standard error how each decode step is issued: eager, the static step, or a CUDA\n"
                       "graph and its kernel nodes");
  add_sampling_options(args);
  add_luka_options(args);
  args.epilog(std::string("Generation stops at the model's end-of-sequence tokens, <|im_end|>, or --max-new-tokens\n"
                          "(with --ignore-eos, only at --max-new-tokens).\n\n"
                          "example:\n  luka generate --prompt \"The capital of France is\" --max-new-tokens 20\n"
                          "  luka generate --prompt \"...\" --preset \"mixed(2,2)\" --schedule \"step=8:layers=all:mode=lined\"\n\n") +
              kLukaOptionsHelp + "\n\n" + kEnvironmentHelp);
  if (!args.parse(argc, argv, 2)) return 0;
  if (!args.has("prompt")) throw UsageError("--prompt STR is required");
  if (args.has("system") && !args.get_flag("chat")) throw UsageError("--system needs --chat");
  const std::int64_t max_new = args.get_int("max-new-tokens");

  const SamplingParams sampling = sampling_options(args);

  const auto path = resolve_model_path(args);
  const Tokenizer tokenizer = Tokenizer::load(path);
  std::string text = args.get("prompt");
  if (args.get_flag("chat")) {
    std::vector<ChatMessage> messages;
    if (args.has("system")) messages.push_back({"system", args.get("system")});
    messages.push_back({"user", text});
    ChatOptions chat;
    chat.enable_thinking = args.get_flag("thinking");
    chat.default_system = default_system_prompt(tokenizer.config());
    text = format_chatml(messages, chat, is_hybrid_thinking(tokenizer.config()));
  }
  // Tokenizers that ask for it (add_bos_token) start every sequence with BOS.
  const std::vector<std::int32_t> prompt = tokenizer.with_sequence_bos(tokenizer.encode(text));
  if (prompt.empty()) throw UsageError("the prompt encodes to no tokens");

  RunSettings run;
  run.schedule = schedule_option(args);
  const std::shared_ptr<const Backend> device = device_option(args, /*records_steps=*/true);
  check_decode_engine_option(args, sampling.temperature);
  RunSession session(device, Model::load(path, load_options(args, *device)), &tokenizer);
  const Model* model = &session.model();
  const std::int64_t n_layers = model->config().num_layers;
  std::optional<LukaConfig> luka = luka_config(args, n_layers);
  if (!run.schedule.empty() && !luka) luka = LukaConfig::preset("dense", n_layers);
  if (luka) check_schedule_option(*luka, run.schedule);
  session.use(luka);
  if (luka) std::fprintf(stderr, "attention: %s\n", describe_modes(*luka).c_str());
  run.max_new_tokens = max_new;
  run.sampling = sampling;
  if (!args.get_flag("ignore-eos")) run.stop_ids = stop_token_ids(model->config().eos_token_ids, tokenizer);

  // Streams each token's text as it comes and says when the schedule changes the modes.
  struct Stream final : RunObserver {
    Stream(const Tokenizer& t, bool quiet) : text(t), json(quiet) {}
    StreamDecoder text;
    bool json;
    std::string all;
    bool token(const ChosenToken& t) override {
      if (t.stop) return false;
      const std::string piece = text.push(t.id);
      all += piece;
      if (!json) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      }
      return true;
    }
    void config_changed(std::int64_t step, const std::string& what, const LukaConfig& config) override {
      std::fflush(stdout);
      std::fprintf(stderr, "\n[decode step %lld] %s -> %s\n", static_cast<long long>(step), what.c_str(), describe_modes(config).c_str());
    }
  } stream(tokenizer, args.get_flag("json"));
  RunLoop& loop = session.loop();
  use_decode_engine_option(args, *device, loop);
  const RunResult result = loop.run(prompt, run, &stream);
  const std::string rest = stream.text.finish();
  if (args.get_flag("json")) {
    const nlohmann::json out = {{"text", stream.all + rest},
                                {"ids", result.ids},
                                {"prompt_tokens", result.prompt_tokens},
                                {"stop_reason", to_string(result.stop_reason)},
                                {"prefill_seconds", result.prefill_seconds},
                                {"decode_seconds", result.decode_seconds},
                                {"decode_steps", result.decode_steps},
                                {"device", device->name()}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
  }
  std::fflush(stdout);

  if (args.get_flag("verbose")) {
    if (loop.engine_description().empty())
      std::fprintf(stderr, "decode step: eager (one launch per op, no CUDA graph)\n");
    else
      std::fprintf(stderr, "decode step: %s\n", loop.engine_description().c_str());
  }
  const auto rate = [](std::int64_t tokens, double seconds) { return seconds > 0 ? tokens / seconds : 0.0; };
  std::fprintf(stderr, "prefill: %lld tokens in %.3f s (%.1f tokens/s)\n", static_cast<long long>(result.prompt_tokens),
               result.prefill_seconds, rate(result.prompt_tokens, result.prefill_seconds));
  // The first new token comes out of the prefill; decode tokens/s counts the decode steps.
  std::fprintf(stderr, "decode:  %lld tokens in %.3f s (%.1f tokens/s); %zu generated, stopped at %s\n",
               static_cast<long long>(result.decode_steps), result.decode_seconds,
               rate(result.decode_steps, result.decode_seconds), result.ids.size(), to_string(result.stop_reason));
  return 0;
}

}  // namespace luka::cli
