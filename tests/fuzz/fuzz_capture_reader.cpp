// Fuzz target for the capture reader (captures/reader.cpp) on mutated HDF5 files: the input is
// written to a scratch file, opened, and every query of CaptureView is made over the recorded
// layers and heads (the first and last of each), levels (up to three) and steps (the first, the
// last complete one and the one past it). Any file must open or fail with a luka::Error, and so
// must every query; nothing may crash, leak or allocate without bound.
// HDF5 itself is not instrumented: libFuzzer's coverage guides through the reader's checks only.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "captures/reader.h"
#include "core/util/error.h"

namespace {

namespace fs = std::filesystem;

struct ScratchFile {
  fs::path path = fs::temp_directory_path() / ("luka-fuzz-capture-" + std::to_string(::getpid()) + ".h5");
  ~ScratchFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

// The ends of a layout list, its first and last entries: the queries of one input stay bounded
// however long the file's lists are (the reader's own work on a long list is still exercised by
// open and storage), and each query meets both ends of each range. The queries are three quarters
// of a run's time; indices in between take the same paths as the ends.
std::vector<int> ends(const std::vector<int>& v) {
  if (v.size() <= 2) return v;
  return {v.front(), v.back()};
}

// Runs one query; its luka::Error is an answer like any other.
void query(const std::function<void()>& f) {
  try {
    f();
  } catch (const luka::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ScratchFile scratch;
  {
    std::ofstream out(scratch.path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::unique_ptr<luka::capture::CaptureFile> file;
  try {
    // One metadata read attempt: nothing writes the scratch file, so a block whose checksum fails
    // fails again on every retry, and the retries' sleeps took three quarters of the time.
    file = luka::capture::CaptureFile::open(scratch.path, 1);
  } catch (const luka::Error&) {
    return 0;  // rejected cleanly: the expected outcome for most inputs
  }
  const luka::capture::Summary s = file->summary();
  query([&] { (void)file->tokens(); });
  query([&] { (void)file->segments(); });
  query([&] { (void)file->storage(); });
  (void)file->file_bytes();
  // The first step, the last complete one (a damaged count as the file gives it) and the one past
  // it, which must be refused.
  std::vector<std::int64_t> steps = {1};
  if (s.complete_steps != 1) steps.push_back(s.complete_steps);
  if (s.complete_steps < INT64_MAX && s.complete_steps + 1 != 1) steps.push_back(s.complete_steps + 1);
  for (const int layer : ends(s.layout.layers)) {
    query([&] { (void)file->pages(layer); });
    for (const int head : ends(s.layout.heads)) {
      // Every level up to three: each is stored apart (its own dataset, chunks and shape).
      const std::vector<int>& levels = s.layout.levels;
      for (std::size_t i = 0; i < std::min<std::size_t>(levels.size(), 3); ++i)
        query([&] { (void)file->map_window(layer, head, levels[i], 0, 0, 16, 16); });
      for (const std::int64_t step : steps) {
        query([&] { (void)file->row(step, layer, head); });
        query([&] { (void)file->dense_row(step, layer, head); });
        query([&] { (void)file->cover(step, layer, head); });
        query([&] { (void)file->page_states(step, layer, head); });
        query([&] { (void)file->summary_mass(step, layer, head); });
      }
    }
    for (const std::int64_t step : steps) query([&] { (void)file->metrics(step, layer); });
  }
  return 0;
}
