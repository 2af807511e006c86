// Teacher-forced perplexity of a token sequence, as `luka perplexity` computes it: the first
// `prompt_tokens` go through one prefill, every further token through the decode path (where the
// LuKA modes act), and each token's negative log-likelihood under the logits before it is
// averaged. Also the entries attended per decode step against dense's, and with `fidelity` (the
// session's config must have the dense shadow on in every layer) an all-dense reference decoder
// stepped alongside: the next-token KL against it and, per layer, the means of the shadow's
// fidelity columns and the cosine between the two runs' hidden states.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace luka {
class RunSession;
}

namespace luka::eval {

struct LayerFidelity {
  double kl = 0, recall = 0, topk_overlap = 0, output_rel_l2 = 0, hidden_cosine = 0;  // means over steps
};

struct PerplexityResult {
  std::int64_t tokens = 0, prompt_tokens = 0, scored = 0, decode_steps = 0;
  double mean_nll = 0, decode_seconds = 0;
  std::optional<double> attended_fraction;  // unknown when a layer kept no records
  // With fidelity: the mean next-token KL against the all-dense run, and one entry per layer.
  double next_token_kl = 0;
  std::vector<LayerFidelity> layers;
  double perplexity() const;
};

struct PerplexityOptions {
  std::int64_t prompt_tokens = 0;
  bool fidelity = false;
  std::string where;  // names the text in errors (a non-finite log-probability)
  // Called every 64 positions and at the end: position fed, tokens, perplexity so far.
  std::function<void(std::int64_t position, std::int64_t tokens, double perplexity)> progress;
};

// Scores `ids` (at least 2, prompt_tokens < ids.size()) through `session`'s loop. Throws
// luka::Error for a non-finite log-probability (naming options.where and the token) or bad sizes.
PerplexityResult perplexity(RunSession& session, const std::vector<std::int32_t>& ids, const PerplexityOptions& options);

}  // namespace luka::eval
