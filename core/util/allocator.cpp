#include "core/util/allocator.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace luka {

bool tune_allocator_for_inference() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc.")) return false;
  for (const char* v : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"})
    if (std::getenv(v)) return false;
  constexpr int kMmapThreshold = 32 << 20;  // glibc refuses more (HEAP_MAX_SIZE / 2 on 64-bit)
  constexpr int kTrimThreshold = 256 << 20;
  // Setting either threshold also stops glibc from moving them on its own.
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;
#endif
}

}  // namespace luka
