// Broken checkpoints and bad inputs: each must give a luka::Error naming the file and the
// problem, never a crash.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/util/error.h"
#include "core/model/safetensors.h"
#include "core/model/shard_index.h"
#include "tests/core/model/test_util.h"

namespace luka {
namespace {

namespace fs = std::filesystem;

// Runs `f`, expects a luka::Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a luka::Error: " << e.what();
  }
}

fs::path copy_checkpoint(const std::string& name, const std::string& as) {
  const fs::path src = test::checkpoint(name);
  const fs::path dst = test::scratch(as);
  for (const auto& e : fs::directory_iterator(src))
    if (e.is_regular_file()) fs::copy_file(e.path(), dst / e.path().filename(), fs::copy_options::overwrite_existing);
  return dst;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const fs::path& p, const std::string& bytes) {
  fs::permissions(p.parent_path(), fs::perms::owner_all, fs::perm_options::add);
  if (fs::exists(p)) fs::remove(p);
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string safetensors_bytes(const std::string& header, std::size_t data_bytes) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

TEST(BadInput, TruncatedSafetensors) {
  const fs::path dir = copy_checkpoint("qwen3-tied", "truncated");
  const fs::path file = dir / "model.safetensors";
  const std::string bytes = read_all(file);
  write_all(file, bytes.substr(0, bytes.size() / 2));
  expect_error([&] { Model::load(dir, {}); }, {file.string(), "past the end", "truncated"});
  write_all(file, bytes.substr(0, 5));
  expect_error([&] { Model::load(dir, {}); }, {file.string(), "truncated safetensors file"});
  write_all(file, bytes.substr(0, 100));  // header cut in the middle
  expect_error([&] { Model::load(dir, {}); }, {file.string(), "truncated safetensors file", "header"});
}

TEST(BadInput, DataOffsetsPastEndOfFile) {
  const fs::path file = test::scratch("offsets") / "x.safetensors";
  write_all(file, safetensors_bytes(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,1000]}})", 16));
  expect_error([&] { SafetensorsFile f(file); }, {file.string(), "'w'", "data_offsets end 1000", "past the end"});
  write_all(file, safetensors_bytes(R"({"w":{"dtype":"F32","shape":[8],"data_offsets":[0,16]}})", 16));
  expect_error([&] { SafetensorsFile f(file); }, {file.string(), "'w'", "need 32"});
  write_all(file, safetensors_bytes(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]})", 16));
  expect_error([&] { SafetensorsFile f(file); }, {file.string(), "invalid safetensors header JSON"});
  write_all(file, safetensors_bytes(R"({"w":{"dtype":"Q4","shape":[4],"data_offsets":[0,16]}})", 16));
  expect_error([&] { SafetensorsFile f(file); }, {file.string(), "unknown dtype 'Q4'"});
}

TEST(BadInput, TensorShapeDisagreesWithConfig) {
  const fs::path dir = copy_checkpoint("qwen3-tied", "wrong-shape");
  auto cfg = nlohmann::json::parse(read_all(dir / "config.json"));
  cfg["intermediate_size"] = 128;  // the file holds 160
  write_all(dir / "config.json", cfg.dump(2));
  expect_error([&] { Model::load(dir, {}); },
               {(dir / "model.safetensors").string(), "model.layers.0.mlp.gate_proj.weight", "[160, 64]",
                "[128, 64]", (dir / "config.json").string()});
}

TEST(BadInput, TensorOfUnsupportedDtype) {
  const fs::path dir = copy_checkpoint("qwen3-tied", "wrong-dtype");
  const fs::path file = dir / "model.safetensors";
  std::string bytes = read_all(file);
  // Retag the first F32 tensor as I32 (same size, so the file stays consistent otherwise).
  const auto at = bytes.find("\"F32\"");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 5, "\"I32\"");
  write_all(file, bytes);
  expect_error([&] { Model::load(dir, {}); }, {file.string(), "dtype I32 is not supported"});
}

TEST(BadInput, MissingTensor) {
  const fs::path dir = copy_checkpoint("qwen3-bf16", "missing-tensor");
  auto cfg = nlohmann::json::parse(read_all(dir / "config.json"));
  cfg["num_hidden_layers"] = 4;  // the file has 3 layers
  write_all(dir / "config.json", cfg.dump(2));
  expect_error([&] { Model::load(dir, {}); }, {dir.string(), "lacks tensor 'model.layers.3.input_layernorm.weight'"});
}

TEST(BadInput, MissingConfigField) {
  const fs::path dir = copy_checkpoint("qwen3-tied", "missing-field");
  auto cfg = nlohmann::json::parse(read_all(dir / "config.json"));
  cfg.erase("num_hidden_layers");
  write_all(dir / "config.json", cfg.dump(2));
  expect_error([&] { Model::load(dir, {}); }, {(dir / "config.json").string(), "missing field 'num_hidden_layers'"});
  fs::remove(dir / "config.json");
  expect_error([&] { Model::load(dir, {}); }, {(dir / "config.json").string(), "missing"});
}

TEST(BadInput, ShardIndexNamesMissingFile) {
  const fs::path dir = copy_checkpoint("qwen3-fp16-sharded", "missing-shard");
  const fs::path gone = dir / "model-00003-of-00012.safetensors";
  ASSERT_TRUE(fs::exists(gone));
  fs::remove(gone);
  expect_error([&] { Model::load(dir, {}); },
               {(dir / "model.safetensors.index.json").string(), "missing file 'model-00003-of-00012.safetensors'"});
}

// A shard index may only name plain files inside the checkpoint folder: "../", absolute paths and
// links out of the folder are refused without opening them, and a FIFO (which would block the
// load forever) is refused as not a regular file.
TEST(BadInput, ShardIndexPathsStayInsideTheFolder) {
  const fs::path dir = copy_checkpoint("qwen3-fp16-sharded", "shard-paths");
  const fs::path index = dir / "model.safetensors.index.json";
  const std::string original = read_all(index);
  const auto first_shard = [&] { return nlohmann::json::parse(original)["weight_map"].begin().value().get<std::string>(); };
  const fs::path outside = dir.parent_path() / "outside.safetensors";
  fs::copy_file(dir / first_shard(), outside, fs::copy_options::overwrite_existing);
  fs::remove(dir / "link.safetensors");
  fs::create_symlink(outside, dir / "link.safetensors");
  fs::remove(dir / "fifo.safetensors");
  ASSERT_EQ(::mkfifo((dir / "fifo.safetensors").c_str(), 0600), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"../outside.safetensors", "no '..'"},
      {outside.string(), "must be a file name inside the checkpoint folder"},
      {"/etc/passwd", "must be a file name inside the checkpoint folder"},
      {"link.safetensors", "leads outside the checkpoint folder"},
      {"fifo.safetensors", "is not a regular file"},
      {".", "is not a regular file"}};
  for (const auto& [shard, why] : cases) {
    auto j = nlohmann::json::parse(original);
    j["weight_map"].begin().value() = shard;
    write_all(index, j.dump());
    expect_error([&] { Model::load(dir, {}); }, {index.string(), shard, why});
  }
}

// A folder with model.safetensors and a shard index: transformers loads model.safetensors, this
// tool loaded the shards, and nothing said which. It is refused, naming both.
TEST(BadInput, SingleFileBesideAShardIndexIsRefused) {
  const fs::path dir = copy_checkpoint("qwen3-fp16-sharded", "single-and-shards");
  fs::copy_file(test::checkpoint("qwen3-tied") / "model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
  expect_error([&] { Model::load(dir, {}); },
               {dir.string(), "holds both model.safetensors and a shard index", "transformers would load model.safetensors"});
  fs::remove(dir / "model.safetensors");
  EXPECT_NO_THROW(Model::load(dir, {}));
}

// model.safetensors a FIFO: opening it blocked until a writer came, so the load hung. It is refused
// before open() (in a child process, so that a hang fails the test instead of stopping it).
TEST(BadInput, FifoWeightsAreRefusedBeforeOpening) {
  const fs::path dir = copy_checkpoint("qwen3-tied", "fifo-weights");
  fs::remove(dir / "model.safetensors");
  ASSERT_EQ(::mkfifo((dir / "model.safetensors").c_str(), 0600), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(20);  // a hang ends the child by SIGALRM
    try {
      TensorIndex::open(dir);  // what Model::load reads the weights with, without LibTorch's threads
    } catch (const Error& e) {
      const std::string msg = e.what();
      ::_exit(msg.find((dir / "model.safetensors").string() + ": not a regular file (a FIFO)") != std::string::npos ? 0 : 3);
    }
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) + " (14: it hung in open())"
                              : "exit " + std::to_string(WEXITSTATUS(status)));
}

TEST(BadInput, RmsNormEpsMustBePositive) {
  const fs::path dir = copy_checkpoint("qwen3-tied", "eps");
  auto cfg = nlohmann::json::parse(read_all(dir / "config.json"));
  for (const double eps : {0.0, -1e-6}) {
    cfg["rms_norm_eps"] = eps;
    write_all(dir / "config.json", cfg.dump(2));
    expect_error([&] { Model::load(dir, {}); }, {(dir / "config.json").string(), "rms_norm_eps", "must be a positive number"});
  }
}

// The format gives each tensor its own bytes: overlapping ranges are a corrupt header.
TEST(BadInput, OverlappingTensorsRefused) {
  const fs::path file = test::scratch("overlap") / "x.safetensors";
  write_all(file, safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16));
  expect_error([&] { SafetensorsFile f(file); }, {file.string(), "'a' [0, 16)", "'b' [8, 16)", "overlap"});
  write_all(file, safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                                    R"("e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})", 16));
  EXPECT_NO_THROW(SafetensorsFile f(file));  // adjacent ranges and an empty one are fine
}

// NaN or Inf in the weights would give NaN logits and a "nan" perplexity: refused at load, naming
// the tensor and the first bad value.
TEST(BadInput, NonFiniteWeightsRefusedAtLoad) {
  const fs::path dir = copy_checkpoint("qwen3-tied", "nan-weights");
  const fs::path file = dir / "model.safetensors";
  std::string bytes = read_all(file);
  const std::uint64_t header = *reinterpret_cast<const std::uint64_t*>(bytes.data());
  const auto h = nlohmann::json::parse(bytes.substr(8, header));
  const auto& e = h["model.norm.weight"];
  ASSERT_EQ(e["dtype"], "F32");
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::string b = bytes;
    const std::size_t at = 8 + header + e["data_offsets"][0].get<std::size_t>() + 3 * 4;
    std::memcpy(&b[at], &bad, 4);
    write_all(file, b);
    expect_error([&] { Model::load(dir, {}); }, {dir.string(), "weight final_norm", "non-finite", "flat index 3"});
  }
}

TEST(BadInput, NoWeightsFile) {
  const fs::path dir = copy_checkpoint("qwen3-tied", "no-weights");
  fs::remove(dir / "model.safetensors");
  expect_error([&] { Model::load(dir, {}); }, {dir.string(), "no model.safetensors"});
}

TEST(BadInput, Fp16ComputeOnCpu) {
  expect_error([&] { Model::load(test::checkpoint("qwen3-tied"), LoadOptions{DType::kF16, 0}); },
               {"fp16 compute is not supported on CPU"});
}

TEST(BadInput, IdsOutsideVocabulary) {
  const auto model = Model::load(test::checkpoint("qwen3-tied"), {});
  Decoder decoder(model);
  expect_error([&] { decoder.prefill({1, 2, 512}); }, {"token id 512", "[0, 512)"});
  expect_error([&] { decoder.prefill({-1}); }, {"token id -1", "[0, 512)"});
  EXPECT_EQ(decoder.position(), 0);
  decoder.prefill({1, 2});
  expect_error([&] { decoder.decode(100000); }, {"token id 100000", "[0, 512)"});
  EXPECT_EQ(decoder.position(), 2);  // the failed step changed nothing
  EXPECT_NO_THROW(decoder.decode(3));
}

TEST(BadInput, PromptLongerThanMaxPositions) {
  const fs::path dir = test::checkpoint("qwen3-tied");
  Decoder decoder(Model::load(dir, {}));
  const std::vector<std::int32_t> ids(257, 5);
  expect_error([&] { decoder.prefill(ids); },
               {"prompt of 257 tokens exceeds max_position_embeddings 256", (dir / "config.json").string()});
  EXPECT_EQ(decoder.position(), 0);
  expect_error([&] { decoder.prefill({}); }, {"empty prompt"});
}

}  // namespace
}  // namespace luka
