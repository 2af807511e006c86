// luka tokenize: JSON lines {"text": ...} in, {"ids": [...]} out, one per input line, in order.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/text_file.h"

namespace luka::cli {
namespace {

// Lines end at '\n' only: texts may hold U+2028 or U+0085, which other splitters treat as breaks.
void tokenize_stream(const Tokenizer& tokenizer, std::istream& in, const std::string& source) {
  std::string line;
  std::size_t line_no = 0;
  std::string out;
  while (std::getline(in, line, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      fail(source + ":" + std::to_string(line_no), std::string("not valid JSON (") + e.what() + ")");
    }
    if (!record.is_object() || !record.contains("text") || !record["text"].is_string())
      fail(source + ":" + std::to_string(line_no), "expected an object with a string field \"text\"");
    const auto ids = tokenizer.encode(record["text"].get<std::string>());
    out.assign("{\"ids\": [");
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(ids[i]);
    }
    out += "]}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  if (in.bad()) fail(source, "read error");
}

}  // namespace

int run_tokenize(int argc, char** argv) {
  ArgParser args("tokenize", "[--model PATH] [--jsonl FILE | --text STR]",
                 "Encodes text with the model's tokenizer (no special tokens added). Reads JSON lines\n"
                 "{\"text\": ...} from --jsonl FILE or standard input and prints one line {\"ids\": [...]}\n"
                 "per input line, in order. Only the tokenizer files are needed: a folder holding\n"
                 "tokenizer.json (and optionally tokenizer_config.json) is enough.");
  args.option("model", "PATH", kModelOptionHelp)
      .option("jsonl", "FILE", "JSON lines to encode", Default::described_text("standard input"))
      .option("text", "STR", "encode this one text instead")
      .epilog(std::string("example:\n  echo '{\"text\": \"Hello world\"}' | luka tokenize --model DIR\n\n") +
              kEnvironmentHelp);
  if (!args.parse(argc, argv, 2)) return 0;
  if (args.has("jsonl") && args.has("text")) throw UsageError("give --jsonl or --text, not both");

  const Tokenizer tokenizer = Tokenizer::load(resolve_model_path(args));
  if (args.has("text")) {
    std::istringstream one(nlohmann::json{{"text", args.get("text")}}.dump());
    tokenize_stream(tokenizer, one, "--text");
  } else if (args.has("jsonl")) {
    std::istringstream in(read_text_file(args.get("jsonl"), "JSON lines file"));
    tokenize_stream(tokenizer, in, args.get("jsonl"));
  } else {
    tokenize_stream(tokenizer, std::cin, "<stdin>");
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace luka::cli
