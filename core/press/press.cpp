// Each scorer follows kvpress 0.5.5's score() step by step (kvpress/presses/<name>_press.py), in
// the same order of operations, so that the fp32 scores agree to rounding; comments name the
// places where kvpress departs from its paper.
#include "core/press/press.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>

#include "core/util/error.h"

namespace luka::press {
namespace {

constexpr const char* kWhere = "press";

struct Shape {
  std::int64_t kv_heads, T, d;
};

Shape check_keys(const LayerInputs& in, const char* scorer) {
  if (!in.keys.defined() || in.keys.dim() != 3)
    fail(kWhere, std::string(scorer) + ": keys must be [kv_heads, T, head_dim]");
  return {in.keys.size(0), in.keys.size(1), in.keys.size(2)};
}

void check_values(const LayerInputs& in, const Shape& s, const char* scorer) {
  if (!in.values.defined() || in.values.sizes() != in.keys.sizes())
    fail(kWhere, std::string(scorer) + ": values must have the keys' shape [kv_heads, T, head_dim]");
  (void)s;
}

// The group size of queries [heads, n, d] over the keys' KV heads.
std::int64_t check_queries(const at::Tensor& q, const Shape& s, const char* scorer, const char* what) {
  if (!q.defined() || q.dim() != 3 || q.size(2) != s.d || q.size(0) % s.kv_heads != 0 || q.size(0) == 0)
    fail(kWhere, std::string(scorer) + ": " + what + " must be [heads, n, " + std::to_string(s.d) +
                     "] with heads a multiple of the " + std::to_string(s.kv_heads) + " KV heads");
  return q.size(0) / s.kv_heads;
}

// transformers' repeat_kv: query head h reads KV head h / group.
at::Tensor repeat_kv(const at::Tensor& kv, std::int64_t group) {
  return group == 1 ? kv : kv.repeat_interleave(group, 0);
}

// kvpress pads the positions a scorer always keeps with the layer's highest score plus one.
at::Tensor pad_with_max(const at::Tensor& scores, std::int64_t left, std::int64_t right) {
  const double top = scores.max().item<double>() + 1;
  return at::constant_pad_nd(scores, {left, right}, top);
}

at::Tensor streaming_llm(const ScorerParams& p, const Shape& s, std::int64_t kept) {
  if (s.T <= p.n_sink)
    fail(kWhere, "streaming_llm: the prompt (" + std::to_string(s.T) +
                     " positions) must be longer than n_sink = " + std::to_string(p.n_sink));
  at::Tensor scores = at::ones({s.kv_heads, s.T}, at::kFloat);
  const std::int64_t pruned = s.T - kept;
  const std::int64_t end = std::min<std::int64_t>(s.T, p.n_sink + pruned);
  if (end > p.n_sink) scores.slice(1, p.n_sink, end).zero_();
  return scores;
}

// SnapKVPress.compute_window_attention: the last `window` queries' causal softmax over every key,
// then the keys before the window. [heads, window, T - window].
at::Tensor window_attention(const at::Tensor& queries, const at::Tensor& keys, std::int64_t group,
                            std::int64_t window) {
  const std::int64_t T = keys.size(1), d = keys.size(2), Tq = queries.size(1);
  const at::Tensor q = queries.slice(1, Tq - window, Tq).to(at::kFloat);
  const at::Tensor k = repeat_kv(keys.to(at::kFloat), group);
  at::Tensor attn = at::matmul(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(d));
  // Query i stands at T - window + i and sees keys up to it.
  const at::Tensor mask = at::triu(at::full({window, T}, -INFINITY, at::kFloat), T - window + 1);
  attn = at::softmax(attn + mask, -1, at::kFloat);
  return attn.slice(2, 0, T - window);
}

at::Tensor snapkv(const ScorerParams& p, const LayerInputs& in, const Shape& s) {
  const std::int64_t group = check_queries(in.queries, s, "snapkv", "queries");
  const std::int64_t w = p.window_size;
  if (w < 1 || s.T <= w || in.queries.size(1) < w)
    fail(kWhere, "snapkv: the prompt (" + std::to_string(s.T) + " positions, " + std::to_string(in.queries.size(1)) +
                     " queries) must be longer than window_size = " + std::to_string(w) + " and give its queries");
  if (p.kernel_size < 1 || p.kernel_size % 2 == 0)
    fail(kWhere, "snapkv: kernel_size must be odd and positive, not " + std::to_string(p.kernel_size));
  const at::Tensor attn = window_attention(in.queries, in.keys, group, w);
  at::Tensor scores = attn.mean(1);  // [heads, T - w]
  // Average pooling over positions, zero padding counted (F.avg_pool1d's default).
  scores = at::avg_pool1d(scores.unsqueeze(0), {p.kernel_size}, {1}, {p.kernel_size / 2}, false, true).squeeze(0);
  // The mean over each KV head's query heads (SnapKV's GQA issue #22, as kvpress does).
  scores = scores.view({s.kv_heads, group, s.T - w}).mean(1);
  return pad_with_max(scores, 0, w);
}

at::Tensor tova(const LayerInputs& in, const Shape& s) {
  const std::int64_t group = check_queries(in.queries, s, "tova", "queries");
  if (s.T < 2 || in.queries.size(1) < 1) fail(kWhere, "tova: needs a prompt of 2 positions or more and its last query");
  const at::Tensor attn = window_attention(in.queries, in.keys, group, 1);  // [heads, 1, T - 1]
  // The mean over all query heads, the same scores for every KV head (kvpress; the TOVA paper
  // averages over heads too and evicts one token per step).
  at::Tensor scores = attn.mean(0).repeat({s.kv_heads, 1});  // [kv_heads, T - 1]
  return pad_with_max(scores, 0, 1);
}

at::Tensor knorm(const LayerInputs& in) {
  return -at::linalg_vector_norm(in.keys.to(at::kFloat), 2, at::IntArrayRef{-1}, false, at::kFloat);
}

// ExpectedAttentionPress.apply_avg_rope: the RoPE rotation averaged over the next positions,
// R = mean_t (cos_t I + sin_t P) with P the rotate_half matrix.
at::Tensor average_rope(const LayerInputs& in, std::int64_t T, std::int64_t d, int n_future) {
  if (!in.inv_freq.defined() || in.inv_freq.dim() != 1 || in.inv_freq.size(0) * 2 != d)
    fail(kWhere, "expected_attention: inv_freq must be [" + std::to_string(d / 2) + "]");
  const at::Tensor pos = at::arange(T, T + n_future, at::kLong).to(at::kFloat);
  const at::Tensor freqs = pos.unsqueeze(1) * in.inv_freq.to(at::kFloat).unsqueeze(0);  // [n, d/2]
  const at::Tensor emb = at::cat({freqs, freqs}, 1);
  const at::Tensor cos = emb.cos() * in.attention_scaling, sin = emb.sin() * in.attention_scaling;
  const at::Tensor I = at::eye(d, at::kFloat);
  at::Tensor P = at::zeros({d, d}, at::kFloat);
  const std::int64_t h = d / 2;
  P.slice(0, h, d).slice(1, 0, h).copy_(at::eye(h, at::kFloat));
  P.slice(0, 0, h).slice(1, h, d).copy_(-at::eye(h, at::kFloat));
  const at::Tensor R = cos.unsqueeze(2) * I + sin.unsqueeze(2) * P;  // [n, d, d]
  return R.mean(0);
}

at::Tensor expected_attention(const ScorerParams& p, const LayerInputs& in, const Shape& s) {
  check_values(in, s, "expected_attention");
  const std::int64_t group = check_queries(in.queries_pre_rope, s, "expected_attention", "queries_pre_rope");
  const std::int64_t n = p.n_sink;
  if (n < 0 || s.T <= n)
    fail(kWhere, "expected_attention: the prompt (" + std::to_string(s.T) +
                     " positions) must be longer than n_sink = " + std::to_string(n));
  // kvpress takes the statistics and the future positions from the queries it is handed: every
  // prompt query at prefill (Tq = T), the buffered decode queries during decoding (DecodingPress).
  const std::int64_t Tq = in.queries_pre_rope.size(1);
  if (Tq <= n)
    fail(kWhere,
         "expected_attention: " + std::to_string(Tq) + " queries must be more than n_sink = " + std::to_string(n));
  if (p.n_future_positions < 1) fail(kWhere, "expected_attention: n_future_positions must be positive");
  // Query statistics over the prompt past its sinks (kvpress: they "likely contain outliers").
  const at::Tensor q = in.queries_pre_rope.to(at::kFloat).slice(1, n, Tq);  // [heads, Tq - n, d]
  at::Tensor mu = q.mean(1, true);
  at::Tensor cov;
  if (p.use_covariance) {
    const at::Tensor c = q - mu;
    cov = at::einsum("nsi,nsj->nij", {c, c}) / static_cast<double>(Tq - n);
  }
  mu = mu.squeeze(1);  // [heads, d]
  const at::Tensor R = average_rope(in, Tq, s.d, p.n_future_positions);
  mu = at::matmul(mu, R.t());
  if (cov.defined()) cov = at::matmul(R, at::matmul(cov, R.t()));

  const at::Tensor keys = repeat_kv(in.keys.to(at::kFloat).slice(1, n, s.T), group).transpose(1, 2);  // [heads, d, T-n]
  const at::Tensor values = in.values.to(at::kFloat).slice(1, n, s.T);
  at::Tensor scores = at::matmul(mu.unsqueeze(1), keys).squeeze(1) / std::sqrt(static_cast<double>(s.d));
  if (cov.defined())
    scores = scores + at::einsum("hin,hij,hjn->hn", {keys, cov, keys}) / static_cast<double>(s.d) / 2.0;
  scores = at::softmax(scores, -1);
  scores = scores.view({s.kv_heads, group, s.T - n}).mean(1);
  if (p.use_vnorm) scores = (scores + p.epsilon) * at::linalg_vector_norm(values, 2, at::IntArrayRef{-1}, false);
  return pad_with_max(scores, n, 0);
}

at::Tensor random_scores(const ScorerParams& p, const Shape& s) {
  // torch.rand with a generator seeded as RandomPress seeds it: the same numbers, since LibTorch
  // is the library behind torch.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(p.seed);
  return at::rand({s.kv_heads, s.T}, gen, at::kFloat);
}

void check_finite_order(const at::Tensor& scores) {
  if (at::isnan(scores).any().item<bool>()) fail(kWhere, "a score is NaN (NaN in the keys, values or queries?)");
}

std::int64_t round_half_even(double x) { return static_cast<std::int64_t>(std::nearbyint(x)); }

}  // namespace

const char* scorer_name(Scorer s) {
  switch (s) {
    case Scorer::kStreamingLlm:
      return "streaming_llm";
    case Scorer::kSnapKv:
      return "snapkv";
    case Scorer::kTova:
      return "tova";
    case Scorer::kKnorm:
      return "knorm";
    case Scorer::kExpectedAttention:
      return "expected_attention";
    case Scorer::kRandom:
      return "random";
  }
  return "?";
}

Scorer scorer_from_name(const std::string& name) {
  for (Scorer s : {Scorer::kStreamingLlm, Scorer::kSnapKv, Scorer::kTova, Scorer::kKnorm, Scorer::kExpectedAttention,
                   Scorer::kRandom})
    if (name == scorer_name(s)) return s;
  fail(kWhere, "unknown method \"" + name + "\" (streaming_llm, snapkv, tova, knorm, expected_attention, random)");
}

std::int64_t Budget::kept(std::int64_t T) const {
  if (tokens > 0) return std::min(tokens, T);
  if (compression_ratio >= 1.0) return 0;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(T) * (1.0 - compression_ratio)));
}

double Budget::kept_exact(std::int64_t T) const {
  if (tokens > 0) return static_cast<double>(std::min(tokens, T));
  return static_cast<double>(T) * (1.0 - compression_ratio);
}

void Budget::validate(const std::string& where) const {
  if (!(compression_ratio >= 0.0 && compression_ratio < 1.0))
    fail(where, "compression_ratio must be in [0, 1), not " + std::to_string(compression_ratio));
  if (tokens < 0)
    fail(where, "budget_tokens must be positive (0: use compression_ratio), not " + std::to_string(tokens));
}

at::Tensor score(Scorer s, const ScorerParams& p, const LayerInputs& in, std::int64_t kept) {
  const Shape shape = check_keys(in, scorer_name(s));
  at::Tensor out;
  switch (s) {
    case Scorer::kStreamingLlm:
      out = streaming_llm(p, shape, kept);
      break;
    case Scorer::kSnapKv:
      out = snapkv(p, in, shape);
      break;
    case Scorer::kTova:
      out = tova(in, shape);
      break;
    case Scorer::kKnorm:
      out = knorm(in);
      break;
    case Scorer::kExpectedAttention:
      out = expected_attention(p, in, shape);
      break;
    case Scorer::kRandom:
      out = random_scores(p, shape);
      break;
  }
  return out.contiguous();
}

KeptSets top_per_head(const at::Tensor& scores, std::int64_t n) {
  check_finite_order(scores);
  const at::Tensor s = scores.to(at::kFloat).contiguous();
  const std::int64_t H = s.size(0), T = s.size(1);
  n = std::clamp<std::int64_t>(n, 0, T);
  const float* data = s.data_ptr<float>();
  KeptSets kept(static_cast<std::size_t>(H));
  std::vector<std::int64_t> order(static_cast<std::size_t>(T));
  for (std::int64_t h = 0; h < H; ++h) {
    const float* row = data + h * T;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + n, order.end(),
                      [row](std::int64_t a, std::int64_t b) { return row[a] != row[b] ? row[a] > row[b] : a < b; });
    auto& k = kept[static_cast<std::size_t>(h)];
    k.assign(order.begin(), order.begin() + n);
    std::sort(k.begin(), k.end());
  }
  return kept;
}

KeptSets adakv_select(const at::Tensor& scores, std::int64_t n, double alpha_safeguard) {
  if (!(alpha_safeguard >= 0.0 && alpha_safeguard <= 1.0))
    fail(kWhere, "adakv: alpha_safeguard must be in [0, 1], not " + std::to_string(alpha_safeguard));
  check_finite_order(scores);
  at::Tensor s = scores.to(at::kFloat).contiguous().clone();
  const std::int64_t H = s.size(0), T = s.size(1);
  n = std::clamp<std::int64_t>(n, 0, T);
  std::int64_t safe = static_cast<std::int64_t>(static_cast<double>(n) * alpha_safeguard);
  if (alpha_safeguard > 0) safe = n > 0 ? std::max<std::int64_t>(1, safe) : 0;
  float* data = s.data_ptr<float>();
  // Each head's safeguarded best are raised to float's largest value (kvpress's finfo.max).
  const KeptSets guarded = top_per_head(s, safe);
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t t : guarded[static_cast<std::size_t>(h)]) data[h * T + t] = FLT_MAX;
  // The layer's H·n best over all heads stay.
  std::vector<std::int64_t> order(static_cast<std::size_t>(H * T));
  std::iota(order.begin(), order.end(), 0);
  const std::int64_t keep = H * n;
  std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                    [data](std::int64_t a, std::int64_t b) { return data[a] != data[b] ? data[a] > data[b] : a < b; });
  KeptSets kept(static_cast<std::size_t>(H));
  for (std::int64_t i = 0; i < keep; ++i) kept[static_cast<std::size_t>(order[i] / T)].push_back(order[i] % T);
  for (auto& k : kept) std::sort(k.begin(), k.end());
  return kept;
}

std::int64_t pyramid_layer_budget(std::int64_t T, const Budget& b, int layer, int layers, int window_size, int beta) {
  if (beta < 1) fail(kWhere, "pyramidkv: beta must be 1 or more, not " + std::to_string(beta));
  if (layers < 1 || layer < 0 || layer >= layers)
    fail(kWhere, "pyramidkv: layer " + std::to_string(layer) + " of " + std::to_string(layers));
  const double w = window_size, q_len = static_cast<double>(T);
  // kvpress's get_layer_budget, operation for operation.
  const double max_capacity = w + b.kept_exact(T);
  double min_num = (max_capacity - w) / beta;
  double max_num = (max_capacity - w) * 2 - min_num;
  if (max_num >= q_len - w) {
    max_num = q_len - w;
    min_num = (max_capacity - w) * 2 - max_num;
  }
  if (!(q_len >= max_num && max_num >= min_num && min_num >= w))
    return std::max<std::int64_t>(1, round_half_even(b.kept_exact(T)));
  const double steps = layers > 1 ? (max_num - min_num) / (layers - 1) : 0.0;
  return round_half_even(max_num - layer * steps);
}

PressResult press_layer(Scorer s, const ScorerParams& sp, const AllocationParams& ap, const Budget& b,
                        const LayerInputs& in, int layer, int layers) {
  b.validate(kWhere);
  const Shape shape = check_keys(in, scorer_name(s));
  const std::int64_t T = shape.T;
  std::int64_t n = b.kept(T);
  if (ap.allocation == Allocation::kPyramid && n < T)
    n = pyramid_layer_budget(T, b, layer, layers, sp.window_size, ap.beta);
  PressResult r;
  if (n >= T) {
    r.kept.assign(static_cast<std::size_t>(shape.kv_heads), std::vector<std::int64_t>(static_cast<std::size_t>(T)));
    for (auto& k : r.kept) std::iota(k.begin(), k.end(), 0);
    return r;
  }
  r.scores = score(s, sp, in, n);
  r.kept =
      ap.allocation == Allocation::kAdaKv ? adakv_select(r.scores, n, ap.alpha_safeguard) : top_per_head(r.scores, n);
  return r;
}

}  // namespace luka::press
