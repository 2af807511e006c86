// luka forward: logits for every position, the first N by one prefill and the rest through the
// decode path — the command the parity tests and the LuKA comparisons are built on.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/luka_options.h"
#include "core/device/device.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/npy.h"

namespace luka::cli {

int run_forward(int argc, char** argv) {
  ArgParser args("forward", "[--model PATH] (--ids 1,2,3 | --text STR) [--prefill N] [--dtype fp32|bf16] --out FILE.npy",
                 "Runs the first N tokens as one prefill and the rest one at a time through the decode\n"
                 "path, and writes float32 logits [tokens, vocab] as a NumPy .npy file.");
  args.option("model", "PATH", kModelOptionHelp)
      .option("ids", "LIST", "comma-separated token ids")
      .option("text", "STR", "text to encode with the model's tokenizer (no special tokens added)")
      .option("prefill", "N", "tokens in the prefill; the rest go through decode, one by one", Default::described_integer("all"))
      .option("out", "FILE.npy", "where to write the logits");
  add_compute_options(args);
  add_device_option(args);
  add_weights_option(args);
  add_luka_options(args);
  args.epilog(std::string(kLukaOptionsHelp) + "\n\n" + kEnvironmentHelp);
  if (!args.parse(argc, argv, 2)) return 0;
  if (args.has("ids") == args.has("text")) throw UsageError("give exactly one of --ids or --text");
  if (!args.has("out")) throw UsageError("--out FILE.npy is required");

  const auto path = resolve_model_path(args);
  std::vector<std::int32_t> ids;
  if (args.has("ids")) {
    for (const std::int64_t id : parse_int_list("ids", args.get("ids"))) {
      if (id < 0 || id > INT32_MAX) throw UsageError("--ids: " + std::to_string(id) + " is not a valid token id");
      ids.push_back(static_cast<std::int32_t>(id));
    }
  } else {
    ids = Tokenizer::load(path).encode(args.get("text"));
    if (ids.empty()) throw UsageError("--text encodes to no tokens");
  }
  const auto n = static_cast<std::int64_t>(ids.size());
  const std::int64_t prefill = args.has("prefill") ? args.get_int("prefill") : n;
  if (prefill < 0 || prefill > n)
    throw UsageError("--prefill " + std::to_string(prefill) + " is outside 0.." + std::to_string(n));

  const std::shared_ptr<const Backend> device = device_option(args);
  const auto model = Model::load(path, load_options(args, *device));
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= model->config().vocab_size)
      throw UsageError("--ids: token id " + std::to_string(ids[i]) + " at index " + std::to_string(i) + " is outside the model's vocabulary [0, " +
                       std::to_string(model->config().vocab_size) + ")");
  Decoder decoder(model);
  if (const auto config = luka_config(args, model->config().num_layers)) {
    const auto layers = device->install_luka(decoder, *config);
    // The delimiter segmenter matches token texts: the model's tokenizer gives them.
    const bool texts = std::any_of(config->layers.begin(), config->layers.end(),
                                   [](const LayerConfig& l) { return l.clustered.segmenter == Segmenter::kDelimiter; });
    if (texts) set_token_texts(layers, Tokenizer::load(path).all_token_bytes());
  }

  const std::int64_t vocab = model->config().vocab_size;
  std::vector<float> logits(static_cast<std::size_t>(n * vocab));
  if (prefill > 0) {
    const std::vector<std::int32_t> head(ids.begin(), ids.begin() + prefill);
    const at::Tensor rows = decoder.prefill(head, /*all_logits=*/true).to(at::kCPU).contiguous();
    std::memcpy(logits.data(), rows.data_ptr<float>(), static_cast<std::size_t>(prefill * vocab) * sizeof(float));
  }
  for (std::int64_t t = prefill; t < n; ++t) {
    const at::Tensor row = decoder.decode(ids[static_cast<std::size_t>(t)]).to(at::kCPU).contiguous();
    std::memcpy(logits.data() + t * vocab, row.data_ptr<float>(), static_cast<std::size_t>(vocab) * sizeof(float));
  }
  for (std::size_t i = 0; i < logits.size(); ++i)
    if (!std::isfinite(logits[i]))
      throw Error("the logits at position " + std::to_string(static_cast<std::int64_t>(i) / vocab) + " are not finite (" +
                  std::to_string(logits[i]) + " for id " + std::to_string(static_cast<std::int64_t>(i) % vocab) + "); nothing written");
  write_npy_f32(args.get("out"), logits.data(), {n, vocab});
  std::fprintf(stderr, "wrote logits [%lld, %lld] to %s (%lld prefill, %lld decode)\n", static_cast<long long>(n),
               static_cast<long long>(vocab), args.get("out").c_str(), static_cast<long long>(prefill),
               static_cast<long long>(n - prefill));
  return 0;
}

}  // namespace luka::cli
