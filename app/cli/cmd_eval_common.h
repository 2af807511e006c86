// What the `luka eval` evaluations share (wikisalad in cmd_eval.cpp, niah and ruler in
// cmd_eval_long_context.cpp): the --presets list, a preset's config (a name or a layers-config
// file, with --set applied), the model's identity for run.json, and the progress line's pieces.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/luka/config.h"

namespace luka::cli {

// "dense,mixed(8,8),paper" -> {"dense", "mixed(8,8)", "paper"}: commas inside parentheses stay.
// UsageError for an empty entry or one given twice.
std::vector<std::string> split_presets(const std::string& text);
// A preset name, or a layers-config JSON file (e.g. one `luka calibrate` wrote), with the --set
// overrides applied. A bad name or --set is a UsageError (exit 2), a bad file a luka::Error (exit 1).
LukaConfig preset_config(const std::string& entry, std::int64_t n_layers, const std::vector<std::string>& overrides);
// What identifies the model cheaply: its resolved path and the bytes of its files.
nlohmann::json model_identity(const std::filesystem::path& path);
// "1h02m" or "3m07s".
std::string duration_text(double seconds);

// luka eval niah and luka eval ruler (cmd_eval_long_context.cpp).
int run_eval_niah(int argc, char** argv);
int run_eval_ruler(int argc, char** argv);

}  // namespace luka::cli
