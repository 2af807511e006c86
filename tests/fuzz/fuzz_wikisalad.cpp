// Fuzz target for WikiSalad files (core/prompt/wikisalad.cpp): any text must give the examples or
// a luka::Error. Every example that converts assembles back into its prompt byte for byte, as
// wikisalad.h promises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/prompt/interwoven_prompt.h"
#include "core/prompt/wikisalad.h"
#include "core/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<luka::InterwovenPrompt> prompts;
  try {
    prompts = luka::parse_wikisalad(text, "fuzz/wikisalad.json");
  } catch (const luka::Error&) {
    return 0;  // rejected cleanly: the expected outcome for most inputs
  }
  const nlohmann::json examples = nlohmann::json::parse(text);
  if (examples.size() != prompts.size()) std::abort();
  for (std::size_t i = 0; i < prompts.size(); ++i)
    if (luka::assemble(prompts[i]).text != examples[i]["prompt"].get<std::string>()) std::abort();
  return 0;
}
