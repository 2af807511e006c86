// PNG files from images (stb_image_write from Debian's libstb), and reading them back for tests.
#pragma once

#include <filesystem>

#include "viz/heatmap.h"

namespace luka::viz {

// Writes `image` (RGBA) as a PNG. Throws luka::Error naming the file.
void write_png(const Image& image, const std::filesystem::path& path);
// Reads a PNG into RGBA. Throws luka::Error naming the file.
Image read_png(const std::filesystem::path& path);

}  // namespace luka::viz
