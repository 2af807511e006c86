#include "kernels/cpu/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace luka::cpu {

namespace {

// From the Linux UAPI (asm/prctl.h) and the XSAVE feature numbers; spelled out because older
// headers lack them.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

unsigned long long xgetbv0() {
  unsigned eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<unsigned long long>(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    // CPUID.7.0:EDX bit 24 AMX-TILE, 25 AMX-INT8, 22 AMX-BF16; OSXSAVE (CPUID.1:ECX bit 27) before xgetbv.
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    const bool osxsave = __get_cpuid(1, &a1, &b1, &c1, &d1) && (c1 & (1u << 27)) != 0;
    const bool tile_os = osxsave && (xgetbv0() & (3ull << 17)) == (3ull << 17);
    f.amx_tile = tile_os && (d & (1u << 24)) != 0;
    f.amx_int8 = f.amx_tile && (d & (1u << 25)) != 0;
    f.amx_bf16 = f.amx_tile && (d & (1u << 22)) != 0;
  }
  return f;
}

AmxTileState request_tile_state() {
  const char* env = std::getenv("LUKA_AMX");
  const std::string want = env == nullptr ? "" : env;
  if (want == "off") return AmxTileState::kDisabled;
  if (!want.empty() && want != "on") throw std::invalid_argument("LUKA_AMX=" + want + ": expected on or off");
  if (!cpu_features().amx_tile) return AmxTileState::kNoCpu;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0 ? AmxTileState::kGranted : AmxTileState::kRefused;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

AmxTileState amx_tile_state() {
  static const AmxTileState state = request_tile_state();
  return state;
}

const char* amx_tile_state_text(AmxTileState state) {
  switch (state) {
    case AmxTileState::kGranted: return "granted";
    case AmxTileState::kNoCpu: return "no AMX tiles on this CPU";
    case AmxTileState::kRefused: return "the kernel refused the tile state (arch_prctl ARCH_REQ_XCOMP_PERM)";
    case AmxTileState::kDisabled: return "switched off by LUKA_AMX=off";
  }
  return "?";
}

}  // namespace luka::cpu
