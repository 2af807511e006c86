// Running the Studio window from tests: under Xvfb (llvmpipe), driven by a --script written to the
// test's folder, without the user's LUKA_MODEL.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/process_util.h"

namespace luka::test {

inline bool have_xvfb() { return std::system("command -v xvfb-run > /dev/null 2>&1") == 0; }

// Under AddressSanitizer the windowed Studio runs without LeakSanitizer: Mesa's GL driver keeps
// 240 bytes to the end and is unloaded before the leak check, so the report has no module to
// attribute or suppress ("<unknown module>" frames). ASan and UBSan stay on, and the Studio's
// session code is leak-checked by test_run_controller, which opens no window.
#if defined(__SANITIZE_ADDRESS__)
inline const std::string kStudioEnv = "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" ";
#else
inline const std::string kStudioEnv;
#endif

// `luka studio ARGS --script` with `script` written to DIR/NAME, in a window of `size` (WxH).
inline RunResult run_studio(const std::filesystem::path& dir, const std::string& args, const std::string& script,
                            const std::string& size = "1280x800", const std::string& name = "actions.script") {
  const std::filesystem::path s = dir / name;
  std::ofstream(s) << script;
  return run_shell("env -u LUKA_MODEL " + kStudioEnv + "xvfb-run -a -s '-screen 0 " + size + "x24' '" + std::string(LUKA_CLI_PATH) +
                       "' studio --size " + size + " " + args + " --script '" + s.string() + "'",
                   dir);
}

}  // namespace luka::test
