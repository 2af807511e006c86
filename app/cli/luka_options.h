// The LuKA configuration flags shared by generate, forward, perplexity and info:
//   --preset NAME, --layers-config FILE, --set SPEC (repeatable), and --schedule for generate.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/luka/config.h"
#include "core/run/run_loop.h"

namespace luka {
class Backend;
}

namespace luka::cli {

class ArgParser;

void add_luka_options(ArgParser& args);
extern const char* const kLukaOptionsHelp;

// The config the flags describe (preset, then the file's settings, then each --set in order), or
// nullopt when no LuKA flag was given (plain dense attention). Errors are UsageError or luka::Error.
std::optional<LukaConfig> luka_config(const ArgParser& args, std::int64_t num_layers);

// --schedule SPEC (core/run's grammar), or none when the flag is absent; a malformed schedule is a
// UsageError.
std::vector<ScheduleEntry> schedule_option(const ArgParser& args);
// The schedule against the config it changes (layers in range, keys and values valid): a
// UsageError, before anything runs, rather than an error at the step it applies.
void check_schedule_option(const LukaConfig& config, const std::vector<ScheduleEntry>& schedule);

// --graph / --no-graph, declared with --device (add_device_option) on every command that runs a
// model: how a decode step is issued. Eager (one launch per op) is the default until a GPU run has
// verified the recorded step against it (scripts/gpu_run.sh, stage graph); --no-graph keeps it
// once the graph becomes the default.
enum class DecodeIssue { kEager, kGraph };
void add_graph_options(ArgParser& args);
// What the flags ask for; both given is a UsageError.
DecodeIssue graph_option(const ArgParser& args);
// After the device is known: --graph on the CPU is a UsageError (a CUDA graph needs a GPU); on a
// GPU, a command that does not record its steps (`records_steps` false: all but generate and
// capture so far) refuses it with a luka::Error naming the ones that do.
void check_graph_option(const ArgParser& args, bool on_cuda, bool records_steps = false);

// --static-step (generate and capture): each decode step as the static step, the one --graph
// records on a GPU, run on the CPU.
void add_static_step_option(ArgParser& args);
// Both choose greedily: --graph or --static-step with `temperature` > 0 is a UsageError (checked
// before the model loads).
void check_decode_engine_option(const ArgParser& args, double temperature);
// The decode engine --graph or --static-step asks for, set on `loop` (neither: the decoder's own
// step); a GPU that cannot record, or --static-step on a GPU, is a luka::Error.
void use_decode_engine_option(const ArgParser& args, const Backend& device, RunLoop& loop);

}  // namespace luka::cli
