#include "core/luka/methods/semantic_pages.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/util/error.h"

namespace luka {

bool DelimiterSet::is_delimiter(std::string_view text) const {
  if (text.empty()) return false;
  if (match == Match::kExact) return std::find(texts.begin(), texts.end(), text) != texts.end();
  // kComposed: can text be cut into delimiters? reach[i]: its first i bytes can.
  std::vector<unsigned char> reach(text.size() + 1, 0);
  reach[0] = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!reach[i]) continue;
    for (const std::string& d : texts)
      if (!d.empty() && text.compare(i, d.size(), d) == 0) reach[i + d.size()] = 1;
  }
  return reach[text.size()] != 0;
}

std::vector<SemanticUnit> delimiter_chunks(const std::vector<std::string>& token_texts, const DelimiterSet& delimiters) {
  std::vector<SemanticUnit> units;
  const int n = static_cast<int>(token_texts.size());
  int chunk_begin = 0;
  for (int t = 0; t < n; ++t) {
    if (!delimiters.is_delimiter(token_texts[static_cast<std::size_t>(t)])) continue;
    if (chunk_begin < t) units.push_back({chunk_begin, t, false});
    units.push_back({t, t + 1, true});
    chunk_begin = t + 1;
  }
  if (chunk_begin < n) units.push_back({chunk_begin, n, false});
  return units;
}

double key_cosine(const float* a, const float* b, int dim) {
  double ab = 0.0, aa = 0.0, bb = 0.0;
  for (int i = 0; i < dim; ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  if (aa == 0.0 || bb == 0.0) return 0.0;
  // One square root of the product: a key against itself gives exactly 1 (sqrt(x²) = x in IEEE).
  return std::clamp(ab / std::sqrt(aa * bb), -1.0, 1.0);
}

std::vector<std::vector<int>> gsc_clusters(const float* keys, int dim, int stride, int begin, int end, double tau) {
  std::vector<std::vector<int>> clusters;
  std::vector<unsigned char> assigned(static_cast<std::size_t>(std::max(0, end - begin)), 0);
  const auto row = [&](int t) { return keys + static_cast<std::size_t>(t) * stride; };
  for (int i = begin; i < end; ++i) {
    if (assigned[static_cast<std::size_t>(i - begin)]) continue;
    std::vector<int> cluster{i};
    for (int j = i + 1; j < end; ++j) {
      if (assigned[static_cast<std::size_t>(j - begin)]) continue;
      if (key_cosine(row(i), row(j), dim) > tau) {
        cluster.push_back(j);
        assigned[static_cast<std::size_t>(j - begin)] = 1;
      }
    }
    clusters.push_back(std::move(cluster));
  }
  return clusters;
}

namespace {

// Appends the mean of rows[members] ([positions][width]) to out.
void append_mean(const float* rows, int width, const std::vector<int>& members, std::vector<float>& out) {
  std::vector<double> sum(static_cast<std::size_t>(width), 0.0);
  for (int t : members)
    for (int c = 0; c < width; ++c) sum[static_cast<std::size_t>(c)] += rows[static_cast<std::size_t>(t) * width + c];
  for (double s : sum) out.push_back(static_cast<float>(s / static_cast<double>(members.size())));
}

}  // namespace

SemanticPages semantic_pages(const std::vector<SemanticUnit>& units, const float* keys, int key_dim,
                             const float* values, int value_dim, const SemanticPagesOptions& options) {
  if (key_dim <= 0 || value_dim <= 0)
    fail("semantic pages", "expected positive key and value widths, got " + std::to_string(key_dim) + " and " +
                               std::to_string(value_dim));
  SemanticPages pages;
  pages.key_dim = key_dim;
  pages.value_dim = value_dim;
  const auto add_core = [&](std::vector<int> members, bool raw) {
    append_mean(keys, key_dim, members, pages.keys);
    append_mean(values, value_dim, members, pages.values);
    pages.bias.push_back(static_cast<float>(std::log(static_cast<double>(members.size()))));
    pages.raw.push_back(raw ? 1 : 0);
    pages.members.push_back(std::move(members));
  };
  int expected_begin = 0;
  for (const SemanticUnit& u : units) {
    if (u.begin != expected_begin || u.end <= u.begin || (u.delimiter && u.end != u.begin + 1))
      fail("semantic pages", "units must cover positions 0, 1, … in order with one position per delimiter; unit [" +
                                 std::to_string(u.begin) + ", " + std::to_string(u.end) + ") follows position " +
                                 std::to_string(expected_begin));
    expected_begin = u.end;
    if (u.delimiter) {
      add_core({u.begin}, true);
      continue;
    }
    for (std::vector<int>& c : gsc_clusters(keys, key_dim, key_dim, u.begin, u.end, options.tau)) add_core(std::move(c), false);
  }
  return pages;
}

void proportional_attention(const float* query, const SemanticPages& pages, int key_offset, int dim,
                            int value_offset, int value_width, double scale, float* out) {
  if (key_offset < 0 || dim <= 0 || key_offset + dim > pages.key_dim || value_offset < 0 || value_width <= 0 ||
      value_offset + value_width > pages.value_dim)
    fail("proportional attention", "the key or value slice lies outside the cores' rows");
  const int n = pages.cores();
  std::vector<double> logit(static_cast<std::size_t>(n));
  double top = -std::numeric_limits<double>::infinity();
  for (int c = 0; c < n; ++c) {
    const float* k = pages.keys.data() + static_cast<std::size_t>(c) * pages.key_dim + key_offset;
    double dot = 0.0;
    for (int i = 0; i < dim; ++i) dot += static_cast<double>(query[i]) * k[i];
    logit[static_cast<std::size_t>(c)] = scale * dot + pages.bias[static_cast<std::size_t>(c)];
    top = std::max(top, logit[static_cast<std::size_t>(c)]);
  }
  std::vector<double> acc(static_cast<std::size_t>(value_width), 0.0);
  double total = 0.0;
  for (int c = 0; c < n; ++c) {
    const double w = std::exp(logit[static_cast<std::size_t>(c)] - top);
    total += w;
    const float* v = pages.values.data() + static_cast<std::size_t>(c) * pages.value_dim + value_offset;
    for (int i = 0; i < value_width; ++i) acc[static_cast<std::size_t>(i)] += w * v[i];
  }
  for (int i = 0; i < value_width; ++i)
    out[i] = n == 0 ? 0.0f : static_cast<float>(acc[static_cast<std::size_t>(i)] / total);
}

}  // namespace luka
