// luka: the LuKA Studio command line.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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


// One command line, as `luka` runs it: the exit code (0, 1 for bad files and data, 2 for a bad
// command line) and at most one error line on standard error.
int run_luka(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    std::fprintf(stderr, "luka: error: no command given\n");
    return 2;
  }
  const std::string name = argv[1];
  // Output that never arrived (a full disk, a closed pipe, /dev/full) is an error, not exit 0.
  const auto stdout_written = [](const char* what) {
    if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return true;
    std::fprintf(stderr, "%s: error: cannot write to standard output: %s\n", what, std::strerror(errno));
    return false;
  };
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(stdout);
    return stdout_written("luka") ? 0 : 1;
  }
  if (name == "--version") {
    std::printf("luka %s\n", LUKA_VERSION);
    return stdout_written("luka") ? 0 : 1;
  }
  for (const Command& c : kCommands) {
    if (name != c.name) continue;
    try {
      const int rc = c.run(argc, argv);
      if (!stdout_written((std::string("luka ") + c.name).c_str())) return 1;
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
  std::fprintf(stderr, "luka: error: unknown command '%s' (see luka --help)\n", name.c_str());
  return 2;
}

// [SECTION] --run-cases

// The command line a child runs: its own standard streams, environment, folder and time limit.
[[noreturn]] void run_case(const nlohmann::json& c, int timeout_s) {
  const auto redirect = [](const std::string& path, int flags, int fd) {
    const int f = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (f < 0 || ::dup2(f, fd) < 0) _exit(125);
    ::close(f);
  };
  redirect(c.value("stdin", std::string("/dev/null")), O_RDONLY, STDIN_FILENO);
  redirect(c.at("stdout").get<std::string>(), O_WRONLY | O_CREAT | O_TRUNC, STDOUT_FILENO);
  redirect(c.at("stderr").get<std::string>(), O_WRONLY | O_CREAT | O_TRUNC, STDERR_FILENO);
  ::unsetenv("LUKA_MODEL");
  const nlohmann::json env = c.value("env", nlohmann::json::object());
  for (const auto& [key, value] : env.items()) ::setenv(key.c_str(), value.get<std::string>().c_str(), 1);
  if (c.contains("cwd") && ::chdir(c["cwd"].get<std::string>().c_str()) != 0) _exit(125);
  ::alarm(static_cast<unsigned>(timeout_s));  // a hang ends by SIGALRM
  std::vector<std::string> args = {"luka"};
  for (const auto& a : c.at("args")) args.push_back(a.get<std::string>());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::exit(run_luka(static_cast<int>(args.size()), argv.data()));
}

// `luka --run-cases FILE JOBS TIMEOUT` (hidden; tests/battery/run_battery.py): runs the command
// lines of FILE (JSON lines: args, stdout, stderr, optional stdin, env, cwd), JOBS at a time, each
// in a child forked from this process after LibTorch's start-up (some 0.4 s of CPU in a new
// process), and prints {"case": i, "exit": code} or {"case": i, "signal": n} for each.
int run_cases(const char* file, int jobs, int timeout_s) {
  std::ifstream in(file);
  if (!in) {
    std::fprintf(stderr, "luka: error: %s: cannot open\n", file);
    return 1;
  }
  std::vector<nlohmann::json> cases;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) cases.push_back(nlohmann::json::parse(line));
  std::map<pid_t, std::size_t> running;
  std::size_t next = 0;
  while (next < cases.size() || !running.empty()) {
    while (next < cases.size() && static_cast<int>(running.size()) < std::max(jobs, 1)) {
      std::fflush(nullptr);
      const pid_t pid = ::fork();
      if (pid < 0) {
        std::perror("luka: error: fork");
        return 1;
      }
      if (pid == 0) run_case(cases[next], timeout_s);
      running[pid] = next++;
    }
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, 0);
    if (done < 0) break;
    const auto it = running.find(done);
    if (it == running.end()) continue;
    const nlohmann::json result = WIFEXITED(status) ? nlohmann::json{{"case", it->second}, {"exit", WEXITSTATUS(status)}}
                                                    : nlohmann::json{{"case", it->second}, {"signal", WTERMSIG(status)}};
    std::printf("%s\n", result.dump().c_str());
    running.erase(it);
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  luka::tune_allocator_for_inference();
  if (argc == 5 && std::string(argv[1]) == "--run-cases") return run_cases(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  return run_luka(argc, argv);
}
