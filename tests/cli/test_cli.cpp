// The `luka` executable end to end: exit codes, one-line errors, and outputs checked against the
// references (golden tokenizer ids, transformers logits made by tests/fixtures/make_checkpoints.py).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/luka/config.h"
#include "core/util/npy.h"

namespace fs = std::filesystem;

namespace {

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `luka ARGS` with LUKA_MODEL cleared, standard input from `stdin_file` (or /dev/null).
RunResult run_luka(const std::vector<std::string>& args, const std::string& stdin_file = "/dev/null", const std::string& env = "") {
  // ctest runs tests in parallel: each test gets its own output files.
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "cli" / ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::create_directories(dir);
  std::string cmd = "env -u LUKA_MODEL " + env + " " + quote(LUKA_CLI_PATH);
  for (const auto& a : args) cmd += " " + quote(a);
  cmd += " < " + quote(stdin_file) + " > " + quote((dir / "out.txt").string()) + " 2> " +
         quote((dir / "err.txt").string());
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(dir / "out.txt");
  r.err = read_file(dir / "err.txt");
  return r;
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Lines of standard error apart from the "device: ..." line every command that runs a model
// prints first: an error must be one of them.
int error_lines(const std::string& err) {
  int n = 0;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) n += line.rfind("device: ", 0) != 0;
  return n;
}

fs::path checkpoint(const std::string& name) { return fs::path(LUKA_TEST_WORK) / "checkpoints" / name; }

TEST(Cli, HelpForEveryCommand) {
  const RunResult top = run_luka({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  for (const char* cmd : {"info", "tokenize", "forward", "generate", "perplexity", "capture"}) {
    EXPECT_NE(top.out.find(cmd), std::string::npos) << cmd;
    const RunResult r = run_luka({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_EQ(r.out.rfind(std::string("usage: luka ") + cmd, 0), 0u) << r.out;
    EXPECT_NE(r.out.find("--model"), std::string::npos) << cmd;
  }
  // eval lists its evaluations; each, and sweep, has its own help.
  for (const char* cmd : {"eval", "sweep"}) EXPECT_NE(top.out.find(cmd), std::string::npos) << cmd;
  const RunResult eval = run_luka({"eval", "--help"});
  EXPECT_EQ(eval.exit_code, 0);
  EXPECT_NE(eval.out.find("wikisalad"), std::string::npos) << eval.out;
  const RunResult wikisalad = run_luka({"eval", "wikisalad", "--help"});
  EXPECT_EQ(wikisalad.exit_code, 0);
  EXPECT_EQ(wikisalad.out.rfind("usage: luka eval wikisalad", 0), 0u) << wikisalad.out;
  EXPECT_NE(wikisalad.out.find("--model"), std::string::npos) << wikisalad.out;
  const RunResult sweep = run_luka({"sweep", "--help"});
  EXPECT_EQ(sweep.exit_code, 0);
  EXPECT_EQ(sweep.out.rfind("usage: luka sweep", 0), 0u) << sweep.out;
  EXPECT_NE(run_luka({"eval", "nope"}).exit_code, 0);
  const RunResult inspect = run_luka({"inspect", "--help"});
  EXPECT_EQ(inspect.exit_code, 0);
  EXPECT_EQ(inspect.out.rfind("usage: luka inspect FILE", 0), 0u) << inspect.out;
  EXPECT_NE(top.out.find("inspect"), std::string::npos);
}

// Every per-layer LuKA key (the config's one key table) is named in the help of each command that
// takes --set, and documented in docs/luka-config.md.
TEST(Cli, HelpAndDocsNameEveryLukaKey) {
  const std::string doc = read_file(fs::path(LUKA_SOURCE_DIR) / "docs" / "luka-config.md");
  ASSERT_FALSE(doc.empty());
  for (const char* cmd : {"generate", "forward", "perplexity", "capture", "info"}) {
    const RunResult r = run_luka({cmd, "--help"});
    ASSERT_EQ(r.exit_code, 0) << cmd;
    for (const std::string& key : luka::layer_config_key_names()) {
      // Whole words: "tail" must not be found inside "max_pages", nor "top_k" inside "top_k_x".
      const auto named = [&](const std::string& text, const std::string& open, const std::string& close) {
        return text.find(open + key + close) != std::string::npos;
      };
      EXPECT_TRUE(named(r.out, " ", ",") || named(r.out, " ", " ") || named(r.out, " ", ";") || named(r.out, " ", "\n"))
          << cmd << " --help does not name '" << key << "'";
      if (std::string(cmd) == "generate") EXPECT_TRUE(named(doc, "`", "`")) << "docs/luka-config.md does not name '" << key << "'";
    }
  }
}

// Unknown options, missing values, malformed numbers, values out of their declared range and
// stray arguments are refused before anything runs: exit 2, one line.
TEST(Cli, UsageErrorsExitTwoWithOneLine) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"frobnicate"}, {"info", "--no-such-option"}, {"forward", "--model", "x", "--ids"},
           {"forward", "--model", "x", "--ids", "1,two", "--out", "o.npy"},
           {"generate", "--prompt", "x", "--max-new-tokens", "eight"}, {"generate", "--prompt", "x", "--max-new-tokens", "-1"},
           {"generate", "--prompt", "x", "--top-p", "1.5"}, {"generate", "--prompt", "x", "--chat=yes"},
           {"inspect", "a.h5", "b.h5"}, {"capture", "--prompt", "x", "--out", "o.h5", "--max-new-tokens", "0"}}) {
    const RunResult r = run_luka(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_EQ(error_lines(r.err), 1) << r.err;
  }
  const RunResult r = run_luka({"generate", "--prompt", "x", "--max-new-tokens", "1000001"});
  EXPECT_EQ(r.err, "luka generate: error: --max-new-tokens: must be in 0..1000000, got 1000001 (see luka generate --help)\n");
}

// Each option's default is declared once, where the parser reads it, and --help shows it.
TEST(Cli, HelpShowsTheDeclaredDefaults) {
  const RunResult r = run_luka({"generate", "--help"});
  ASSERT_EQ(r.exit_code, 0);
  for (const char* line : {"  --max-new-tokens N        stop after N generated tokens (default: 128)\n",
                           "  --temperature T           sampling temperature; 0 = greedy (default: 0)\n",
                           "  --dtype fp32|bf16|fp16    compute dtype (fp16 on the GPU only) (default: fp32)\n",
                           "  --preset NAME             LuKA preset for every layer (see below) (default: dense)\n"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << r.out;
  EXPECT_EQ(r.out.find("--check-args"), std::string::npos) << "a hidden option";
}

TEST(Cli, MissingModelNamesThePath) {
  const RunResult r = run_luka({"info", "--model", "/nonexistent/model-dir"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(error_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/model-dir"), std::string::npos) << r.err;
}

TEST(Cli, TokenizeMatchesGoldenIds) {
  const fs::path tokenizer = fs::path(LUKA_SHARED_DATA) / "qwen3-tokenizer";
  const fs::path golden = fs::path(LUKA_SHARED_DATA) / "tokenizer-golden" / "qwen3-dev.jsonl";
  if (!fs::exists(tokenizer / "tokenizer.json") || !fs::exists(golden))
    GTEST_SKIP() << "shared data not found at " << LUKA_SHARED_DATA << " (tokenizer and golden ids)";
  // The first 300 golden lines as the input file; lines split on '\n' only.
  std::ifstream in(golden, std::ios::binary);
  const fs::path input = fs::path(LUKA_TEST_WORK) / "cli" / "golden-head.jsonl";
  fs::create_directories(input.parent_path());
  std::ofstream head(input, std::ios::binary);
  std::vector<std::vector<int>> want;
  std::string line;
  while (want.size() < 300 && std::getline(in, line, '\n')) {
    const auto j = nlohmann::json::parse(line);
    head << nlohmann::json{{"text", j["text"]}}.dump() << '\n';
    want.push_back(j["ids"].get<std::vector<int>>());
  }
  head.close();
  for (const bool use_stdin : {false, true}) {
    const RunResult r = use_stdin ? run_luka({"tokenize", "--model", tokenizer.string()}, input.string())
                                  : run_luka({"tokenize", "--model", tokenizer.string(), "--jsonl", input.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::size_t i = 0;
    while (std::getline(lines, line, '\n')) {
      ASSERT_LT(i, want.size());
      EXPECT_EQ(nlohmann::json::parse(line)["ids"].get<std::vector<int>>(), want[i]) << "line " << i + 1;
      ++i;
    }
    EXPECT_EQ(i, want.size());
  }
}

// A write that fails half-way (a file-size limit, SIGXFSZ ignored, as a full disk fails it) leaves
// no partial file and the file that was at the path whole; an unwritable standard output is exit 1.
TEST(Cli, FailedWritesLeaveNoPartialFileAndStdoutErrorsExitOne) {
  const fs::path ckpt = checkpoint("qwen3-tok");
  if (!fs::exists(ckpt / "config.json")) GTEST_SKIP() << "no qwen3-tok checkpoint (needs ../shared/data)";
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "cli" / "FailedWrites";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path npy = dir / "logits.npy";
  std::ofstream(npy) << "the previous file";
  // logits [4, 151936] float32 are 2.4 MB: a 64 KiB limit cuts the write.
  const std::string cmd = "trap '' XFSZ; ulimit -f 64; exec " + quote(LUKA_CLI_PATH) + " forward --model " + quote(ckpt.string()) +
                          " --ids 1,2,3,4 --device cpu --out " + quote(npy.string()) + " 2> " + quote((dir / "err.txt").string());
  const int status = std::system(("bash -c " + quote(cmd)).c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << read_file(dir / "err.txt");
  EXPECT_NE(read_file(dir / "err.txt").find(npy.string()), std::string::npos) << read_file(dir / "err.txt");
  EXPECT_EQ(read_file(npy), "the previous file");
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"err.txt", "logits.npy"}));

  for (const std::vector<std::string>& args : {std::vector<std::string>{"tokenize", "--model", ckpt.string(), "--text", "hello world"},
                                               std::vector<std::string>{"generate", "--model", ckpt.string(), "--prompt", "hello",
                                                                        "--max-new-tokens", "2", "--device", "cpu"}}) {
    std::string line = quote(LUKA_CLI_PATH);
    for (const auto& a : args) line += " " + quote(a);
    const int st = std::system((line + " > /dev/full 2> " + quote((dir / "err.txt").string())).c_str());
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 1) << args[0] << ": " << read_file(dir / "err.txt");
    EXPECT_NE(read_file(dir / "err.txt").find("standard output"), std::string::npos) << read_file(dir / "err.txt");
  }
}

TEST(Cli, TokenizeRejectsBadJsonWithLineNumber) {
  const fs::path tokenizer = fs::path(LUKA_SHARED_DATA) / "qwen3-tokenizer";
  if (!fs::exists(tokenizer / "tokenizer.json")) GTEST_SKIP() << "no Qwen3 tokenizer at " << tokenizer;
  const fs::path input = fs::path(LUKA_TEST_WORK) / "cli" / "bad.jsonl";
  fs::create_directories(input.parent_path());
  std::ofstream(input) << "{\"text\": \"fine\"}\n{\"text\": oops}\n";
  const RunResult r = run_luka({"tokenize", "--model", tokenizer.string(), "--jsonl", input.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.jsonl:2"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.out), 1);  // the good line was printed before the error
}

TEST(Cli, TokenizeNeedsOnlyTheTokenizer) {
  const RunResult r = run_luka({"tokenize", "--model", (fs::path(LUKA_TEST_WORK) / "cli").string(), "--text", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tokenizer.json"), std::string::npos) << r.err;
}

// Parity of the whole command: prefill of part of the ids, the rest through decode, against the
// transformers logits of the same checkpoint (fp32, 1e-4 absolute as in the decoder tests).
TEST(Cli, ForwardMatchesTransformers) {
  const fs::path ckpt = checkpoint("qwen3-tied");
  ASSERT_TRUE(fs::exists(ckpt / "reference" / "ids.json")) << "fixture missing: run the fixtures_checkpoints test";
  const auto ids = nlohmann::json::parse(read_file(ckpt / "reference" / "ids.json"))["ids"].get<std::vector<int>>();
  std::string list;
  for (std::size_t i = 0; i < ids.size(); ++i) list += (i ? "," : "") + std::to_string(ids[i]);
  const fs::path out = fs::path(LUKA_TEST_WORK) / "cli" / "forward.npy";
  const RunResult r = run_luka({"forward", "--model", ckpt.string(), "--ids", list, "--prefill", "17", "--out",
                                out.string(), "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const luka::NpyArray got = luka::read_npy_f32(out);
  const luka::NpyArray want = luka::read_npy_f32(ckpt / "reference" / "logits_fp32.npy");
  ASSERT_EQ(got.shape, want.shape);
  double max_diff = 0;
  for (std::size_t i = 0; i < got.data.size(); ++i)
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(got.data[i] - want.data[i])));
  EXPECT_LT(max_diff, 1e-4);
}

TEST(Cli, ForwardRejectsIdsOutsideTheVocabulary) {
  const fs::path ckpt = checkpoint("qwen3-tied");
  const RunResult r = run_luka({"forward", "--model", ckpt.string(), "--ids", "1,2,999999", "--out",
                                (fs::path(LUKA_TEST_WORK) / "cli" / "never.npy").string()});
  EXPECT_EQ(r.exit_code, 2);  // a bad option value: the command line's fault
  EXPECT_EQ(error_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("999999"), std::string::npos) << r.err;
}

TEST(Cli, ForwardRejectsPromptLongerThanContext) {
  const fs::path ckpt = checkpoint("qwen3-tied");
  const auto config = nlohmann::json::parse(read_file(ckpt / "config.json"));
  const int max_pos = config["max_position_embeddings"].get<int>();
  std::string list;
  for (int i = 0; i <= max_pos; ++i) list += (i ? ",5" : "5");
  const RunResult r = run_luka({"forward", "--model", ckpt.string(), "--ids", list, "--out",
                                (fs::path(LUKA_TEST_WORK) / "cli" / "never.npy").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(error_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("max_position_embeddings"), std::string::npos) << r.err;
}

// A copy of checkpoint `name` whose final RMSNorm weight is 3e38 everywhere: finite, so the load
// accepts it (non-finite weights are refused there), but the normed hidden state overflows to
// +-Inf in fp32 and the logits come out NaN. What the output checks of forward and perplexity are for.
fs::path overflowing_checkpoint(const std::string& name) {
  // The test's folder, emptied: nothing an earlier run wrote there can pass for this run's output.
  const fs::path test = fs::path(LUKA_TEST_WORK) / "cli" / ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(test);
  const fs::path dir = test / name;
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(checkpoint(name)))
    if (e.is_regular_file()) fs::copy_file(e.path(), dir / e.path().filename());
  std::string bytes = read_file(dir / "model.safetensors");
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const auto entry = nlohmann::json::parse(bytes.substr(8, header)).at("model.norm.weight");
  EXPECT_EQ(entry["dtype"], "F32");
  const std::size_t begin = 8 + header + entry["data_offsets"][0].get<std::size_t>();
  const std::size_t end = 8 + header + entry["data_offsets"][1].get<std::size_t>();
  const float huge = 3e38f;
  for (std::size_t at = begin; at < end; at += 4) std::memcpy(&bytes[at], &huge, 4);
  std::ofstream(dir / "model.safetensors", std::ios::binary | std::ios::trunc) << bytes;
  return dir;
}

TEST(Cli, ForwardRefusesNonFiniteLogits) {
  const fs::path ckpt = overflowing_checkpoint("qwen3-tied");
  const fs::path out = ckpt.parent_path() / "logits.npy";
  // Two tokens by prefill, two through the decode path; the first non-finite value is at position 0.
  const RunResult r = run_luka({"forward", "--model", ckpt.string(), "--ids", "1,2,3,4", "--prefill", "2", "--device", "cpu",
                                "--threads", "2", "--out", out.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(error_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("luka forward: error: the logits at position 0 are not finite"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing written"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(Cli, PerplexityRefusesNonFiniteLogits) {
  if (!fs::exists(checkpoint("qwen3-tok") / "tokenizer.json"))
    GTEST_SKIP() << "the qwen3-tok fixture needs the Qwen3 tokenizer from " << LUKA_SHARED_DATA;
  const fs::path ckpt = overflowing_checkpoint("qwen3-tok");
  const fs::path text = ckpt.parent_path() / "text.txt";
  std::ofstream(text) << "The lighthouse keeper wrote in the log that the fog rolled in.";
  for (const bool json : {false, true}) {
    std::vector<std::string> args = {"perplexity", "--model", ckpt.string(), "--text-file", text.string(), "--device", "cpu",
                                      "--threads", "2", "--prompt-tokens", "2"};
    if (json) args.push_back("--json");
    const RunResult r = run_luka(args);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(error_lines(r.err), 1) << r.err;
    // The first scored token is the one after the 2 prefilled: position 3.
    EXPECT_NE(r.err.find("luka perplexity: error: " + text.string() + ": the model's log-probability of token 3 is not finite"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "") << "no perplexity (nan) may be printed";
  }
}

// Out of memory: one line naming the file and what was being done, exit 1 (a bare "out of
// memory" said neither). Memory runs out for real under an address-space limit (ulimit -v), as
// on a machine without the memory: a sparse checkpoint, 1.2 GB of bf16 zeros that take no disk,
// maps but its fp32 copy (2.5 GB) does not fit; a sparse 4 GiB text or prompt file is not read.
TEST(Cli, OutOfMemoryNamesTheFileAndWhatWasBeingDone) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory needs more address space than the limit leaves";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "AddressSanitizer's shadow memory needs more address space than the limit leaves";
#endif
#endif
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "cli" / "OutOfMemory";
  fs::remove_all(dir);
  const fs::path model = dir / "big-model";
  fs::create_directories(model);
  // One layer of a qwen3 with hidden 4096 and tiny heads and MLP: the embedding is the weight.
  constexpr std::int64_t kVocab = 151936, kHidden = 4096, kHeads = 2, kKvHeads = 1, kHeadDim = 16, kInter = 64;
  std::ofstream(model / "config.json") << nlohmann::json{{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"},
                                                         {"attention_bias", false}, {"head_dim", kHeadDim}, {"hidden_act", "silu"},
                                                         {"hidden_size", kHidden}, {"intermediate_size", kInter},
                                                         {"max_position_embeddings", 256}, {"num_attention_heads", kHeads},
                                                         {"num_hidden_layers", 1}, {"num_key_value_heads", kKvHeads},
                                                         {"rms_norm_eps", 1e-6}, {"rope_theta", 1e6}, {"tie_word_embeddings", true},
                                                         {"vocab_size", kVocab}, {"bos_token_id", 1}, {"eos_token_id", 2},
                                                         {"torch_dtype", "bfloat16"}}
                                              .dump();
  const std::string l = "model.layers.0.";
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors = {
      {"model.embed_tokens.weight", {kVocab, kHidden}}, {"model.norm.weight", {kHidden}},
      {l + "input_layernorm.weight", {kHidden}}, {l + "post_attention_layernorm.weight", {kHidden}},
      {l + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden}}, {l + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden}},
      {l + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden}}, {l + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}},
      {l + "self_attn.q_norm.weight", {kHeadDim}}, {l + "self_attn.k_norm.weight", {kHeadDim}},
      {l + "mlp.gate_proj.weight", {kInter, kHidden}}, {l + "mlp.up_proj.weight", {kInter, kHidden}},
      {l + "mlp.down_proj.weight", {kHidden, kInter}}};
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, shape] : tensors) {
    std::uint64_t bytes = 2;
    for (const std::int64_t d : shape) bytes *= static_cast<std::uint64_t>(d);
    header[name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  const fs::path weights = model / "model.safetensors";
  {
    std::ofstream f(weights, std::ios::binary);
    const std::uint64_t n = text.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << text;
  }
  fs::resize_file(weights, 8 + text.size() + offset);  // zeros, as a hole
  ASSERT_GT(offset, 1200000000u);
  const fs::path huge = dir / "huge.txt";
  std::ofstream(huge).close();
  fs::resize_file(huge, std::uintmax_t{4} << 30);
  // Holes take no disk, but a copy of the work folder would: gone when the test ends.
  struct RemoveAtEnd {
    fs::path path;
    ~RemoveAtEnd() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } remove_at_end{dir};

  // 3,000,000 KiB of address space: the program and LibTorch (about half a GB) and the mapped
  // checkpoint fit, the fp32 embedding does not, and neither does the 4 GiB file.
  const auto limited = [&](const std::vector<std::string>& args) {
    std::string line = "ulimit -v 3000000; exec " + quote(LUKA_CLI_PATH);
    for (const auto& a : args) line += " " + quote(a);
    const int status = std::system(("bash -c " + quote(line) + " < /dev/null > " + quote((dir / "out.txt").string()) + " 2> " +
                                    quote((dir / "err.txt").string()))
                                       .c_str());
    return RunResult{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir / "out.txt"), read_file(dir / "err.txt")};
  };
  if (limited({"--version"}).exit_code != 0) GTEST_SKIP() << "luka does not start in 3,000,000 KiB of address space";

  const RunResult load = limited({"forward", "--model", model.string(), "--ids", "1,2,3", "--device", "cpu", "--threads", "1",
                                  "--out", (dir / "never.npy").string()});
  EXPECT_EQ(load.exit_code, 1) << load.err;
  EXPECT_EQ(error_lines(load.err), 1) << load.err;
  char on_disk[32];
  std::snprintf(on_disk, sizeof on_disk, "%.1f MB", static_cast<double>(fs::file_size(weights)) / 1e6);
  if (load.err.find("out of memory mapping the file") != std::string::npos) {
    // Where the program and its libraries take more than 1.8 GB of the limit, the mapping fails first.
    EXPECT_NE(load.err.find("luka forward: error: " + weights.string() + ": out of memory mapping the file (" +
                            std::to_string(fs::file_size(weights)) + " bytes)"),
              std::string::npos)
        << load.err;
  } else {
    EXPECT_NE(load.err.find("luka forward: error: " + model.string() + ": out of memory loading the model's weights (" + on_disk +
                            " on disk, held as fp32): an allocation of 2489319424 bytes failed"),  // 151936 x 4096 x 4
              std::string::npos)
        << load.err;
  }
  EXPECT_FALSE(fs::exists(dir / "never.npy"));

  const RunResult read = limited({"perplexity", "--model", model.string(), "--text-file", huge.string(), "--device", "cpu"});
  EXPECT_EQ(read.exit_code, 1) << read.err;
  EXPECT_EQ(read.err, "luka perplexity: error: " + huge.string() + ": out of memory reading the text file (4294967296 bytes)\n");
  if (!fs::exists(checkpoint("qwen3-tok") / "tokenizer.json")) return;  // capture reads the tokenizer first
  const RunResult prompt = limited({"capture", "--model", checkpoint("qwen3-tok").string(), "--prompt-file", huge.string(), "--device",
                                    "cpu", "--out", (dir / "never.h5").string()});
  EXPECT_EQ(prompt.exit_code, 1) << prompt.err;
  EXPECT_EQ(prompt.err, "luka capture: error: " + huge.string() + ": out of memory reading the prompt file (4294967296 bytes)\n");
  EXPECT_FALSE(fs::exists(dir / "never.h5"));
}

TEST(Cli, InfoDescribesTheCheckpoint) {
  const fs::path ckpt = checkpoint("qwen3-tied");
  const auto config = nlohmann::json::parse(read_file(ckpt / "config.json"));
  const RunResult r = run_luka({"info", "--model", ckpt.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto field = [&](const std::string& key) {
    const auto at = r.out.find("\n" + key + " ");
    EXPECT_NE(at, std::string::npos) << key << " missing in:\n" << r.out;
    const auto value = r.out.find_first_not_of(' ', at + 1 + key.size());
    return r.out.substr(value, r.out.find('\n', value) - value);
  };
  EXPECT_EQ(field("layers"), std::to_string(config["num_hidden_layers"].get<int>()));
  EXPECT_EQ(field("head_dim"), std::to_string(config["head_dim"].get<int>()));
  EXPECT_EQ(field("architecture").rfind("qwen3", 0), 0u);
  // Parameter count, independently: element counts summed over the safetensors header.
  const std::string file = read_file(ckpt / "model.safetensors");
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, file.data(), 8);
  const auto header = nlohmann::json::parse(file.substr(8, header_len));
  long long params = 0;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    long long n = 1;
    for (const auto& d : info["shape"]) n *= d.get<long long>();
    params += n;
  }
  std::string digits = field("parameters");
  digits = digits.substr(0, digits.find(' '));
  digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
  EXPECT_EQ(digits, std::to_string(params));
}

// Greedy generation through the CLI continues exactly like transformers' generate.
TEST(Cli, GenerateGreedyMatchesTransformers) {
  const fs::path ckpt = checkpoint("qwen3-tok");
  if (!fs::exists(ckpt / "tokenizer.json"))
    GTEST_SKIP() << "the qwen3-tok fixture needs the Qwen3 tokenizer from " << LUKA_SHARED_DATA;
  const auto ref = nlohmann::json::parse(read_file(ckpt / "reference" / "greedy_text.json"));
  const RunResult r = run_luka({"generate", "--model", ckpt.string(), "--prompt", ref["prompt"].get<std::string>(),
                                "--max-new-tokens", std::to_string(ref["new_tokens"].get<int>()), "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, ref["text"].get<std::string>() + "\n");
  EXPECT_NE(r.err.find("tokens/s"), std::string::npos) << r.err;
}

// The static decode step (--static-step: the step --graph records on a GPU) through the CLI: the
// same text as transformers' greedy generate, and --verbose names it; sampling is refused.
TEST(Cli, GenerateStaticStepMatchesTransformersAndNamesItself) {
  const fs::path ckpt = checkpoint("qwen3-tok");
  if (!fs::exists(ckpt / "tokenizer.json"))
    GTEST_SKIP() << "the qwen3-tok fixture needs the Qwen3 tokenizer from " << LUKA_SHARED_DATA;
  const auto ref = nlohmann::json::parse(read_file(ckpt / "reference" / "greedy_text.json"));
  const RunResult r = run_luka({"generate", "--model", ckpt.string(), "--prompt", ref["prompt"].get<std::string>(),
                                "--max-new-tokens", std::to_string(ref["new_tokens"].get<int>()), "--threads", "2",
                                "--device", "cpu", "--static-step", "--verbose"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, ref["text"].get<std::string>() + "\n");
  EXPECT_NE(r.err.find("decode step: static step (cpu per-layer ops"), std::string::npos) << r.err;
  const RunResult sampled = run_luka({"generate", "--model", ckpt.string(), "--prompt", "hello", "--device", "cpu",
                                      "--static-step", "--temperature", "0.7"});
  EXPECT_EQ(sampled.exit_code, 2) << sampled.err;
  EXPECT_NE(sampled.err.find("--static-step chooses greedily"), std::string::npos) << sampled.err;
}

}  // namespace

// --- GGUF and the default model (SmolLM2-135M-Instruct, installed by scripts/setup.sh) ---------

namespace {

const fs::path kDefaultModel = fs::path(LUKA_SOURCE_DIR) / "models" / "default";

bool default_model_is_smollm2() {
  return fs::exists(kDefaultModel) && fs::canonical(kDefaultModel).filename() == "SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace

TEST(Cli, GenerateWithNoModelUsesTheDefaultGguf) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel << " (scripts/setup.sh)";
  const RunResult r = run_luka({"generate", "--prompt", "The capital of France is", "--max-new-tokens", "6"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(r.out.size(), 1u);
  EXPECT_NE(r.err.find("decode:"), std::string::npos) << r.err;
}

TEST(Cli, ChatOnTheDefaultModelAnswers) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const RunResult r = run_luka({"generate", "--chat", "--prompt", "What is the capital of France?", "--max-new-tokens", "24"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The trained model answers (greedy); this checks that weights, tokenizer and template fit together.
  EXPECT_NE(r.out.find("Paris"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("stopped at stop_token"), std::string::npos) << r.err;
}

// The same chat turn with --ignore-eos runs to --max-new-tokens, past the end of the answer.
TEST(Cli, IgnoreEosGeneratesEveryRequestedToken) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const RunResult r = run_luka({"generate", "--chat", "--prompt", "What is the capital of France?", "--max-new-tokens", "40", "--ignore-eos"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Paris"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("40 generated, stopped at max_tokens"), std::string::npos) << r.err;
}

TEST(Cli, InfoShowsGgufTypesAndFootprint) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const RunResult r = run_luka({"info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* needle : {"llama", "layers           30", "9 query, 3 key/value", "format           GGUF",
                             "Q4_1    210 tensors", "Q8_0      1 tensor,", "F32      61 tensors", "footprint",
                             "538.1 MB as fp32 in memory", "134,515,008"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
}

TEST(Cli, TokenizeReadsTheGgufVocabulary) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const fs::path input = fs::path(LUKA_TEST_WORK) / "cli" / "gguf-tokenize.jsonl";
  fs::create_directories(input.parent_path());
  std::ofstream(input) << "{\"text\": \"<|im_start|>user\\nhi<|im_end|>\"}\n{\"text\": \"a\\u0004b\"}\n";
  const RunResult r = run_luka({"tokenize", "--jsonl", input.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Special tokens split out; a byte the vocabulary lacks (0x04) becomes <|endoftext|> (id 0).
  EXPECT_EQ(r.out, "{\"ids\": [1, 4093, 198, 6004, 2]}\n{\"ids\": [81, 0, 82]}\n");
}

TEST(Cli, BrokenGgufIsAOneLineError) {
  const fs::path bad = fs::path(LUKA_TEST_WORK) / "cli" / "broken.gguf";
  fs::create_directories(bad.parent_path());
  std::ofstream(bad, std::ios::binary) << "GGUF\x03";
  const RunResult r = run_luka({"info", "--model", bad.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(error_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("broken.gguf"), std::string::npos) << r.err;
}

// Every file the tool reads must be a regular file, checked before it is opened: opening a FIFO
// blocks until a writer comes, and `luka info` on a folder whose model.safetensors was a FIFO
// hung in open() for ever (`timeout` ends that run with 124).
TEST(Cli, FifoModelFileIsRefusedBeforeOpening) {
  const fs::path ckpt = checkpoint("qwen3-tied");
  if (!fs::exists(ckpt / "config.json")) GTEST_SKIP() << "no qwen3-tied checkpoint (the checkpoints fixture)";
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "cli" / "fifo-model";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(ckpt / "config.json", dir / "config.json");
  ASSERT_EQ(::mkfifo((dir / "model.safetensors").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((dir / "prompt.txt").c_str(), 0600), 0);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"info", "--model", dir.string()},
        std::vector<std::string>{"forward", "--model", dir.string(), "--ids", "1,2", "--device", "cpu", "--out",
                                 (dir / "o.npy").string()},
        std::vector<std::string>{"perplexity", "--model", ckpt.string(), "--text-file", (dir / "prompt.txt").string()}}) {
    std::vector<std::string> timed = {"30", LUKA_CLI_PATH};
    timed.insert(timed.end(), args.begin(), args.end());
    std::string cmd = "timeout";
    for (const auto& a : timed) cmd += " " + quote(a);
    const int status = std::system((cmd + " < /dev/null > /dev/null 2> " + quote((dir / "err.txt").string())).c_str());
    const std::string err = read_file(dir / "err.txt");
    ASSERT_TRUE(WIFEXITED(status)) << args[0];
    EXPECT_EQ(WEXITSTATUS(status), 1) << args[0] << " (124: it hung): " << err;
    EXPECT_EQ(error_lines(err), 1) << err;
    EXPECT_NE(err.find("not a regular file (a FIFO)"), std::string::npos) << err;
  }
}

// `luka --version` and `luka --help` check their writes as every command does.
TEST(Cli, VersionAndHelpToAFullDiskExitOne) {
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "cli" / "version-full";
  fs::create_directories(dir);
  for (const char* arg : {"--version", "--help"}) {
    const int status = std::system((quote(LUKA_CLI_PATH) + " " + arg + " > /dev/full 2> " + quote((dir / "err.txt").string())).c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1) << arg;
    EXPECT_EQ(read_file(dir / "err.txt"), "luka: error: cannot write to standard output: No space left on device\n");
  }
  EXPECT_EQ(run_luka({"--version"}).exit_code, 0);
}

// `--model ''` said only "no such file or folder", naming nothing.
TEST(Cli, EmptyModelPathIsAUsageErrorNamingTheOption) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"info", "--model", ""},
                                               std::vector<std::string>{"generate", "--model", "", "--prompt", "x"},
                                               std::vector<std::string>{"tokenize", "--model", "", "--text", "x"}}) {
    const RunResult r = run_luka(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("--model: the path is empty"), std::string::npos) << r.err;
  }
}

// --- LuKA flags, schedules and perplexity (on the default model) --------------------------------

TEST(Cli, PerplexityEqualsTheNllOfForwardLogits) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "cli" / "perplexity";
  fs::create_directories(dir);
  const fs::path text = dir / "text.txt";
  std::ofstream(text) << "Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy disposition.";
  // Dequantized weights on both sides: the two commands split prompt and decode rows differently,
  // and only the quantized path's decode rows (8-bit activations) differ from its prompt rows.
  const RunResult ppl = run_luka({"perplexity", "--weights", "dequantized", "--text-file", text.string(), "--json"});
  ASSERT_EQ(ppl.exit_code, 0) << ppl.err;
  const auto j = nlohmann::json::parse(ppl.out);
  // Independent route: the logits `luka forward` writes (checked against transformers elsewhere)
  // and the NLL formula, token by token.
  const RunResult fwd = run_luka({"forward", "--weights", "dequantized", "--text", read_file(text), "--prefill", "1", "--out",
                                  (dir / "l.npy").string()});
  ASSERT_EQ(fwd.exit_code, 0) << fwd.err;
  const luka::NpyArray logits = luka::read_npy_f32(dir / "l.npy");
  std::ofstream(dir / "in.jsonl") << nlohmann::json({{"text", read_file(text)}}).dump() << "\n";
  const RunResult ids_run = run_luka({"tokenize", "--jsonl", (dir / "in.jsonl").string()});
  const auto ids = nlohmann::json::parse(ids_run.out)["ids"].get<std::vector<int>>();
  const std::int64_t vocab = logits.shape[1];
  double nll = 0;
  for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
    const float* row = logits.data.data() + static_cast<std::int64_t>(i) * vocab;
    double mx = row[0], z = 0;
    for (std::int64_t v = 0; v < vocab; ++v) mx = std::max<double>(mx, row[v]);
    for (std::int64_t v = 0; v < vocab; ++v) z += std::exp(row[v] - mx);
    nll -= row[ids[i + 1]] - mx - std::log(z);
  }
  nll /= static_cast<double>(ids.size() - 1);
  EXPECT_EQ(j["scored_tokens"].get<std::size_t>(), ids.size() - 1);
  EXPECT_NEAR(j["mean_nll"].get<double>(), nll, 1e-4);
  EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(nll), 1e-3 * std::exp(nll));
}

TEST(Cli, PerplexityWithFidelityReportsEveryLayer) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const fs::path text = fs::path(LUKA_TEST_WORK) / "cli" / "fidelity.txt";
  fs::create_directories(text.parent_path());
  std::ofstream(text) << "The quick brown fox jumps over the lazy dog. " << "It was the best of times, it was the worst of times. "
                      << "Call me Ishmael. Some years ago, never mind how long precisely, having little money in my purse.";
  const RunResult r = run_luka({"perplexity", "--text-file", text.string(), "--json", "--fidelity", "--preset", "mixed(2,2)",
                                "--set", "page_size=4,tail=8,interval=2", "--prompt-tokens", "12"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["fidelity"].size(), 30u);
  EXPECT_EQ(j["fidelity"][0]["mode"], "lined");
  EXPECT_EQ(j["fidelity"][10]["mode"], "clustered");
  for (const auto& l : j["fidelity"]) {
    EXPECT_GE(l["recall"].get<double>(), 0.0);
    EXPECT_LE(l["recall"].get<double>(), 1.0 + 1e-9);
    EXPECT_GE(l["kl"].get<double>(), -1e-6);  // fp32 effective vs fp64 dense: ~1e-9 noise when equal
    EXPECT_LE(l["hidden_cosine_vs_dense"].get<double>(), 1.0 + 1e-9);
    EXPECT_GT(l["hidden_cosine_vs_dense"].get<double>(), 0.0);
  }
  // Layer 0 is lined with a window wider than this text: exactly dense, so its hidden state is too.
  EXPECT_NEAR(j["fidelity"][0]["hidden_cosine_vs_dense"].get<double>(), 1.0, 1e-6);
  EXPECT_GT(j["next_token_kl_vs_dense"].get<double>(), 0.0);
}

TEST(Cli, ScheduleSwitchesModesDuringGeneration) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const RunResult r = run_luka({"generate", "--prompt", "The history of Rome", "--max-new-tokens", "12", "--preset", "clustered",
                                "--set", "page_size=2,tail=2,interval=1", "--schedule",
                                "step=3:layers=0-9:mode=lined;step=6:layers=all:mode=dense"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("attention: clustered 0-29"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[decode step 3] layers=0-9,mode=lined -> lined 0-9, clustered 10-29"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[decode step 6] layers=all,mode=dense -> dense 0-29"), std::string::npos) << r.err;
  for (const auto& bad : std::vector<std::string>{"layers=0:mode=lined", "step=0:mode=lined", "step=2"}) {
    const RunResult b = run_luka({"generate", "--prompt", "x", "--schedule", bad});
    EXPECT_EQ(b.exit_code, 2) << bad << ": " << b.err;
    EXPECT_EQ(error_lines(b.err), 1) << b.err;
  }
  const RunResult b = run_luka({"generate", "--prompt", "x", "--schedule", "step=2:layers=0:mode=fancy"});
  EXPECT_EQ(b.exit_code, 2) << b.err;
  EXPECT_NE(b.err.find("unknown mode 'fancy'"), std::string::npos) << b.err;
}

// --device: auto runs on the CPU here and says so; cuda without a GPU, a missing or broken plugin
// are one-line errors with exit 1; a malformed device is a usage error.
TEST(Cli, DeviceAutoFallsBackAndCudaIsRefusedWithOneLine) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const RunResult a = run_luka({"generate", "--prompt", "The capital of France is", "--max-new-tokens", "3"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const bool gpu = a.err.rfind("device: cuda:", 0) == 0;
  const bool driver = fs::exists("/dev/nvidiactl") || fs::exists("/dev/nvidia0") || fs::exists("/dev/dxg");
  // Where a GPU could have been chosen, auto says where it ran; without a driver it does not load
  // the CUDA plugin at all (it would map LibTorch's CUDA libraries for nothing) and says nothing,
  // so a CPU-only user's errors are one line.
  if (!gpu && driver) EXPECT_EQ(a.err.rfind("device: cpu (auto: ", 0), 0u) << a.err;
  if (!gpu && !driver) EXPECT_EQ(a.err.find("device:"), std::string::npos) << a.err;
  const RunResult cpu = run_luka({"generate", "--prompt", "The capital of France is", "--max-new-tokens", "3", "--device", "cpu"});
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  EXPECT_EQ(cpu.err.rfind("device: cpu\n", 0), 0u) << cpu.err;
  if (!gpu) EXPECT_EQ(cpu.out, a.out);
#if defined(LUKA_TEST_HAVE_CUDA_PLUGIN)
  const std::string without_gpu = "no GPU visible";
#else
  const std::string without_gpu = "no CUDA plugin";
#endif
  std::vector<std::pair<std::string, std::string>> refused = {{"", gpu ? "" : without_gpu},
                                                              {"LUKA_CUDA_PLUGIN=/nonexistent", "no CUDA plugin"},
                                                              {"LUKA_CUDA_PLUGIN=/etc/hostname", "cannot load the CUDA plugin /etc/hostname"}};
  for (const auto& [env, message] : refused) {
    if (message.empty()) continue;
    for (const char* cmd : {"generate", "perplexity", "capture", "forward"}) {
      std::vector<std::string> args = {cmd, "--device", "cuda"};
      if (std::string(cmd) == "generate") args.insert(args.end(), {"--prompt", "x"});
      if (std::string(cmd) == "perplexity") args.insert(args.end(), {"--text-file", (fs::path(LUKA_SOURCE_DIR) / "README.md").string()});
      if (std::string(cmd) == "capture") args.insert(args.end(), {"--prompt", "x", "--out", (fs::path(LUKA_TEST_WORK) / "cli" / "no.h5").string()});
      if (std::string(cmd) == "forward") args.insert(args.end(), {"--ids", "1,2", "--out", (fs::path(LUKA_TEST_WORK) / "cli" / "no.npy").string()});
      const RunResult r = run_luka(args, "/dev/null", env);
      EXPECT_EQ(r.exit_code, 1) << cmd << " " << env << ": " << r.err;
      EXPECT_EQ(error_lines(r.err), 1) << r.err;
      EXPECT_NE(r.err.find("device cuda:0: "), std::string::npos) << r.err;
      EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(fs::path(LUKA_TEST_WORK) / "cli" / "no.h5"));
  const RunResult bad = run_luka({"generate", "--prompt", "x", "--device", "gpu"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_EQ(error_lines(bad.err), 1) << bad.err;
}

TEST(Cli, InfoConfigPrintsTheConfigInForce) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const RunResult r = run_luka({"info", "--preset", "mixed(2,2)", "--set", "layer=10,mode=dense,top_k=7", "--config"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("luka modes       dense 10, lined 0-1|28-29, clustered 2-9|11-27"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["layers"]["10"]["top_k"], 7);
  EXPECT_EQ(j["layers"]["0"]["mode"], "lined");
  // The printed config is a layers-config file: loading it reproduces the same config.
  const fs::path saved = fs::path(LUKA_TEST_WORK) / "cli" / "info_config.json";
  std::ofstream(saved) << r.out.substr(r.out.find('{'));
  const RunResult again = run_luka({"info", "--layers-config", saved.string(), "--config"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out.substr(again.out.find('{')), r.out.substr(r.out.find('{')));
  // --set's layer list in both spellings (docs/luka-config.md#layer-lists), repeatable.
  const RunResult lists = run_luka({"info", "--set", "layers=0-1,28,mode=lined", "--set", "layers=29|10-11,mode=clustered"});
  ASSERT_EQ(lists.exit_code, 0) << lists.err;
  EXPECT_NE(lists.out.find("luka modes       dense 2-9|12-27, lined 0-1|28, clustered 10-11|29"), std::string::npos) << lists.out;
  for (const auto& bad : std::vector<std::vector<std::string>>{{"--set", "page_size=0"}, {"--set", "rho=2"},
                                                               {"--set", "layer=30,mode=lined"}, {"--set", "layers=0-3,x,mode=lined"},
                                                               {"--preset", "fancy"}}) {
    std::vector<std::string> args = {"info"};
    args.insert(args.end(), bad.begin(), bad.end());
    const RunResult e = run_luka(args);
    EXPECT_EQ(e.exit_code, 2) << bad[1];
    EXPECT_EQ(error_lines(e.err), 1) << e.err;
    EXPECT_NE(e.err.find("luka config"), std::string::npos) << e.err;
    EXPECT_EQ(e.out, "") << bad[1] << ": nothing is printed before the error";
  }
}

// --- --weights auto|quantized|dequantized -----------------------------------------------------

// Every command that loads a model takes --weights, states its default (auto), and a bad value is
// a one-line usage error.
TEST(Cli, WeightsOptionOnEveryModelCommand) {
  for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
           {"info"}, {"forward"}, {"generate"}, {"perplexity"}, {"capture"}, {"calibrate"}, {"eval", "wikisalad"}}) {
    std::vector<std::string> help = cmd;
    help.push_back("--help");
    const RunResult r = run_luka(help);
    ASSERT_EQ(r.exit_code, 0) << cmd[0];
    const auto at = r.out.find("--weights auto|quantized|dequantized");
    ASSERT_NE(at, std::string::npos) << cmd[0] << ":\n" << r.out;
    const auto end = r.out.find("\n  --", at + 1);
    EXPECT_NE(r.out.substr(at, end - at).find("(default: auto)"), std::string::npos) << cmd[0] << ":\n" << r.out;
  }
  for (const std::string bad : {"q4", "Quantized", ""}) {
    const RunResult r = run_luka({"generate", "--weights", bad, "--prompt", "x", "--max-new-tokens", "1"});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_EQ(error_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("--weights"), std::string::npos) << r.err;
  }
}

// quantized is refused, naming the file, where it could change nothing: a safetensors checkpoint,
// or a GGUF file with no block type the CPU GEMV reads (the F32 qwen3 fixture, when built).
TEST(Cli, QuantizedWeightsNeedAQuantizedGguf) {
  std::vector<fs::path> models = {checkpoint("qwen3-tied")};
  const fs::path f32_gguf = fs::path(LUKA_TEST_WORK) / "gguf" / "qwen3" / "model.gguf";
  if (fs::exists(f32_gguf)) models.push_back(f32_gguf);
  const std::string out = (fs::path(LUKA_TEST_WORK) / "cli" / "quantized-refused.npy").string();
  for (const fs::path& model : models) {
    const auto forward = [&](const char* weights) {
      return run_luka({"forward", "--model", model.string(), "--ids", "1,2,3", "--out", out, "--device", "cpu", "--weights", weights});
    };
    const RunResult r = forward("quantized");
    EXPECT_EQ(r.exit_code, 1) << model << ": " << r.err;
    EXPECT_EQ(error_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(model.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("quantized weights"), std::string::npos) << r.err;
    // The same model runs dequantized, which auto takes for it.
    const RunResult ok = forward("dequantized");
    EXPECT_EQ(ok.exit_code, 0) << model << ": " << ok.err;
    const RunResult automatic = forward("auto");
    EXPECT_EQ(automatic.exit_code, 0) << model << ": " << automatic.err;
  }
}

// auto, the default: the default model's Q4_1/Q8_0 blocks are held as blocks on the CPU (luka
// info marks quantized as loaded), dequantized where asked.
TEST(Cli, AutoWeightsAreQuantizedForTheDefaultGguf) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const RunResult r = run_luka({"info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("of fp32 tensors  (loaded)"), std::string::npos) << r.out;
  const RunResult d = run_luka({"info", "--weights", "dequantized"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.out.find("dequantized 538.1 MB: fp32 tensors  (loaded)"), std::string::npos) << d.out;
}

TEST(Cli, GenerateWithQuantizedWeightsOnTheDefaultModel) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const auto ids = [](const RunResult& r) { return nlohmann::json::parse(r.out)["ids"].get<std::vector<int>>(); };
  const std::vector<std::string> common = {"generate", "--prompt", "The capital of France is", "--max-new-tokens", "8",
                                           "--threads", "2", "--device", "cpu", "--json", "--weights"};
  std::vector<std::string> q = common, d = common;
  q.push_back("quantized");
  d.push_back("dequantized");
  const RunResult rq = run_luka(q), rd = run_luka(d);
  ASSERT_EQ(rq.exit_code, 0) << rq.err;
  ASSERT_EQ(rd.exit_code, 0) << rd.err;
  const std::string text = nlohmann::json::parse(rq.out)["text"].get<std::string>();
  EXPECT_EQ(text.rfind(" Paris", 0), 0u) << text;
  // Greedy ids equal the dequantized path's here (the quantized GEMV can flip a near tie elsewhere).
  EXPECT_EQ(ids(rq), ids(rd));
}

// Both footprints, from the default model's stored types: Q4_1 blocks are 20 bytes per 32 values,
// Q8_0 34 bytes per 32; every one of those tensors is kept as blocks (the Q8_0 one is the tied
// embedding, which is also the lm_head). Dequantized: 134,515,008 parameters x 4 bytes (fp32) or 2
// (bf16). Quantized: the blocks, and the 35,136 norm weights (30 layers x 2 x 576 + 576) as tensors.
TEST(Cli, InfoPrintsTheWeightsFootprintOfEachChoice) {
  if (!default_model_is_smollm2()) GTEST_SKIP() << "no SmolLM2 default model at " << kDefaultModel;
  const double blocks = 106168320.0 / 32 * 20 + 28311552.0 / 32 * 34;  // 96,436,224 bytes
  ASSERT_EQ(blocks, 96436224.0);
  ASSERT_EQ(134515008 - 106168320 - 28311552, 35136);
  const RunResult fp32 = run_luka({"info", "--weights", "dequantized"});
  ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
  EXPECT_NE(fp32.out.find("weights          dequantized 538.1 MB: fp32 tensors  (loaded)\n"), std::string::npos) << fp32.out;
  // 96,436,224 + 35,136 x 4 = 96,576,768
  EXPECT_NE(fp32.out.find("                 quantized   96.6 MB: 96.4 MB of GGUF blocks, read as stored, and 140.5 kB of fp32 tensors\n"),
            std::string::npos)
      << fp32.out;
  const RunResult bf16 = run_luka({"info", "--dtype", "bf16", "--weights", "quantized"});
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_NE(bf16.out.find("weights          dequantized 269.0 MB: bf16 tensors\n"), std::string::npos) << bf16.out;
  // 96,436,224 + 35,136 x 2 = 96,506,496
  EXPECT_NE(bf16.out.find("quantized   96.5 MB: 96.4 MB of GGUF blocks, read as stored, and 70.3 kB of bf16 tensors  (loaded)"),
            std::string::npos)
      << bf16.out;
  const RunResult st = run_luka({"info", "--model", checkpoint("qwen3-tied").string()});
  ASSERT_EQ(st.exit_code, 0) << st.err;
  EXPECT_NE(st.out.find("quantized   not available (not a GGUF file)"), std::string::npos) << st.out;
}
