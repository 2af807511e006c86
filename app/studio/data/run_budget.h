// What a live run will need beyond the loaded model, estimated before its prefill, and whether
// the machine has it: the KV cache, the prefill's attention probabilities (one layer at a time),
// and the recorded maps, which the live capture holds in memory up to its budget and spills to a
// temporary file beyond it (captures/live.h). A run that would not fit is refused with the numbers
// and what to change (record fewer layers, a smaller map cap), unless the user runs it anyway.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "captures/capture.h"

namespace luka::studio {

struct RunBudget {
  std::uint64_t kv = 0;             // keys and values of every layer for prompt + new tokens
  std::uint64_t prefill = 0;        // one layer's attention probabilities (fp32) and their half copy
  std::uint64_t maps = 0;           // the recorded pyramids, lower triangles, as encoded (about half of the raw halves)
  std::uint64_t map_memory = 0;     // of which the live capture keeps in memory
  std::uint64_t map_spill = 0;      // and writes to its temporary file
  std::uint64_t memory() const { return kv + prefill + map_memory; }
};

// `layout`: what the run records (make_layout); `kv_bytes_per_token`: 2 x layers x kv heads x
// head dim x the cache's element size; `map_budget`: the live capture's memory for map chunks.
RunBudget estimate_run(const capture::Layout& layout, int num_heads, std::int64_t prompt_tokens, std::int64_t new_tokens,
                       std::uint64_t kv_bytes_per_token, std::uint64_t map_budget);

// "" when the run fits in 90% of `free_memory` and of `free_disk` (the spill folder's), else the
// refusal: what it needs, what is free, and what to change.
std::string check_budget(const RunBudget& budget, std::uint64_t free_memory, std::uint64_t free_disk, const std::string& disk_folder);

// MemAvailable from /proc/meminfo (0 when unknown); the free bytes of a folder's file system (0 when unknown).
std::uint64_t available_memory();
std::uint64_t free_disk(const std::filesystem::path& folder);

// "1.3 GB", "512 MB".
std::string human_bytes(std::uint64_t bytes);

}  // namespace luka::studio
