#include "core/eval/perplexity.h"

#include <ATen/ATen.h>

#include <cmath>
#include <memory>

#include "core/luka/luka_layer.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/run/session.h"
#include "core/util/error.h"

namespace luka::eval {

double PerplexityResult::perplexity() const { return std::exp(mean_nll); }

namespace {

// Scores each token against the logits before it; with fidelity, steps the all-dense reference
// decoder alongside and sums the per-layer fidelity and hidden-state cosines.
class Scoring final : public RunObserver {
 public:
  Scoring(RunSession& session, const std::vector<std::int32_t>& forced, const PerplexityOptions& o)
      : session_(session), forced_(forced), o_(o), layers_(session.model().config().num_layers) {
    fid_.assign(static_cast<std::size_t>(layers_), LayerFidelity{});
    if (o.fidelity) {
      reference_ = std::make_unique<Decoder>(session.shared_model());
      reference_->set_hidden_capture(true);
      session.decoder().set_hidden_capture(true);
    }
  }

  void start(const std::vector<std::int32_t>& prompt) {
    if (reference_ && !prompt.empty()) ref_logits_ = reference_->prefill(prompt);
  }

  void logits(std::int64_t index, const at::Tensor& l) override {
    const std::int32_t next = forced_[static_cast<std::size_t>(index)];
    const at::Tensor logp = at::log_softmax(l.to(at::kDouble), -1);
    const double lp = logp[next].item<double>();
    if (!std::isfinite(lp))
      fail(o_.where, "the model's log-probability of token " + std::to_string(scored_ + o_.prompt_tokens + 1) +
                         " is not finite (" + std::to_string(lp) + "): NaN or Inf in the logits");
    nll_ -= lp;
    ++scored_;
    if (ref_logits_.defined()) {
      const at::Tensor ref_logp = at::log_softmax(ref_logits_.to(at::kDouble), -1);
      next_token_kl_ += (ref_logp.exp() * (ref_logp - logp)).sum().item<double>();
    }
  }

  void after_step(std::int64_t step, double) override {
    const auto& layers = session_.layers();
    for (const auto& layer : layers) {
      const LukaStep& s = layer->last_step();
      if (s.cover_size.empty()) counted_ = false;
      for (const std::int64_t c : s.cover_size) attended_ += static_cast<double>(c), attendable_ += static_cast<double>(s.tokens);
    }
    const std::int32_t fed = forced_[static_cast<std::size_t>(step - 1)];
    if (reference_) ref_logits_ = reference_->decode(fed);
    if (o_.fidelity && !layers.empty() && layers[0]->last_step().fidelity.defined()) {
      ++fid_steps_;
      for (std::int64_t l = 0; l < layers_; ++l) {
        const at::Tensor a = session_.decoder().last_hidden()[static_cast<std::size_t>(l)].to(at::kDouble);
        const at::Tensor b = reference_->last_hidden()[static_cast<std::size_t>(l)].to(at::kDouble);
        fid_[static_cast<std::size_t>(l)].hidden_cosine +=
            (a.dot(b) / (a.norm() * b.norm()).clamp_min(1e-300)).item<double>();
        const at::Tensor f = layers[static_cast<std::size_t>(l)]->last_step().fidelity.to(at::kDouble).mean(0);
        LayerFidelity& d = fid_[static_cast<std::size_t>(l)];
        d.kl += f[0].item<double>();
        d.recall += f[1].item<double>();
        d.topk_overlap += f[2].item<double>();
        d.output_rel_l2 += f[3].item<double>();
      }
    }
    const std::int64_t pos = o_.prompt_tokens + step - 1;  // the position this step fed
    const std::int64_t n = o_.prompt_tokens + static_cast<std::int64_t>(forced_.size());
    if (o_.progress && scored_ > 0 && (pos % 64 == 0 || pos + 2 == n))
      o_.progress(pos, n, std::exp(nll_ / static_cast<double>(scored_)));
  }

  void finish(PerplexityResult& r) const {
    r.scored = scored_;
    r.mean_nll = nll_ / static_cast<double>(scored_);
    if (counted_ && attendable_ > 0) r.attended_fraction = attended_ / attendable_;
    if (!o_.fidelity) return;
    r.next_token_kl = next_token_kl_ / static_cast<double>(scored_);
    const double d = fid_steps_ > 0 ? static_cast<double>(fid_steps_) : 1.0;
    for (LayerFidelity f : fid_) {
      f.kl /= d, f.recall /= d, f.topk_overlap /= d, f.output_rel_l2 /= d, f.hidden_cosine /= d;
      r.layers.push_back(f);
    }
  }

 private:
  RunSession& session_;
  const std::vector<std::int32_t>& forced_;
  const PerplexityOptions& o_;
  const std::int64_t layers_;
  std::unique_ptr<Decoder> reference_;
  at::Tensor ref_logits_;
  double nll_ = 0, next_token_kl_ = 0, attended_ = 0, attendable_ = 0;
  std::int64_t scored_ = 0, fid_steps_ = 0;
  bool counted_ = true;
  std::vector<LayerFidelity> fid_;
};

}  // namespace

PerplexityResult perplexity(RunSession& session, const std::vector<std::int32_t>& ids, const PerplexityOptions& o) {
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  if (n < 2) fail(o.where, "the text has fewer than 2 tokens");
  if (o.prompt_tokens < 0 || o.prompt_tokens >= n)
    fail(o.where, "the prompt tokens (" + std::to_string(o.prompt_tokens) + ") must be fewer than the tokens (" +
                      std::to_string(n) + ")");
  const std::vector<std::int32_t> prompt(ids.begin(), ids.begin() + o.prompt_tokens);
  RunSettings run;
  run.forced.assign(ids.begin() + o.prompt_tokens, ids.end());
  run.max_new_tokens = n - o.prompt_tokens;
  Scoring scoring(session, run.forced, o);
  scoring.start(prompt);
  const RunResult result = session.loop().run(prompt, run, &scoring);
  PerplexityResult r;
  r.tokens = n;
  r.prompt_tokens = o.prompt_tokens;
  r.decode_steps = n - 1 - o.prompt_tokens;
  r.decode_seconds = result.decode_seconds;
  scoring.finish(r);
  return r;
}

}  // namespace luka::eval
