// The build's identity, for capture manifests and --version.
#pragma once

namespace luka {
// `git describe --always --dirty` of the source tree when the binary was built, or "unknown".
const char* git_revision();
}  // namespace luka
