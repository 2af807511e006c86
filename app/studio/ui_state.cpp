#include "app/studio/ui_state.h"

namespace luka::studio {

std::atomic<int>& async_reads() {
  static std::atomic<int> n{0};
  return n;
}

std::string capture_key(const capture::CaptureView* view) {
  if (!view) return "none";
  const capture::Summary s = view->summary();
  return std::to_string(reinterpret_cast<std::uintptr_t>(view)) + "/" + std::to_string(s.complete_steps) + "/" +
         std::to_string(s.num_tokens) + "/" + std::to_string(s.finished);
}

}  // namespace luka::studio
