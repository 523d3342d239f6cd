// io/h5_checks.cpp — validating reads of dataset-file objects (h5_checks.hpp).
#include "io/h5_checks.hpp"

#include <climits>

#include "core/error.hpp"

namespace dtrain::io {

H5Id open_h5_dataset(hid_t file, const std::string& path, const char* name, hid_t dapl) {
  const std::string obj = std::string("/") + name;
  if (!h5_link_exists(file, name)) DT_USAGE(path, ": ", obj, ": dataset is missing");
  H5O_info_t info;
  if (H5Oget_info_by_name(file, name, &info, H5P_DEFAULT) < 0)
    DT_USAGE(path, ": ", obj, ": cannot read object header", h5_error_suffix());
  if (info.type != H5O_TYPE_DATASET) DT_USAGE(path, ": ", obj, ": is not a dataset");
  hid_t d = H5Dopen2(file, name, dapl);
  if (d < 0) DT_USAGE(path, ": ", obj, ": cannot open dataset", h5_error_suffix());
  return H5Id(d, H5Dclose);
}

void check_int_type(hid_t dset, const std::string& path, const char* obj, size_t bytes, bool is_signed,
                    const char* expected) {
  H5Id type(H5Dget_type(dset), H5Tclose);
  if (!type.valid()) DT_USAGE(path, ": ", obj, ": cannot read dtype", h5_error_suffix());
  const bool ok = H5Tget_class(type.get()) == H5T_INTEGER && H5Tget_size(type.get()) == bytes &&
                  (H5Tget_sign(type.get()) == H5T_SGN_2) == is_signed;
  if (!ok) DT_USAGE(path, ": ", obj, ": dtype is ", h5_type_name(type.get()), ", expected ", expected);
}

std::vector<hsize_t> dataset_dims(hid_t dset, const std::string& path, const char* obj) {
  H5Id space(H5Dget_space(dset), H5Sclose);
  if (!space.valid()) DT_USAGE(path, ": ", obj, ": cannot read dataspace", h5_error_suffix());
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) DT_USAGE(path, ": ", obj, ": cannot read rank", h5_error_suffix());
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

int read_classes(hid_t file, const std::string& path) {
  if (!has_attribute(file, "classes")) DT_USAGE(path, ": attribute 'classes' on the file root is missing");
  const int64_t classes = read_int_attribute(file, path, "classes");
  if (classes <= 0 || classes > INT32_MAX) DT_USAGE(path, ": attribute 'classes': must be > 0, found ", classes);
  return int(classes);
}

std::vector<int32_t> read_labels(hid_t file, const std::string& path, int64_t n, int classes,
                                 const char* n_from) {
  H5Id labels = open_h5_dataset(file, path, "labels");
  check_int_type(labels.get(), path, "/labels", 4, true, "int32");
  auto ldims = dataset_dims(labels.get(), path, "/labels");
  if (ldims.size() != 1) DT_USAGE(path, ": /labels: rank is ", ldims.size(), ", expected 1 ([N])");
  if (int64_t(ldims[0]) != n)
    DT_USAGE(path, ": /labels: has ", ldims[0], " entries but ", n_from, " has ", n, " samples");
  std::vector<int32_t> out(static_cast<size_t>(n));
  if (H5Dread(labels.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    DT_USAGE(path, ": /labels: read failed (a truncated or damaged file?)", h5_error_suffix());
  for (int64_t i = 0; i < n; ++i)
    if (out[size_t(i)] < 0 || out[size_t(i)] >= classes)
      DT_USAGE(path, ": /labels: label ", out[size_t(i)], " at index ", i, " is outside [0, ", classes, ")");
  return out;
}

}  // namespace dtrain::io
