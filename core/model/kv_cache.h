// One layer's key/value cache: preallocated [n_kv_heads, capacity, head_dim] buffers that grow
// geometrically, so a decode step writes one row per head instead of concatenating.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace luka {

class KvCache {
 public:
  KvCache(std::int64_t n_kv_heads, std::int64_t head_dim, std::int64_t max_tokens, at::ScalarType dtype,
          at::Device device = at::kCPU);

  // k, v: [n_kv_heads, n_new, head_dim]. Throws luka::Error past max_tokens.
  void append(const at::Tensor& k, const at::Tensor& v);
  // One token from host memory (a CPU cache only): k, v are [n_kv_heads, head_dim] contiguous in
  // the cache's dtype. The decode step's append, without building tensors.
  void append_row(const void* k, const void* v);
  // Views [n_kv_heads, length, head_dim] into the buffers (valid until the next append).
  at::Tensor keys() const { return k_.narrow(1, 0, length_); }
  at::Tensor values() const { return v_.narrow(1, 0, length_); }
  std::int64_t length() const { return length_; }
  std::int64_t capacity() const { return k_.defined() ? k_.size(1) : 0; }
  // Forget the tokens; keep the memory for the next sequence.
  void reset() { length_ = 0; }
  // Room for `tokens` in all (clamped to max_tokens), allocated at exactly that size: a run that
  // knows its length (prompt + new tokens) reserves it once, so no step regrows the buffers (a
  // regrow copies the whole cache; after a full prefill, the first decode step would double it).
  // Never shrinks.
  void reserve(std::int64_t tokens);

 private:
  void grow(std::int64_t tokens, bool exact);
  std::int64_t n_kv_heads_, head_dim_, max_tokens_;
  at::ScalarType dtype_;
  at::Device device_;
  at::Tensor k_, v_;
  std::int64_t length_ = 0;
};

}  // namespace luka
