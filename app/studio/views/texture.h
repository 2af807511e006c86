// An OpenGL texture holding an RGBA image, sampled nearest (single tokens stay crisp).
#pragma once

#include <cstdint>

#include "viz/heatmap.h"

namespace luka::studio {

class Texture {
 public:
  Texture() = default;
  ~Texture();
  Texture(const Texture&) = delete;
  Texture& operator=(const Texture&) = delete;
  void upload(const viz::Image& image);
  void* id() const;  // for ImGui::Image
  int width() const { return width_; }
  int height() const { return height_; }
  bool valid() const { return tex_ != 0; }

 private:
  unsigned int tex_ = 0;
  int width_ = 0, height_ = 0;
};

}  // namespace luka::studio
