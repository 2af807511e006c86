#include "app/studio/views/texture.h"

#include <GL/gl.h>

namespace luka::studio {

Texture::~Texture() {
  if (tex_) glDeleteTextures(1, &tex_);
}

void Texture::upload(const viz::Image& image) {
  if (!tex_) glGenTextures(1, &tex_);
  glBindTexture(GL_TEXTURE_2D, tex_);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, image.width, image.height, 0, GL_RGBA, GL_UNSIGNED_BYTE, image.rgba.data());
  width_ = image.width;
  height_ = image.height;
}

void* Texture::id() const { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(tex_)); }

}  // namespace luka::studio
