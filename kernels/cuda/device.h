// CUDA device discovery, with a plain C++ API (no LibTorch), so that the CLI and the tests can ask
// whether a GPU is there without loading LibTorch's CUDA libraries. The kernels live beside it
// (decode_attention, luka_decode, and luka/: the LuKA step by mode and the layer state).
#pragma once

#include <cstdint>
#include <string>

namespace luka::cuda {

// Number of usable CUDA devices. A missing driver or no GPU means 0, not an error.
int device_count();

// "NVIDIA H100 80GB HBM3 (sm_90, 79 GiB)" for device `index`; empty when there is none.
std::string device_name(int index);

}  // namespace luka::cuda
