// The dense shadow (docs/design.md §5.5), device-neutral: dense attention on a decode step's inputs,
// compared with what a mode produced. The CPU core and the GPU path both call it when a layer's
// config asks for it.
#pragma once

#include <vector>

#include <ATen/ATen.h>

#include "core/luka/luka_layer.h"

namespace luka {

// Dense attention on the same inputs as `step` (a decode step whose effective rows and output `out`
// [H, D] a mode produced, on any device), per head: KL(dense ‖ effective), recall, top-k overlap and
// the output's relative error into step.fidelity, the dense rows into step.dense (both on the CPU).
void dense_shadow(const AttentionInputs& in, const at::Tensor& out, const std::vector<Page>& pages, LukaStep& step);

}  // namespace luka
