#include "core/util/output_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "core/util/error.h"

namespace luka {

AtomicOutput::AtomicOutput(std::filesystem::path target) : target_(std::move(target)) {
  const std::string name = target_.filename().string();
  temp_ = target_.parent_path() / ("." + name + "." + std::to_string(::getpid()) + ".tmp" + target_.extension().string());
}

AtomicOutput::~AtomicOutput() {
  if (committed_) return;
  std::error_code ec;
  std::filesystem::remove(temp_, ec);
}

void AtomicOutput::commit() {
  std::error_code ec;
  std::filesystem::rename(temp_, target_, ec);
  if (ec) fail(target_.string(), "cannot replace it with the finished file: " + ec.message());
  committed_ = true;
}

void write_file_atomically(const std::filesystem::path& path, const std::string& bytes) {
  AtomicOutput out(path);
  {
    std::ofstream f(out.path(), std::ios::binary | std::ios::trunc);
    f << bytes;
    f.close();
    if (!f) fail(path.string(), "cannot write the file");
  }
  out.commit();
}

OutputLock::OutputLock(const std::filesystem::path& path) : lock_path_(path.string() + ".lock") {
  fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path.string(), std::string("cannot create its lock file ") + lock_path_.string() + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {0};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string who = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : std::string();
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    fail(path.string(), "another run" + (who.empty() ? std::string() : " (process " + who + ")") +
                            " is writing this file; wait for it or choose another output path");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock holds without the pid; it only makes the other run's message less helpful.
  }
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  ::unlink(lock_path_.c_str());
  ::close(fd_);
}

}  // namespace luka
