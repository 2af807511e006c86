// Writing a user's output file safely, in one place:
// - AtomicOutput: the bytes go to a temporary file beside the target and are renamed over it only
//   when complete, so a failed or interrupted write (a full disk, an error half-way) never leaves
//   a partial file, and an old file at the path stays whole until the new one replaces it.
// - OutputLock: an exclusive lock on an output path for as long as a writer holds it (captures,
//   which are written in place so that a killed run leaves its complete steps readable), so a
//   second run on the same path is refused instead of destroying the first one's file.
#pragma once

#include <filesystem>
#include <string>

namespace luka {

class AtomicOutput {
 public:
  explicit AtomicOutput(std::filesystem::path target);
  ~AtomicOutput();  // removes the temporary file unless committed
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  // Where to write: beside the target, with the target's extension (cairo and stb pick the
  // format from it), e.g. "dir/.fig.png.1234.tmp.png".
  const std::filesystem::path& path() const { return temp_; }
  // Renames the temporary file over the target; throws luka::Error naming the target.
  void commit();

 private:
  std::filesystem::path target_, temp_;
  bool committed_ = false;
};

// Writes `bytes` to `path` through an AtomicOutput; throws luka::Error naming the path when the
// write fails.
void write_file_atomically(const std::filesystem::path& path, const std::string& bytes);

class OutputLock {
 public:
  // Takes the lock on `path` (a file "<path>.lock" beside it, flock'ed). Throws luka::Error naming
  // the path and the process holding it when another one does.
  explicit OutputLock(const std::filesystem::path& path);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::filesystem::path lock_path_;
  int fd_ = -1;
};

}  // namespace luka
