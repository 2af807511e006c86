// Process-wide settings of the C allocator for running models on the CPU.
#pragma once

namespace luka {

// With glibc's defaults, a block of at least 128 KiB (a threshold that rises only as large
// blocks are freed) is mapped fresh from the kernel on every allocation and unmapped when freed,
// and free memory above 128 KiB at the top of the heap goes back to the kernel. A forward pass
// allocates and frees the same activation-sized blocks over and over, so each of them is
// page-faulted in again every time (on the default model about 160,000 extra faults per 1,024-token
// run, a third of a CPU-second of system time). This keeps blocks below 32 MiB (glibc's largest
// threshold) on the heap and lets up to 256 MiB of freed heap stay with the process for reuse.
// Larger blocks (weights, big tensors) are still mapped and unmapped as before.
//
// Leaves everything as it is where the user tunes the allocator (GLIBC_TUNABLES with a
// glibc.malloc setting, or a MALLOC_*_ variable) and on C libraries other than glibc. Call it
// once, first thing in main. Returns whether it changed anything.
bool tune_allocator_for_inference();

}  // namespace luka
