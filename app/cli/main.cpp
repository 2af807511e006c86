// luka: the LuKA Studio command line.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "core/util/allocator.h"
#include "core/util/error.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"info", luka::cli::run_info, "describe a model: architecture, sizes, dtype, parameters"},
    {"tokenize", luka::cli::run_tokenize, "encode JSON lines {\"text\": ...} to {\"ids\": [...]}"},
    {"forward", luka::cli::run_forward, "run ids through prefill + decode, write logits as .npy"},
    {"generate", luka::cli::run_generate, "generate text from a prompt, streaming, with tokens/s"},
    {"perplexity", luka::cli::run_perplexity, "teacher-forced perplexity of a text under a LuKA config"},
    {"eval", luka::cli::run_eval, "evaluations: exact match on WikiSalad's questions per preset (Table 1)"},
    {"sweep", luka::cli::run_sweep, "a grid of perplexity or eval runs over config keys, with a table and a line plot"},
    {"calibrate", luka::cli::run_calibrate, "per layer and head: how lined and clustered approximate dense (for auto configs)"},
    {"capture", luka::cli::run_capture, "run a prompt and record attention, covers and pages to HDF5"},
    {"inspect", luka::cli::run_inspect, "summarize a capture file: model, config, tokens, steps, sizes"},
    {"export", luka::cli::run_export, "draw a capture's attention map as a PNG, SVG or PDF figure"},
#ifdef LUKA_HAVE_STUDIO
    {"studio", luka::cli::run_studio, "open the Studio window (live runs, attention maps, replay)"},
#endif
};

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: luka <command> [options]\n\n"
               "LuKA Studio: run LLMs with per-layer dense / lined / clustered attention.\n\n"
               "commands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\n'luka <command> --help' describes a command's options.\n"
               "'luka --version' prints the version.\n");
}

}  // namespace

int main(int argc, char** argv) {
  luka::tune_allocator_for_inference();
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(stdout);
    return 0;
  }
  if (name == "--version") {
    std::printf("luka %s\n", LUKA_VERSION);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      const int rc = c.run(argc, argv);
      // Output that never arrived (a full disk, a closed pipe, /dev/full) is an error, not exit 0.
      if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        std::fprintf(stderr, "luka %s: error: cannot write to standard output: %s\n", c.name, std::strerror(errno));
        return 1;
      }
      return rc;
    } catch (const luka::cli::UsageError& e) {
      std::fprintf(stderr, "luka %s: error: %s\n", c.name, e.what());
      return 2;
    } catch (const luka::Error& e) {
      std::fprintf(stderr, "luka %s: error: %s\n", c.name, e.what());
      return 1;
    } catch (const std::exception& e) {
      // Loading a model, reading a file, encoding a prompt and a capture's run name their file in
      // an out-of-memory error (luka::Error above); anywhere else, say at least the command.
      if (luka::is_out_of_memory(e)) {
        std::fprintf(stderr, "luka %s: error: %s\n", c.name,
                     luka::out_of_memory_message(e, std::string("during luka ") + c.name).c_str());
        return 1;
      }
      // LibTorch errors carry a multi-line backtrace; the first line says what went wrong.
      std::string what = e.what();
      if (const auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
      std::fprintf(stderr, "luka %s: error: %s\n", c.name, what.c_str());
      return 1;
    }
  }
  std::fprintf(stderr, "luka: unknown command '%s' (see luka --help)\n", name.c_str());
  return 2;
}
