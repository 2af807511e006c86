#include "core/press/quest.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/util/error.h"

namespace luka::press {

QuestPages quest_pages(const at::Tensor& keys, std::int64_t page_size) {
  if (page_size < 1) fail("quest", "page_size must be 1 or more, not " + std::to_string(page_size));
  if (!keys.defined() || keys.dim() != 3 || keys.size(1) < 1)
    fail("quest", "keys must be [kv_heads, T, head_dim] with T >= 1");
  const std::int64_t H = keys.size(0), T = keys.size(1), d = keys.size(2);
  const std::int64_t P = (T + page_size - 1) / page_size;
  const at::Tensor k = keys.to(at::kFloat).contiguous();
  QuestPages out;
  out.page_size = page_size;
  out.tokens = T;
  // Pad the last page with copies of its own first row, so min/max are over its real keys only.
  at::Tensor padded = k;
  if (P * page_size > T) {
    const at::Tensor fill = k.select(1, (P - 1) * page_size).unsqueeze(1).expand({H, P * page_size - T, d});
    padded = at::cat({k, fill}, 1);
  }
  const at::Tensor paged = padded.view({H, P, page_size, d});
  out.min = std::get<0>(paged.min(2)).contiguous();
  out.max = std::get<0>(paged.max(2)).contiguous();
  return out;
}

at::Tensor quest_bounds(const QuestPages& pages, const at::Tensor& query) {
  const std::int64_t H = pages.min.size(0), d = pages.min.size(2);
  if (!query.defined() || query.dim() != 2 || query.size(1) != d || query.size(0) % H != 0)
    fail("quest", "query must be [heads, " + std::to_string(d) + "] with heads a multiple of " + std::to_string(H));
  const std::int64_t group = query.size(0) / H;
  const at::Tensor q = query.to(at::kFloat).unsqueeze(1);  // [heads, 1, d]
  const at::Tensor lo = pages.min.repeat_interleave(group, 0), hi = pages.max.repeat_interleave(group, 0);
  return at::maximum(q * lo, q * hi).sum(2);  // [heads, pages]
}

std::vector<std::vector<std::int64_t>> quest_select(const QuestPages& pages, const at::Tensor& query,
                                                    std::int64_t pages_kept, std::int64_t recent) {
  if (pages_kept < 0 || recent < 0) fail("quest", "pages and the recent window must not be negative");
  const at::Tensor bounds = quest_bounds(pages, query).contiguous();
  if (at::isnan(bounds).any().item<bool>()) fail("quest", "a page bound is NaN (NaN in the keys or the query?)");
  const std::int64_t heads = bounds.size(0), P = bounds.size(1), T = pages.tokens, S = pages.page_size;
  const std::int64_t window_start = std::max<std::int64_t>(0, T - recent);
  const std::int64_t candidates = std::min(P, (window_start + S - 1) / S);  // pages that begin before the window
  const std::int64_t take = std::min(pages_kept, candidates);
  const float* b = bounds.data_ptr<float>();
  std::vector<std::vector<std::int64_t>> out(static_cast<std::size_t>(heads));
  std::vector<std::int64_t> order(static_cast<std::size_t>(candidates));
  for (std::int64_t h = 0; h < heads; ++h) {
    const float* row = b + h * P;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + take, order.end(),
                      [row](std::int64_t x, std::int64_t y) { return row[x] != row[y] ? row[x] > row[y] : x < y; });
    std::vector<char> in(static_cast<std::size_t>(T), 0);
    for (std::int64_t i = 0; i < take; ++i)
      for (std::int64_t t = order[i] * S; t < std::min(T, (order[i] + 1) * S); ++t) in[static_cast<std::size_t>(t)] = 1;
    for (std::int64_t t = window_start; t < T; ++t) in[static_cast<std::size_t>(t)] = 1;
    auto& sel = out[static_cast<std::size_t>(h)];
    for (std::int64_t t = 0; t < T; ++t)
      if (in[static_cast<std::size_t>(t)]) sel.push_back(t);
  }
  return out;
}

}  // namespace luka::press
