// io/h5_checks.hpp — validating reads of a dataset file's objects (raw and jpeg
// layouts, docs/data-formats.md). Every problem is a dtrain::UsageError whose
// message names the file and the object, e.g.
//   "data/x.h5: /offsets: dtype is int32, expected uint64".
#pragma once

#include <hdf5.h>

#include <string>
#include <vector>

#include "io/h5_util.hpp"

namespace dtrain::io {

// Opens dataset `name` (no leading '/') under `file`: missing, not a dataset or
// unreadable are UsageErrors.
H5Id open_h5_dataset(hid_t file, const std::string& path, const char* name, hid_t dapl = H5P_DEFAULT);

// Requires an integer dtype of `bytes` bytes and the given signedness; `expected`
// names it in the message ("uint8").
void check_int_type(hid_t dset, const std::string& path, const char* obj, size_t bytes, bool is_signed,
                    const char* expected);

// The dataset's dimensions (rank = size()).
std::vector<hsize_t> dataset_dims(hid_t dset, const std::string& path, const char* obj);

// The root attribute 'classes': a single integer in [1, 2^31).
int read_classes(hid_t file, const std::string& path);

// (Attributes: has_attribute, read_int_attribute, read_string_attribute of io/h5_util.hpp.)

// Reads /labels: int32 [n], every value in [0, classes).
std::vector<int32_t> read_labels(hid_t file, const std::string& path, int64_t n, int classes,
                                 const char* n_from);

}  // namespace dtrain::io
