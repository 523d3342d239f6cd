// engine/metrics.cpp — JSON Lines writer.
#include "engine/metrics.hpp"

#include <filesystem>

#include "core/error.hpp"

namespace dtrain::engine {

MetricsWriter::MetricsWriter(const std::string& path, bool append) {
  if (path.empty()) return;
  auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (f_ == nullptr) DT_USAGE("option 'metrics': cannot open '", path, "' for writing");
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!f_) return;
  std::string line = record.dump();
  std::fprintf(f_, "%s\n", line.c_str());
  std::fflush(f_);
}

}  // namespace dtrain::engine
