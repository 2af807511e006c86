#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>

#include "core/util/allocator.h"

namespace {

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Allocates `bytes`, writes every page, frees it; returns the minor page faults that took.
long faults_of_one_use(std::size_t bytes) {
  const long before = minor_faults();
  auto* p = static_cast<volatile char*>(std::malloc(bytes));
  if (!p) return -1;
  for (std::size_t i = 0; i < bytes; i += 4096) p[i] = static_cast<char>(i);
  std::free(const_cast<char*>(p));
  return minor_faults() - before;
}

TEST(Allocator, LeavesAUserTunedAllocatorAloneAndOtherwiseReusesFreedBlocks) {
#if defined(__GLIBC__)
  const char* saved = std::getenv("GLIBC_TUNABLES");
  const std::string keep = saved ? saved : "";
  setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1000000", 1);
  EXPECT_FALSE(luka::tune_allocator_for_inference());
  setenv("MALLOC_TRIM_THRESHOLD_", "1000000", 1);
  unsetenv("GLIBC_TUNABLES");
  EXPECT_FALSE(luka::tune_allocator_for_inference());
  unsetenv("MALLOC_TRIM_THRESHOLD_");
  if (saved) setenv("GLIBC_TUNABLES", keep.c_str(), 1);
  if (saved && std::strstr(saved, "glibc.malloc.")) GTEST_SKIP() << "GLIBC_TUNABLES sets the allocator for this process";
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer replaces glibc's malloc: nothing to tune";
#endif

  ASSERT_TRUE(luka::tune_allocator_for_inference());
  // An activation-sized block (8 MiB, 2,048 pages) freed and allocated again: the second use
  // finds its pages already mapped (glibc's defaults map such a block afresh each time).
  constexpr std::size_t kBytes = 8u << 20;
  ASSERT_GE(faults_of_one_use(kBytes), 0);
  const long again = faults_of_one_use(kBytes);
  EXPECT_LT(again, 64) << "page faults on reusing a freed 8 MiB block";
#else
  EXPECT_FALSE(luka::tune_allocator_for_inference());
#endif
}

}  // namespace
