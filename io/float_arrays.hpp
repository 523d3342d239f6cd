// io/float_arrays.hpp — named 1-D float32 arrays in one HDF5 file.
//
// A small generic dump format for flat parameter vectors (determinism tests
// compare parameters after N steps across runs and rank counts). The file is
// written under "<path>.tmp.<pid>", fsynced and renamed, so a reader never sees
// a half-written file. Names are HDF5 paths relative to the root ("w", "net/fc1");
// intermediate groups are created.
#pragma once

#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::io {

// Writes each (name, values) pair as a 1-D float32 dataset [values.size()],
// and each (name, text) of `root_attributes` as a string attribute of the root
// group ("/"). Throws dtrain::Error on a write failure or a duplicate name.
void save_float_arrays(const std::string& path,
                       const std::vector<std::pair<std::string, std::span<const float>>>& arrays,
                       const std::vector<std::pair<std::string, std::string>>& root_attributes = {});

// Reads dataset `name` of `path`: must be 1-D float32. Throws dtrain::UsageError
// naming the file and the dataset (missing file or dataset, wrong dtype or rank).
std::vector<float> load_float_array(const std::string& path, const std::string& name);

}  // namespace dtrain::io
