// io/dataset.cpp — the layout attribute and open_dataset() (dataset.hpp).
#include "io/dataset.hpp"

#include "core/error.hpp"
#include "io/h5_checks.hpp"
#include "io/hdf5_dataset.hpp"
#include "io/jpeg_dataset.hpp"

namespace dtrain::io {

const char* layout_name(Layout l) { return l == Layout::jpeg ? "jpeg" : "raw"; }

Layout file_layout(const std::string& path) {
  H5Id f = open_h5_read_only(path);
  if (!has_attribute(f.get(), "layout")) return Layout::raw;
  const std::string layout = read_string_attribute(f.get(), path, "layout");
  if (layout == "raw") return Layout::raw;
  if (layout == "jpeg") return Layout::jpeg;
  DT_USAGE(path, ": attribute 'layout' is '", layout, "', expected 'raw' or 'jpeg' (docs/data-formats.md)");
}

std::unique_ptr<Dataset> open_dataset(const std::string& path) { return open_dataset(path, Hdf5Options{}); }

std::unique_ptr<Dataset> open_dataset(const std::string& path, const Hdf5Options& options) {
  if (file_layout(path) == Layout::jpeg) return std::make_unique<JpegDataset>(path);
  return std::make_unique<Hdf5Dataset>(path, options);
}

}  // namespace dtrain::io
