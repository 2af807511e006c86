// Writes what a CaptureView holds (a live run in memory, or another capture file) to a capture
// file through the CaptureWriter, so the result is an ordinary capture: `luka inspect`,
// `luka export` and replay open it like one written during a run. The Studio's "Save capture
// as…" uses it. Values are copied exactly: maps and rows travel as IEEE halves (the view's floats
// are halves widened, so narrowing them again is exact), covers and metrics unchanged.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>

#include "captures/capture.h"

namespace luka::capture {

struct SaveOptions {
  // Called now and then with the fraction done (0..1), on the saving thread.
  std::function<void(double)> progress;
  // Set from another thread to give up: save_view then throws luka::Error "... cancelled".
  const std::atomic<bool>* cancel = nullptr;
};

struct SaveResult {
  std::int64_t steps = 0, tokens = 0;
  std::uint64_t bytes = 0;  // the file's size
};

// Writes the view's complete steps (a run still going is cut at the steps complete when the save
// starts) to `path`, through "<path>.partial" renamed over it when whole: a file already at the
// path stays intact until then, and a failed or cancelled save removes its .partial file. The
// written file is marked finished. Throws luka::Error naming the file (or the view's file for a
// read error) when something fails.
SaveResult save_view(const CaptureView& view, const std::filesystem::path& path, const SaveOptions& options = {});

}  // namespace luka::capture
