// SemantiCache's compression (docs/papers/semanticache.md §2): the cache is cut at delimiter tokens, each
// chunk's keys are grouped by greedy seed-based clustering (GSC, the paper's Algorithm 1), every
// cluster is merged into one core by the mean of its keys and values, and attention over the cores
// adds log(cluster size) to each logit ("proportional attention", Eq. 4). Delimiter tokens stay
// raw, one-token units of their own. docs/methods.md states the choices the paper leaves open.
//
// Plain C++ on float rows, no LibTorch.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace luka {

// Which token texts cut the cache. The paper's set: . , ? ! ; : space tab newline.
struct DelimiterSet {
  enum class Match {
    kExact,     // the token's whole text is one delimiter (the paper: delimiter tokens)
    kComposed,  // the token's text is a run of delimiters, e.g. ".\n" or "\n\n"
  };
  std::vector<std::string> texts = {".", ",", "?", "!", ";", ":", " ", "\t", "\n"};
  Match match = Match::kExact;

  bool is_delimiter(std::string_view token_text) const;
};

// A run of positions [begin, end): a chunk of non-delimiter tokens, or one delimiter token.
struct SemanticUnit {
  int begin = 0, end = 0;
  bool delimiter = false;
};

// The paper's alternating sequence (C1, d1, C2, d2, …) over the tokens' texts (decoded, e.g. " the"):
// maximal runs of non-delimiters and one unit per delimiter token, in position order, covering
// every position once. Empty chunks (two delimiters in a row, a delimiter first) are left out.
std::vector<SemanticUnit> delimiter_chunks(const std::vector<std::string>& token_texts, const DelimiterSet& delimiters);

// Cosine similarity of two rows of `dim` floats, in double and clamped to [−1, 1] (so that τ = 1
// merges nothing even where rounding puts a parallel pair a hair above 1); 0 when either is zero.
double key_cosine(const float* a, const float* b, int dim);

// GSC on positions [begin, end) of keys [positions][dim] (row `stride` floats apart, stride >= dim):
// the first unassigned position seeds a cluster that takes every later unassigned position whose
// key's cosine with the seed's exceeds tau (strictly). Clusters in seed order, members ascending
// (the seed first).
std::vector<std::vector<int>> gsc_clusters(const float* keys, int dim, int stride, int begin, int end, double tau);

struct SemanticPagesOptions {
  double tau = 0.7;  // the paper's range: 0.5–0.9
};

// The compressed cache: one core per cluster or delimiter, in unit order, then seed order.
struct SemanticPages {
  int key_dim = 0, value_dim = 0;
  std::vector<std::vector<int>> members;  // per core, ascending positions (one for a delimiter)
  std::vector<unsigned char> raw;         // per core: 1 for a delimiter kept as it was
  std::vector<float> keys;                // [cores][key_dim], the members' mean key
  std::vector<float> values;              // [cores][value_dim], the members' mean value
  std::vector<float> bias;                // per core: log(member count), the proportional bias

  int cores() const { return static_cast<int>(members.size()); }
};

// Chunks, clusters and merges keys [positions][key_dim] and values [positions][value_dim], one row
// per position of `units` (which delimiter_chunks made). For one KV head pass its head's rows;
// passing every KV head's keys side by side gives one partition shared by the heads.
SemanticPages semantic_pages(const std::vector<SemanticUnit>& units, const float* keys, int key_dim,
                             const float* values, int value_dim, const SemanticPagesOptions& options);

// One query over the cores: softmax(scale · q·k̂ + log|S|) v̂, with q matched against `dim` key
// columns from key_offset and the output taken from `value_width` value columns from value_offset
// (one head's slice when the cores hold several heads side by side). Writes value_width floats.
// Equals dense attention when every cluster holds one token.
void proportional_attention(const float* query, const SemanticPages& pages, int key_offset, int dim,
                            int value_offset, int value_width, double scale, float* out);

}  // namespace luka
