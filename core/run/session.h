// One model run as the commands and the Studio set it up: the device, the model and its
// tokenizer, a decoder, the LuKA layers a config installs in it, and the run loop over them with
// the device's token sampler. Built by one call; use() swaps the config (new layers, new loop), as
// an evaluation over several presets does.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/luka/config.h"
#include "core/run/run_loop.h"

namespace luka {

class Backend;
class Decoder;
class LukaLayer;
class Model;
class Tokenizer;

class RunSession {
 public:
  // `tokenizer` (may be null: no token texts for the layers, e.g. a run on ids) must outlive the
  // session. Starts with plain attention (no LuKA layer) until use() gives a config.
  RunSession(std::shared_ptr<const Backend> device, std::shared_ptr<const Model> model,
             const Tokenizer* tokenizer = nullptr);
  ~RunSession();
  RunSession(const RunSession&) = delete;
  RunSession& operator=(const RunSession&) = delete;

  // Installs `config`'s layers in the decoder (on the device: CPU or CUDA layers), hands them the
  // tokenizer's token texts, and makes the run loop over them; std::nullopt: plain attention.
  // Throws luka::Error for a config the device cannot run.
  void use(const std::optional<LukaConfig>& config);

  RunLoop& loop() { return *loop_; }
  Decoder& decoder() { return *decoder_; }
  const Model& model() const { return *model_; }
  const std::shared_ptr<const Model>& shared_model() const { return model_; }
  const Backend& device() const { return *device_; }
  const std::vector<std::shared_ptr<LukaLayer>>& layers() const { return layers_; }
  // The config in use (std::nullopt: plain attention).
  const std::optional<LukaConfig>& config() const { return config_; }

 private:
  std::shared_ptr<const Backend> device_;
  std::shared_ptr<const Model> model_;
  const Tokenizer* tokenizer_;
  std::unique_ptr<Decoder> decoder_;
  std::vector<std::shared_ptr<LukaLayer>> layers_;
  std::optional<LukaConfig> config_;
  std::unique_ptr<RunLoop> loop_;
};

}  // namespace luka
