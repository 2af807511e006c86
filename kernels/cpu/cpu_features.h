// What this CPU and this process can run, detected once: the instruction sets the quantized
// products choose between (quant_gemv.h) and the AMX tile state, which Linux hands a process only
// when it asks (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)): a tile instruction before
// that, or after a refusal, stops the process with SIGILL.
#pragma once

namespace luka::cpu {

struct CpuFeatures {
  bool avx2 = false;         // with FMA and F16C
  bool avx512 = false;       // F, BW, DQ, VL (with AVX2, FMA, F16C)
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool amx_tile = false;     // CPUID and the OS's XSAVE state (XCR0 bits 17, 18) both say so
  bool amx_int8 = false;
  bool amx_bf16 = false;
};
const CpuFeatures& cpu_features();

enum class AmxTileState {
  kGranted,   // the kernel gave this process the tile state
  kNoCpu,     // the CPU (or the OS's XSAVE setup) has no AMX tiles
  kRefused,   // the kernel refused the request (an old kernel, a sandbox)
  kDisabled,  // LUKA_AMX=off: treated as refused without asking, for tests and comparisons
};

// Asks once per process, on the first call, and remembers the answer; thread-safe. Only
// kGranted allows tile instructions. LUKA_AMX=off gives kDisabled; any other value but "on" or
// empty throws std::invalid_argument naming the variable.
AmxTileState amx_tile_state();
const char* amx_tile_state_text(AmxTileState state);

}  // namespace luka::cpu
