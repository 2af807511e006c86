// Clustered mode of the CPU core (docs/design.md §5.4): the logits over the cover, α, the pages
// to refine, refinement and finalize; and select_pages, the refinement rules on per-page scores.
#include "core/luka/luka_attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <ATen/Parallel.h>

#include "core/luka/cpu/internal.h"
#include "kernels/common/luka_rules.h"
#include "kernels/cpu/vec.h"

namespace luka {

using namespace cpu_core;

std::vector<std::int64_t> select_pages(const ClusteredConfig& c, const std::vector<float>& score) {
  const std::int64_t P = static_cast<std::int64_t>(score.size());
  std::vector<std::uint8_t> pick(static_cast<std::size_t>(P), 0);
  switch (c.rule) {
    case RefineRule::kThreshold:
      for (std::int64_t p = 0; p < P; ++p) pick[p] = score[p] > static_cast<float>(c.epsilon);  // α is fp32
      break;
    case RefineRule::kTopK:
      for (auto p : top_indices(score.data(), P, c.top_k)) pick[p] = 1;
      break;
    case RefineRule::kTopFrac:
      for (auto p : top_indices(score.data(), P, rules::top_frac_count(c.top_frac, P, c.page_rank == PageRank::kSum))) pick[p] = 1;
      break;
    case RefineRule::kTopP: {
      std::vector<std::int64_t> sorted(static_cast<std::size_t>(P));
      std::iota(sorted.begin(), sorted.end(), 0);
      std::sort(sorted.begin(), sorted.end(), [&](auto a, auto b) { return score[a] != score[b] ? score[a] > score[b] : a < b; });
      if (c.page_rank == PageRank::kSum) {
        // The authors' rule: with c the running sums of the sorted scores and S their total, the
        // first count(c <= p·S) + 1 pages (none when S is 0).
        double total = 0;
        for (const float x : score) total += x;
        if (total <= 0) break;
        std::int64_t n = 1;
        double cum = 0;
        for (const auto p : sorted) {
          cum += score[p];
          if (cum <= c.top_p * total) ++n;
        }
        for (std::int64_t i = 0; i < std::min(n, P); ++i) pick[sorted[i]] = 1;
        break;
      }
      // Pages in decreasing score until their cumulative score reaches p.
      double cum = 0;
      for (auto p : sorted) {
        if (cum >= c.top_p) break;
        pick[p] = 1;
        cum += score[p];
      }
      break;
    }
  }
  for (std::int64_t p = 0; p < std::min(P, c.always_refine_first); ++p) pick[p] = 1;
  std::vector<std::int64_t> out;
  for (std::int64_t p = 0; p < P; ++p)
    if (pick[p]) out.push_back(p);
  return out;
}

// Clustered (§5.4), in the spec's steps: the logits over the cover (every page's summary with its
// bias, then the raw tail), α = their softmax, the pages to refine per selection unit, then the
// refinement and finalize (the output and the effective row under mass-preserving or exact
// refinement). Returns the cover rows [H, T] (α at the raw tail, zero elsewhere) when
// importance_source is cover, else an undefined tensor.
at::Tensor LukaAttention::decode_clustered(Step& s) {
  const std::int64_t H = s.in.q.size(0), T = s.in.k.size(1);
  const std::int64_t P = static_cast<std::int64_t>(pages_.size()), E = paged_end(), R = T - E;
  const at::Tensor logits = clustered_logits(s);
  const at::Tensor alpha = cover_softmax(logits);
  last_.summary_mass = alpha.narrow(1, 0, P).clone();
  select_refined_pages(logits, alpha, s.in.group_size);
  refine_and_finalize(s, logits, alpha);
  for (std::int64_t h = 0; h < H; ++h) {
    std::int64_t children = 0;
    for (const std::int64_t p : last_.refined[h]) children += pages_[p].size();
    last_.cover_size[static_cast<std::size_t>(h)] = P - static_cast<std::int64_t>(last_.refined[h].size()) + children + R;
  }
  if (config_.importance_source != ImportanceSource::kCover) return {};
  at::Tensor rows = at::zeros({H, T}, at::kFloat);
  rows.narrow(1, E, R).copy_(alpha.narrow(1, P, R));
  for (std::int64_t p = 0; p < P; ++p)  // raw pages are raw slots
    if (pages_[p].raw) rows.select(1, pages_[p].start).copy_(alpha.select(1, p));
  return rows;
}

// [logits] ℓ [H, P + R]: each summary's score with its bias (or, as an oracle, the log-sum-exp of
// its children), then the raw tail's.
at::Tensor LukaAttention::clustered_logits(const Step& s) const {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  const std::int64_t P = static_cast<std::int64_t>(pages_.size()), E = paged_end(), R = T - E, N = P + R;
  const float* sk = P ? sum_k_.const_data_ptr<float>() : nullptr;
  const float* sb = P ? sum_bias_.const_data_ptr<float>() : nullptr;
  const std::int64_t pcap = P ? sum_k_.size(1) : 0;
  const float* q = s.q;
  const float scale = s.scale;
  at::Tensor logits_t = at::empty({H, N}, at::kFloat);
  float* lg = logits_t.mutable_data_ptr<float>();
  with_rows(in, layer_, [&](const auto& K, const auto& /*V*/) {
    const auto page_logit = [&](std::int64_t h, std::int64_t p) {
      const std::int64_t g = h / G;
      if (oracle_) {
        float mx = kNegInf;
        pages_[p].for_each_position([&](std::int64_t t) { mx = std::max(mx, scale * dot(q + h * D, K.row(g, t), D)); });
        double z = 0;
        pages_[p].for_each_position([&](std::int64_t t) { z += std::exp(scale * dot(q + h * D, K.row(g, t), D) - mx); });
        return mx + static_cast<float>(std::log(z));
      }
      return scale * dot(q + h * D, sk + (g * pcap + p) * D, D) + sb[g * pcap + p];
    };
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) {
        float* l = lg + h * N;
        for (std::int64_t p = 0; p < P; ++p) l[p] = page_logit(h, p);
        for (std::int64_t t = 0; t < R; ++t) l[P + t] = scale * dot(q + h * D, K.row(h / G, E + t), D);
      }
    });
  });
  return logits_t;
}

// [cover softmax] α before refinement: the mass each page holds, what selection ranks (unless
// refine_on=unbiased asks for the softmax without the summary bias) and, under mass-preserving
// refinement, the weights of the output.
at::Tensor LukaAttention::cover_softmax(const at::Tensor& logits_t) const {
  const std::int64_t H = logits_t.size(0), N = logits_t.size(1);
  const bool exact_math = config_.clustered.math == RefineMath::kExact;
  at::Tensor alpha_t;
  if (exact_math) {
    alpha_t = at::softmax(logits_t, -1);
  } else {
    alpha_t = logits_t.clone();
    float* a = alpha_t.mutable_data_ptr<float>();
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) softmax_inplace(a + h * N, N);
    });
  }
  return alpha_t;
}

// [selection] Per unit of heads that share it, each page's score — the max of α over the unit, or
// for top_frac / top_p with page_rank=sum, the sum — then the rule: last_.refined per head.
void LukaAttention::select_refined_pages(const at::Tensor& logits_t, const at::Tensor& alpha_t, std::int64_t G) {
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t H = logits_t.size(0), N = logits_t.size(1);
  const std::int64_t P = static_cast<std::int64_t>(pages_.size());
  at::Tensor select_t = alpha_t;
  if (c.refine_on == RefineOn::kUnbiased && c.bias != SummaryBias::kNone && !oracle_ && P > 0) {
    at::Tensor unbiased = logits_t.clone();
    for (std::int64_t h = 0; h < H; ++h) unbiased[h].narrow(0, 0, P).sub_(sum_bias_[h / G].narrow(0, 0, P));
    select_t = at::softmax(unbiased, -1);
  }
  const float* sa = select_t.const_data_ptr<float>();
  const bool sum_rank = c.page_rank == PageRank::kSum && (c.rule == RefineRule::kTopFrac || c.rule == RefineRule::kTopP);
  // The pages selection ranks: all but raw ones (a token kept as it is has nothing to refine).
  std::vector<std::int64_t> candidates;
  for (std::int64_t p = 0; p < P; ++p)
    if (!pages_[p].raw) candidates.push_back(p);
  const auto C = static_cast<std::int64_t>(candidates.size());
  last_.refined.assign(static_cast<std::size_t>(H), {});
  for (const auto& unit : selection_units(c.selection, H, G)) {
    std::vector<float> score(static_cast<std::size_t>(C), 0.0f);
    for (const std::int64_t h : unit)
      for (std::int64_t i = 0; i < C; ++i) {
        const float x = sa[h * N + candidates[i]];
        score[i] = sum_rank ? score[i] + x : std::max(score[i], x);
      }
    std::vector<std::int64_t> refined = select_pages(c, score);
    for (std::int64_t& i : refined) i = candidates[i];
    for (const std::int64_t h : unit) last_.refined[h] = refined;
  }
}

// [refinement, finalize] Per head: the children logits of the refined pages, then the output and
// the effective row over raw tokens, under mass-preserving (α shared by a local softmax) or exact
// (one softmax over unrefined summaries, refined children and the raw tail) refinement.
void LukaAttention::refine_and_finalize(Step& s, const at::Tensor& logits_t, const at::Tensor& alpha_t) {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  const ClusteredConfig& c = config_.clustered;
  const std::int64_t P = static_cast<std::int64_t>(pages_.size()), E = paged_end(), R = T - E, N = P + R;
  const float* sv = P ? sum_v_.const_data_ptr<float>() : nullptr;
  const std::int64_t pcap = P ? sum_k_.size(1) : 0;
  const float* spread = spread_.const_data_ptr<float>();
  const std::int64_t scap = spread_.size(1);
  const bool exact_math = c.math == RefineMath::kExact;
  const float* q = s.q;
  const float scale = s.scale;
  const float* lg = logits_t.const_data_ptr<float>();
  const float* alpha = alpha_t.const_data_ptr<float>();
  float* e = s.eff.mutable_data_ptr<float>();
  float* o = s.out.mutable_data_ptr<float>();
  at::Tensor child_t = at::empty({H, E}, at::kFloat);  // children logits, filled on demand
  float* child = child_t.mutable_data_ptr<float>();
  with_rows(in, layer_, [&](const auto& K, const auto& V) {
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) {
        const std::int64_t g = h / G;
        const float* l = lg + h * N;
        const float* a = alpha + h * N;
        float* eh = e + h * T;
        float* oh = o + h * D;
        const auto& refined = last_.refined[h];
        std::vector<std::uint8_t> is_refined(static_cast<std::size_t>(P), 0);
        for (auto p : refined) is_refined[p] = 1;
        for (auto p : refined)
          pages_[p].for_each_position([&](std::int64_t t) { child[h * E + t] = scale * dot(q + h * D, K.row(g, t), D); });
        if (!exact_math) {
          std::vector<float> local;
          for (std::int64_t p = 0; p < P; ++p) {
            const Page& pg = pages_[p];
            if (is_refined[p]) {  // children share the page's α by a local softmax
              local.clear();
              pg.for_each_position([&](std::int64_t t) { local.push_back(child[h * E + t]); });
              softmax_inplace(local.data(), static_cast<std::int64_t>(local.size()));
              std::size_t i = 0;
              pg.for_each_position([&](std::int64_t t) {
                eh[t] = a[p] * local[i++];
                axpy(eh[t], V.row(g, t), oh, D);
              });
            } else {
              axpy(a[p], sv + (g * pcap + p) * D, oh, D);
              pg.for_each_position([&](std::int64_t t) { eh[t] = a[p] * spread[g * scap + t]; });
            }
          }
          for (std::int64_t t = 0; t < R; ++t) {
            eh[E + t] = a[P + t];
            axpy(a[P + t], V.row(g, E + t), oh, D);
          }
          continue;
        }
        // Exact: one softmax over unrefined summaries, refined children and raw tokens.
        float mx = kNegInf;
        for (std::int64_t p = 0; p < P; ++p)
          if (!is_refined[p]) mx = std::max(mx, l[p]);
        for (auto p : refined) pages_[p].for_each_position([&](std::int64_t t) { mx = std::max(mx, child[h * E + t]); });
        for (std::int64_t t = 0; t < R; ++t) mx = std::max(mx, l[P + t]);
        double z = 0;
        for (std::int64_t p = 0; p < P; ++p)
          if (!is_refined[p]) z += std::exp(l[p] - mx);
        for (auto p : refined) pages_[p].for_each_position([&](std::int64_t t) { z += std::exp(child[h * E + t] - mx); });
        for (std::int64_t t = 0; t < R; ++t) z += std::exp(l[P + t] - mx);
        const float inv = static_cast<float>(1.0 / z);
        for (std::int64_t p = 0; p < P; ++p) {
          const Page& pg = pages_[p];
          if (is_refined[p]) {
            pg.for_each_position([&](std::int64_t t) {
              eh[t] = std::exp(child[h * E + t] - mx) * inv;
              axpy(eh[t], V.row(g, t), oh, D);
            });
          } else {
            const float w = std::exp(l[p] - mx) * inv;
            axpy(w, sv + (g * pcap + p) * D, oh, D);
            pg.for_each_position([&](std::int64_t t) { eh[t] = w * spread[g * scap + t]; });
          }
        }
        for (std::int64_t t = 0; t < R; ++t) {
          eh[E + t] = std::exp(l[P + t] - mx) * inv;
          axpy(eh[E + t], V.row(g, E + t), oh, D);
        }
      }
    });
  });
}

}  // namespace luka
