// The one place figures become files: a cairo surface for the extension (.png at 2 pixels per
// point, .svg with a <title>, .pdf with Title metadata), drawn by `paint` in points and written
// through a temporary file renamed on success. Throws luka::Error naming the file.
#pragma once

#include <cairo.h>

#include <filesystem>
#include <functional>
#include <string>

namespace luka::viz {

void render_file(const std::filesystem::path& target, double width, double height, const std::string& title,
                 const std::function<void(cairo_t*)>& paint);

}  // namespace luka::viz
