#include "core/model/attention.h"

#include "kernels/cpu/dense_attention.h"

namespace luka {

at::Tensor DenseAttention::forward(const AttentionInputs& in) {
  return cpu::dense_causal_attention(in.q, in.k, in.v, in.q_pos0, in.scale);
}

}  // namespace luka
