// Kascade's calibration (docs/papers/kascade.md §3.2–3.5): how well one layer's top-k keys serve a later
// layer, which layers become anchors, and which anchor head each reuse head borrows from.
//
// sim(a, b) for a query token q is the share of layer b's top-k attention mass that layer a's
// top-k keys recover (the paper's Eq. 3):
//   sim(a, b)_q = Σ_{i ∈ I^a_q} P^b_q[i] / Σ_{i ∈ I^b_q} P^b_q[i],   I^l_q = topk(P^l_q, k).
// P is post-softmax attention pooled over the query heads of one KV head (the decode GQA
// pooling of §3.4), or over all heads with the shared top-k of the §3.5 ablation. A prompt's
// score is the minimum over its query tokens (what the paper uses for anchor selection; the mean
// is an option); the development set's is the mean over prompts. Head remapping (§3.5) picks, for
// every head of b, the head of a with the highest such score, and the layer matrix averages the
// mapped scores over b's heads. docs/methods.md states the choices the paper leaves open.
//
// Plain C++ on float rows, no LibTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace luka {

// How many keys a top-k keeps out of the n a query can see.
struct KascadeTopK {
  int count = 64;         // used when fraction is 0
  double fraction = 0.0;  // > 0: ceil(fraction · n), at least min_count
  int min_count = 0;      // with a fraction (the paper's runs: 10% with a minimum of 128)
  // Always in [min(1, n), n].
  int size(int n) const;
};

enum class KascadeHeads {
  kRemap,     // each reuse head borrows the anchor head most similar to it (the paper's default)
  kIdentity,  // head g borrows head g
  kShared,    // one top-k per layer, pooled over all query heads (the paper's ablation)
};

enum class KascadeTokenReduce { kMin, kMean };

struct KascadeOptions {
  KascadeTopK top_k;
  KascadeHeads heads = KascadeHeads::kRemap;
  KascadeTokenReduce over_tokens = KascadeTokenReduce::kMin;
};

// One prompt's post-softmax attention, every layer and query head, causal: query i stands at
// position keys − queries + i and sees keys [0, keys − queries + i]; later entries are ignored.
struct PromptAttention {
  int layers = 0, heads = 0, kv_heads = 0;  // heads: query heads, a multiple of kv_heads
  int queries = 0, keys = 0;
  // row(layer, head, query): `keys` floats. Valid for the call that receives the source.
  std::function<const float*(int layer, int head, int query)> row;
};

// Wraps rows laid out [layers][heads][queries][keys] (the array must outlive the result).
PromptAttention prompt_attention(const float* rows, int layers, int heads, int kv_heads, int queries, int keys);

// The top-k positions of p[0, n), best first: higher value, then lower position on ties.
std::vector<int> kascade_top_k(const float* p, int n, int k);

struct KascadeSimilarity {
  int layers = 0;
  int groups = 0;  // heads with their own top-k: the KV heads, or 1 with kShared
  KascadeHeads heads = KascadeHeads::kRemap;
  // head[((a·L + b)·G + hb)·G + ha]: the score of b's head hb reusing a's head ha, for a <= b
  // (1 on the diagonal a = b, ha = hb); 0 for a > b.
  std::vector<double> head;
  // layer[a·L + b]: the layers × layers matrix the anchor selection uses, for a <= b (1 for a = b);
  // 0 for a > b.
  std::vector<double> layer;

  double head_sim(int a, int ha, int b, int hb) const;
  double layer_sim(int a, int b) const { return layer[static_cast<std::size_t>(a) * layers + b]; }
};

// sim over a development set: per prompt over its query tokens (min or mean), then the mean over
// prompts. Throws luka::Error when the prompts disagree on layers or heads, or a shape is invalid.
KascadeSimilarity kascade_similarity(const std::vector<PromptAttention>& prompts, const KascadeOptions& options);

// For every head of `layer`, the head of `anchor` (anchor <= layer) whose top-k serves it best:
// the maximum head_sim, ties to the lower head; many heads may share one. Identity for kIdentity,
// {0} for kShared.
std::vector<int> kascade_head_map(const KascadeSimilarity& sim, int anchor, int layer);

struct KascadeAnchors {
  std::vector<int> anchors;  // ascending, anchors[0] = 0
  std::vector<int> source;   // per layer: the anchor it takes its top-k from (itself for an anchor)
  double score = 0.0;        // Σ_l S[source(l)][l]
};

// The paper's dynamic program (Algorithm 1): `count` anchors among layers × layers similarity S
// (row-major, S[a·layers + b], only a <= b read), layer 0 always one of them, every other layer
// reusing the nearest anchor at or before it, maximising Σ_l S[source(l)][l] (anchors count
// S[l][l]). With `weights` (one per layer, e.g. the paper's attention importance) the term of
// layer l is weights[l]·S[source(l)][l]. Ties: of the optimal anchor lists, the lexicographically
// smallest. Throws luka::Error unless 1 <= count <= layers.
KascadeAnchors kascade_anchors(const std::vector<double>& S, int layers, int count,
                               const std::vector<double>& weights = {});

// Anchors and head maps together.
struct KascadePlan {
  KascadeAnchors anchors;
  std::vector<std::vector<int>> head_map;  // per layer: kascade_head_map(source, layer)
};
KascadePlan kascade_plan(const KascadeSimilarity& sim, int anchor_count, const std::vector<double>& weights = {});

}  // namespace luka
