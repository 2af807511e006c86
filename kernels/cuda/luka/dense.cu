// Dense mode of the LuKA step on the GPU (pairs with core/luka/cpu/dense.cpp): the dense decode
// attention of kernels/cuda/decode_attention.h, then the effective row and the accumulators.
#include "kernels/cuda/luka_decode.h"

#include "kernels/cuda/luka/step.cuh"

namespace luka::cuda {

std::size_t luka_dense_workspace_bytes(const DecodeCommon& a) {
  Bump b(nullptr);
  b.take<float>(decode_attention_workspace_floats(a.heads, a.kv.kv_heads, a.kv.head_dim, a.kv.tokens, a.splits));
  b.take<float>(a.heads * a.kv.tokens);
  b.take<float>(2 * a.heads);
  return b.bytes();
}

std::string luka_dense_decode(const DecodeCommon& a, void* workspace, std::size_t workspace_bytes, void* stream) {
  if (std::string e = check_common(a); !e.empty()) return e;
  if (!workspace || workspace_bytes < luka_dense_workspace_bytes(a)) return "workspace missing or too small";
  Bump b(workspace);
  DecodeAttentionArgs d;
  d.type = a.kv.type;
  d.q = a.q;
  d.k = a.kv.k;
  d.v = a.kv.v;
  d.out = a.out;
  d.heads = a.heads;
  d.kv_heads = a.kv.kv_heads;
  d.tokens = a.kv.tokens;
  d.head_dim = a.kv.head_dim;
  d.head_stride = a.kv.head_stride;
  d.token_stride = a.kv.token_stride;
  d.scale = a.scale;
  d.splits = a.splits;
  d.workspace = b.take<float>(decode_attention_workspace_floats(a.heads, a.kv.kv_heads, a.kv.head_dim, a.kv.tokens, a.splits));
  d.logits = b.take<float>(a.heads * a.kv.tokens);
  d.norm = b.take<float>(2 * a.heads);
  if (std::string e = dense_decode_attention(d, stream); !e.empty()) return e;
  launch_accumulate(a, d.logits, d.norm, static_cast<cudaStream_t>(stream));
  return launch_error();
}

}  // namespace luka::cuda
