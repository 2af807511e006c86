#include "core/model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/util/error.h"

namespace luka {

KvCache::KvCache(std::int64_t n_kv_heads, std::int64_t head_dim, std::int64_t max_tokens, at::ScalarType dtype,
                 at::Device device)
    : n_kv_heads_(n_kv_heads), head_dim_(head_dim), max_tokens_(max_tokens), dtype_(dtype), device_(device) {}

void KvCache::reserve(std::int64_t tokens) { grow(std::min(tokens, max_tokens_), /*exact=*/true); }

void KvCache::grow(std::int64_t tokens, bool exact) {
  if (tokens <= capacity()) return;
  if (tokens > max_tokens_)
    fail("kv cache", std::to_string(tokens) + " tokens exceed the limit of " + std::to_string(max_tokens_));
  // Unreserved growth doubles: the number of copies stays logarithmic in the sequence length.
  const std::int64_t cap = exact ? tokens : std::min(max_tokens_, std::max({tokens, 2 * capacity(), std::int64_t{64}}));
  at::Tensor k = at::empty({n_kv_heads_, cap, head_dim_}, at::TensorOptions().dtype(dtype_).device(device_));
  at::Tensor v = at::empty({n_kv_heads_, cap, head_dim_}, at::TensorOptions().dtype(dtype_).device(device_));
  if (length_ > 0) {
    k.narrow(1, 0, length_).copy_(keys());
    v.narrow(1, 0, length_).copy_(values());
  }
  k_ = std::move(k);
  v_ = std::move(v);
}

void KvCache::append(const at::Tensor& k, const at::Tensor& v) {
  const std::int64_t n = k.size(1);
  grow(length_ + n, /*exact=*/false);
  k_.narrow(1, length_, n).copy_(k);
  v_.narrow(1, length_, n).copy_(v);
  length_ += n;
}

void KvCache::append_row(const void* k, const void* v) {
  if (!device_.is_cpu()) fail("kv cache", "append_row needs a CPU cache");
  grow(length_ + 1, /*exact=*/false);
  const std::size_t row = static_cast<std::size_t>(head_dim_) * k_.element_size();
  auto* kd = static_cast<std::uint8_t*>(k_.data_ptr());
  auto* vd = static_cast<std::uint8_t*>(v_.data_ptr());
  const std::size_t head_stride = static_cast<std::size_t>(k_.size(1)) * row;
  for (std::int64_t g = 0; g < n_kv_heads_; ++g) {
    std::memcpy(kd + static_cast<std::size_t>(g) * head_stride + static_cast<std::size_t>(length_) * row,
                static_cast<const std::uint8_t*>(k) + static_cast<std::size_t>(g) * row, row);
    std::memcpy(vd + static_cast<std::size_t>(g) * head_stride + static_cast<std::size_t>(length_) * row,
                static_cast<const std::uint8_t*>(v) + static_cast<std::size_t>(g) * row, row);
  }
  ++length_;
}

}  // namespace luka
