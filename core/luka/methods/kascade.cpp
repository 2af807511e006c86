#include "core/luka/methods/kascade.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "core/util/error.h"

namespace luka {

int KascadeTopK::size(int n) const {
  if (n <= 0) return 0;
  long k = count;
  if (fraction > 0.0) k = std::max<long>(static_cast<long>(std::ceil(fraction * n)), min_count);
  return static_cast<int>(std::clamp<long>(k, 1, n));
}

PromptAttention prompt_attention(const float* rows, int layers, int heads, int kv_heads, int queries, int keys) {
  PromptAttention p;
  p.layers = layers;
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.queries = queries;
  p.keys = keys;
  p.row = [rows, heads, queries, keys](int l, int h, int q) {
    return rows + ((static_cast<std::size_t>(l) * heads + h) * queries + q) * keys;
  };
  return p;
}

namespace {

template <typename T>
std::vector<int> top_k_of(const T* p, int n, int k) {
  std::vector<int> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  k = std::clamp(k, 0, n);
  const auto better = [p](int a, int b) { return p[a] != p[b] ? p[a] > p[b] : a < b; };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
  idx.resize(static_cast<std::size_t>(k));
  return idx;
}

void check_prompt(const PromptAttention& p, const PromptAttention& first, std::size_t index) {
  const std::string where = "kascade similarity, prompt " + std::to_string(index);
  if (p.layers <= 0 || p.heads <= 0 || p.kv_heads <= 0 || p.heads % p.kv_heads != 0)
    fail(where, "expected layers > 0 and query heads a positive multiple of KV heads, got layers " +
                    std::to_string(p.layers) + ", heads " + std::to_string(p.heads) + ", KV heads " +
                    std::to_string(p.kv_heads));
  if (p.queries <= 0 || p.keys < p.queries)
    fail(where, "expected 0 < queries <= keys, got " + std::to_string(p.queries) + " queries and " +
                    std::to_string(p.keys) + " keys");
  if (!p.row) fail(where, "no attention rows");
  if (p.layers != first.layers || p.heads != first.heads || p.kv_heads != first.kv_heads)
    fail(where, "layers and heads differ from prompt 0's");
}

}  // namespace

std::vector<int> kascade_top_k(const float* p, int n, int k) { return top_k_of(p, n, k); }

double KascadeSimilarity::head_sim(int a, int ha, int b, int hb) const {
  const std::size_t L = static_cast<std::size_t>(layers), G = static_cast<std::size_t>(groups);
  return head[((a * L + b) * G + hb) * G + ha];
}

KascadeSimilarity kascade_similarity(const std::vector<PromptAttention>& prompts, const KascadeOptions& options) {
  if (prompts.empty()) fail("kascade similarity", "no prompts in the development set");
  for (std::size_t i = 0; i < prompts.size(); ++i) check_prompt(prompts[i], prompts[0], i);

  const int L = prompts[0].layers, H = prompts[0].heads;
  const int G = options.heads == KascadeHeads::kShared ? 1 : prompts[0].kv_heads;
  const int group_size = H / G;  // query heads h of head-group g: h / group_size == g
  const std::size_t LG = static_cast<std::size_t>(L) * G;
  const std::size_t pairs = static_cast<std::size_t>(L) * L * G * G;
  const auto pair_index = [L, G](int a, int b, int hb, int ha) {
    return ((static_cast<std::size_t>(a) * L + b) * G + hb) * G + ha;
  };

  KascadeSimilarity out;
  out.layers = L;
  out.groups = G;
  out.heads = options.heads;
  out.head.assign(pairs, 0.0);

  std::vector<double> prompt_score(pairs);
  std::vector<double> pooled;          // [layer][group][n] for the current query
  std::vector<std::vector<int>> tops;  // [layer][group]
  std::vector<double> top_mass(LG);    // Σ of each row over its own top-k
  for (const PromptAttention& p : prompts) {
    const bool use_min = options.over_tokens == KascadeTokenReduce::kMin;
    std::fill(prompt_score.begin(), prompt_score.end(), use_min ? std::numeric_limits<double>::infinity() : 0.0);
    for (int q = 0; q < p.queries; ++q) {
      const int n = p.keys - p.queries + q + 1;
      const int k = options.top_k.size(n);
      // Post-softmax pooling: the mean of the group's query-head rows.
      pooled.assign(LG * n, 0.0);
      for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
          const float* row = p.row(l, h, q);
          double* dst = pooled.data() + (static_cast<std::size_t>(l) * G + h / group_size) * n;
          for (int i = 0; i < n; ++i) dst[i] += row[i];
        }
      for (double& v : pooled) v /= group_size;
      tops.assign(LG, {});
      for (std::size_t lg = 0; lg < LG; ++lg) {
        const double* r = pooled.data() + lg * n;
        tops[lg] = top_k_of(r, n, k);
        double m = 0.0;
        for (int i : tops[lg]) m += r[i];
        top_mass[lg] = m;
      }
      for (int a = 0; a < L; ++a)
        for (int b = a; b < L; ++b)
          for (int hb = 0; hb < G; ++hb) {
            const std::size_t bg = static_cast<std::size_t>(b) * G + hb;
            const double* rb = pooled.data() + bg * n;
            for (int ha = 0; ha < G; ++ha) {
              double recovered = 0.0;
              for (int i : tops[static_cast<std::size_t>(a) * G + ha]) recovered += rb[i];
              // A row without mass (not a softmax row) loses nothing to any top-k.
              const double s = top_mass[bg] > 0.0 ? recovered / top_mass[bg] : 1.0;
              double& acc = prompt_score[pair_index(a, b, hb, ha)];
              acc = use_min ? std::min(acc, s) : acc + s;
            }
          }
    }
    for (std::size_t i = 0; i < pairs; ++i)
      out.head[i] += use_min ? prompt_score[i] : prompt_score[i] / p.queries;
  }
  for (int a = 0; a < L; ++a)
    for (int b = 0; b < L; ++b)
      for (int hb = 0; hb < G; ++hb)
        for (int ha = 0; ha < G; ++ha) {
          double& v = out.head[pair_index(a, b, hb, ha)];
          if (a > b) v = 0.0;
          else if (a == b && ha == hb) v = 1.0;  // a head's own top-k: exactly all of its top-k mass
          else v /= static_cast<double>(prompts.size());
        }

  out.layer.assign(static_cast<std::size_t>(L) * L, 0.0);
  for (int a = 0; a < L; ++a) {
    out.layer[static_cast<std::size_t>(a) * L + a] = 1.0;
    for (int b = a + 1; b < L; ++b) {
      double sum = 0.0;
      const std::vector<int> map = kascade_head_map(out, a, b);
      for (int hb = 0; hb < G; ++hb) sum += out.head_sim(a, map[static_cast<std::size_t>(hb)], b, hb);
      out.layer[static_cast<std::size_t>(a) * L + b] = sum / G;
    }
  }
  return out;
}

std::vector<int> kascade_head_map(const KascadeSimilarity& sim, int anchor, int layer) {
  if (anchor < 0 || layer >= sim.layers || anchor > layer)
    fail("kascade head map", "expected 0 <= anchor <= layer < " + std::to_string(sim.layers) + ", got anchor " +
                                 std::to_string(anchor) + " and layer " + std::to_string(layer));
  std::vector<int> map(static_cast<std::size_t>(sim.groups));
  std::iota(map.begin(), map.end(), 0);
  if (anchor == layer || sim.heads != KascadeHeads::kRemap) return map;
  for (int hb = 0; hb < sim.groups; ++hb) {
    int best = 0;
    for (int ha = 1; ha < sim.groups; ++ha)
      if (sim.head_sim(anchor, ha, layer, hb) > sim.head_sim(anchor, best, layer, hb)) best = ha;
    map[static_cast<std::size_t>(hb)] = best;
  }
  return map;
}

KascadeAnchors kascade_anchors(const std::vector<double>& S, int layers, int count, const std::vector<double>& weights) {
  const int L = layers;
  if (L <= 0 || S.size() != static_cast<std::size_t>(L) * L)
    fail("kascade anchors", "expected a " + std::to_string(L) + " x " + std::to_string(L) + " similarity matrix, got " +
                                std::to_string(S.size()) + " values");
  if (count < 1 || count > L)
    fail("kascade anchors", "expected an anchor count in [1, " + std::to_string(L) + "], got " + std::to_string(count));
  if (!weights.empty() && weights.size() != static_cast<std::size_t>(L))
    fail("kascade anchors", "expected " + std::to_string(L) + " layer weights, got " + std::to_string(weights.size()));

  // seg[i·(L+1) + j]: what layers [i, j) score with an anchor at i, summed in layer order.
  std::vector<double> seg(static_cast<std::size_t>(L) * (L + 1), 0.0);
  for (int i = 0; i < L; ++i)
    for (int j = i + 1; j <= L; ++j) {
      const double w = weights.empty() ? 1.0 : weights[static_cast<std::size_t>(j - 1)];
      seg[static_cast<std::size_t>(i) * (L + 1) + j] =
          seg[static_cast<std::size_t>(i) * (L + 1) + j - 1] + w * S[static_cast<std::size_t>(i) * L + (j - 1)];
    }
  const auto segment = [&](int i, int j) { return seg[static_cast<std::size_t>(i) * (L + 1) + j]; };

  // best[m][i]: the best score of layers [i, L) with m anchors, the first at i (−inf: impossible).
  // Filled from the back so that the walk forward can take, at every anchor, the earliest next
  // anchor that still reaches the optimum: the lexicographically smallest optimal list.
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(static_cast<std::size_t>(count) + 1,
                                        std::vector<double>(static_cast<std::size_t>(L), kNone));
  for (int i = 0; i < L; ++i) best[1][static_cast<std::size_t>(i)] = segment(i, L);
  const auto via = [&](int m, int i, int j) { return segment(i, j) + best[static_cast<std::size_t>(m) - 1][static_cast<std::size_t>(j)]; };
  for (int m = 2; m <= count; ++m)
    for (int i = 0; i + m <= L; ++i) {
      double b = kNone;
      for (int j = i + 1; j + (m - 1) <= L; ++j) b = std::max(b, via(m, i, j));
      best[static_cast<std::size_t>(m)][static_cast<std::size_t>(i)] = b;
    }

  KascadeAnchors out;
  out.score = best[static_cast<std::size_t>(count)][0];
  out.anchors.push_back(0);
  for (int m = count, i = 0; m > 1; --m) {
    int j = i + 1;
    while (via(m, i, j) != best[static_cast<std::size_t>(m)][static_cast<std::size_t>(i)]) ++j;
    out.anchors.push_back(j);
    i = j;
  }
  out.source.resize(static_cast<std::size_t>(L));
  for (std::size_t a = 0; a < out.anchors.size(); ++a) {
    const int end = a + 1 < out.anchors.size() ? out.anchors[a + 1] : L;
    for (int l = out.anchors[a]; l < end; ++l) out.source[static_cast<std::size_t>(l)] = out.anchors[a];
  }
  return out;
}

KascadePlan kascade_plan(const KascadeSimilarity& sim, int anchor_count, const std::vector<double>& weights) {
  KascadePlan plan;
  plan.anchors = kascade_anchors(sim.layer, sim.layers, anchor_count, weights);
  for (int l = 0; l < sim.layers; ++l)
    plan.head_map.push_back(kascade_head_map(sim, plan.anchors.source[static_cast<std::size_t>(l)], l));
  return plan;
}

}  // namespace luka
