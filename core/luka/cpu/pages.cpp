// The pages of the CPU core (docs/design.md §5.4), which every mode keeps: the segmenters (fixed,
// delimiter, GSC clusters), the schedule that makes pages due, and each page's summary key, value,
// bias and spread by the compressor.
#include "core/luka/luka_attention.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/luka/cpu/internal.h"
#include "core/luka/methods/semantic_pages.h"
#include "core/util/error.h"
#include "kernels/common/luka_rules.h"

namespace luka {

using namespace cpu_core;

// The segmenter (§5.4, rules::pages_due): after a forward over the cache, as many full pages of
// page_size as the schedule makes due, from the oldest unpaged token. The delimiter segmenter takes
// what the schedule makes due up to its last delimiter, so no chunk is cut; where the last
// 4·page_size tokens of it hold none, it is cut there, and where fewer than that hold none, the
// tokens wait for their delimiter.
void LukaAttention::make_pages(const AttentionInputs& in, std::int64_t decode_step) {
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t count = rules::pages_due(to_rule(c), &clock_, static_cast<std::int64_t>(pages_.size()), paged_end(),
                                              in.k.size(1), decode_step);
  if (count <= 0) return;
  std::int64_t end = paged_end_ + count * c.page_size;
  if (c.segmenter == Segmenter::kDelimiter) {
    const std::int64_t longest = 4 * c.page_size;
    std::int64_t last = -1;
    for (std::int64_t t = end - 1; t >= std::max(paged_end_, end - longest); --t)
      if (is_delimiter(in, t)) {
        last = t;
        break;
      }
    if (last >= 0) {
      end = last + 1;
    } else if (end - paged_end_ < longest) {
      return;
    }
  }
  make_pages_until(in, end);
}

namespace {
DelimiterSet delimiter_set(const ClusteredConfig& c) {
  DelimiterSet set;
  set.texts = c.delimiters;
  set.match = c.delimiter_match == DelimiterMatch::kExact ? DelimiterSet::Match::kExact : DelimiterSet::Match::kComposed;
  return set;
}
}  // namespace

bool LukaAttention::is_delimiter(const AttentionInputs& in, std::int64_t position) {
  if (!in.ids) fail("luka layer " + std::to_string(layer_), "segmenter=delimiter needs the tokens' ids (the decoder passes them)");
  if (!token_texts_)
    fail("luka layer " + std::to_string(layer_), "segmenter=delimiter needs the tokenizer's token texts (LukaLayer::set_token_texts)");
  const auto n = static_cast<std::int64_t>(token_texts_->size());
  if (static_cast<std::int64_t>(delimiter_of_id_.size()) != n) delimiter_of_id_.assign(static_cast<std::size_t>(n), -1);
  const std::int32_t id = in.ids[position];
  if (id < 0 || id >= n) return false;
  std::int8_t& known = delimiter_of_id_[static_cast<std::size_t>(id)];
  if (known < 0) known = delimiter_set(config_.clustered).is_delimiter((*token_texts_)[static_cast<std::size_t>(id)]) ? 1 : 0;
  return known != 0;
}

void LukaAttention::set_token_texts(std::shared_ptr<const std::vector<std::string>> texts) {
  token_texts_ = std::move(texts);
  delimiter_of_id_.clear();
}

void LukaAttention::make_pages_until(const AttentionInputs& in, std::int64_t end) {
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t first = paged_end_, n = end - first, L = c.page_size;
  if (n <= 0) return;
  // Only the tokens that become pages now are read (and widened to fp32).
  const at::Tensor kf = in.k.narrow(1, first, n).to(at::kFloat);
  const at::Tensor vf = in.v.narrow(1, first, n).to(at::kFloat);
  const std::int64_t KV = kf.size(0), D = kf.size(2);
  // Units [b, e): fixed pages, or the delimiter segmenter's chunks (at most 4 pages long) and
  // delimiter tokens.
  std::vector<SemanticUnit> units;
  if (c.segmenter == Segmenter::kDelimiter) {
    std::vector<std::string> texts(static_cast<std::size_t>(n));
    for (std::int64_t t = first; t < end; ++t)  // a delimiter's text, or one no delimiter set matches
      texts[static_cast<std::size_t>(t - first)] = is_delimiter(in, t) ? (*token_texts_)[static_cast<std::size_t>(in.ids[t])] : std::string();
    const std::int64_t longest = 4 * L;
    for (const SemanticUnit& u : delimiter_chunks(texts, delimiter_set(c)))
      for (std::int64_t b = u.begin; b < u.end; b += longest)
        units.push_back({static_cast<int>(b), static_cast<int>(std::min<std::int64_t>(u.end, b + longest)), u.delimiter});
  } else {
    for (std::int64_t b = 0; b + L <= n; b += L) units.push_back({static_cast<int>(b), static_cast<int>(b + L), false});
  }
  const bool semantic = c.segmenter == Segmenter::kDelimiter || c.compressor == Compressor::kGsc;
  for (const SemanticUnit& u : units) {
    const std::int64_t b = first + u.begin, e = first + u.end;
    if (u.delimiter) {
      add_page(kf, vf, first, Page{b, e, step_, {}, true});
    } else if (c.compressor == Compressor::kGsc) {
      // One partition for the layer: the cosine of every KV head's key side by side.
      const at::Tensor keys = kf.narrow(1, u.begin, u.end - u.begin).permute({1, 0, 2}).contiguous();  // [m, KV, D]
      const int width = static_cast<int>(KV * D);
      for (const std::vector<int>& cluster : gsc_clusters(keys.const_data_ptr<float>(), width, width, 0, u.end - u.begin, c.gsc_tau)) {
        Page page{b + cluster.front(), b + cluster.back() + 1, step_, {}, false};
        if (page.end - page.start != static_cast<std::int64_t>(cluster.size()))
          for (const int i : cluster) page.members.push_back(b + i);
        page.raw = cluster.size() == 1;
        add_page(kf, vf, first, std::move(page));
      }
    } else {
      add_page(kf, vf, first, Page{b, e, step_, {}, semantic && e - b == 1});
    }
  }
  paged_end_ = end;
}

// One page: a key/value per KV head by the compressor's weights π over its tokens, its bias, and
// the spread of an unrefined page's mass over its tokens.
void LukaAttention::add_page(const at::Tensor& kf, const at::Tensor& vf, std::int64_t first, Page page) {
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t KV = kf.size(0), D = kf.size(2), L = page.size();
  const std::int64_t P = static_cast<std::int64_t>(pages_.size());
  if (!sum_k_.defined() || P >= sum_k_.size(1)) {
    const std::int64_t n = grow(P + 1, sum_k_.defined() ? sum_k_.size(1) : 0);
    at::Tensor k = at::zeros({KV, n, D}, at::kFloat), v = at::zeros({KV, n, D}, at::kFloat), b = at::zeros({KV, n}, at::kFloat);
    if (P > 0) {
      k.narrow(1, 0, P).copy_(sum_k_.narrow(1, 0, P));
      v.narrow(1, 0, P).copy_(sum_v_.narrow(1, 0, P));
      b.narrow(1, 0, P).copy_(sum_bias_.narrow(1, 0, P));
    }
    sum_k_ = k;
    sum_v_ = v;
    sum_bias_ = b;
  }
  // The page's positions along dimension `dim` of x, whose index 0 is position `base`.
  at::Tensor where;  // absolute positions of a non-contiguous page
  if (!page.contiguous()) where = at::tensor(page.members, at::kLong);
  const auto take = [&](const at::Tensor& x, std::int64_t dim, std::int64_t base) {
    return page.contiguous() ? x.narrow(dim, page.start - base, L) : x.index_select(dim, base == 0 ? where : where - base);
  };
  // The authors' adaptive bias: the entropy of softmax(importance) (temperature 1) over the
  // page, averaged over the KV heads; one bias for every head.
  float shared_bias = 0;
  const bool authors_bias = c.bias == SummaryBias::kAdaptive && c.bias_entropy == BiasEntropy::kImportanceMean;
  if (authors_bias) {
    const at::Tensor logp = at::log_softmax(take(importance_.narrow(0, 0, KV), 1, 0), 1);  // [KV, L]
    const at::Tensor pr = logp.exp();
    shared_bias = at::where(pr.gt(0), -pr * logp, at::zeros_like(pr)).sum(1).mean().item<float>();
  }
  std::vector<float> pi(static_cast<std::size_t>(L)), spread(static_cast<std::size_t>(L));
  for (std::int64_t g = 0; g < KV; ++g) {
    // Compressor weights π over the page, by the rules the CUDA kernels use.
    at::Tensor imp;
    if (c.compressor == Compressor::kAttentionWeighted) imp = take(importance_[g], 0, 0).contiguous();
    const int n = static_cast<int>(L);
    const int pick = c.compressor == Compressor::kRandom ? rules::seeded_pick(c.seed, layer_, page.start, g, n) : 0;
    rules::compressor_weights(c.compressor, imp.defined() ? imp.const_data_ptr<float>() : nullptr, n,
                              static_cast<float>(c.tau), pick, pi.data());
    const at::Tensor w = at::from_blob(pi.data(), {L}, at::kFloat);
    sum_k_[g][P].copy_(at::matmul(w, take(kf[g], 0, first)));
    if (c.zero_v && !page.raw) {  // a raw page is its token, kept as it is
      sum_v_[g][P].zero_();
    } else {
      sum_v_[g][P].copy_(at::matmul(w, take(vf[g], 0, first)));
    }
    sum_bias_[g][P] = authors_bias ? shared_bias : rules::summary_bias(c.bias, pi.data(), n);
    for (int i = 0; i < n; ++i) spread[static_cast<std::size_t>(i)] = rules::spread_weight(c.compressor, pi.data(), i, n);
    const at::Tensor spread_t = at::from_blob(spread.data(), {L}, at::kFloat);
    if (page.contiguous()) {
      spread_[g].narrow(0, page.start, L).copy_(spread_t);
    } else {
      spread_[g].index_put_({where}, spread_t);
    }
  }
  pages_.push_back(std::move(page));
}

}  // namespace luka
