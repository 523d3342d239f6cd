// tests/jpeg_store.cpp — write_jpeg_store and the Fashion-MNIST pictures (jpeg_store.hpp).
#include "tests/jpeg_store.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/settings.hpp"
#include "io/idx.hpp"
#include "io/resample.hpp"

namespace dtrain::test {

namespace {
void h5(herr_t rc, const char* what) { DT_CHECK(rc >= 0, "write_jpeg_store: ", what); }
hid_t h5id(hid_t id, const char* what) {
  DT_CHECK(id >= 0, "write_jpeg_store: ", what);
  return id;
}

void write_1d(hid_t f, const char* name, hid_t file_type, hid_t mem_type, const void* data, hsize_t n,
              hsize_t chunk = 0) {
  hid_t space = h5id(H5Screate_simple(1, &n, nullptr), name);
  hid_t dcpl = h5id(H5Pcreate(H5P_DATASET_CREATE), name);
  if (chunk > 0) h5(H5Pset_chunk(dcpl, 1, &chunk), name);
  hid_t d = h5id(H5Dcreate2(f, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), name);
  h5(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), name);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
}

void int_attr(hid_t f, const char* name, int64_t v) {
  hid_t s = H5Screate(H5S_SCALAR);
  hid_t a = h5id(H5Acreate2(f, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT), name);
  h5(H5Awrite(a, H5T_NATIVE_INT64, &v), name);
  H5Aclose(a);
  H5Sclose(s);
}
}  // namespace

void write_jpeg_store(const std::string& path, const std::vector<StoreImage>& images, const StoreOptions& o) {
  DT_CHECK(!images.empty(), "write_jpeg_store: no images");
  std::filesystem::remove(path);
  std::vector<uint8_t> bytes;
  std::vector<uint64_t> offsets{0};
  std::vector<int32_t> shapes, labels;
  int size = o.size;
  for (const StoreImage& im : images) {
    bytes.insert(bytes.end(), im.jpeg.begin(), im.jpeg.end());
    offsets.push_back(bytes.size());
    shapes.insert(shapes.end(), {im.h, im.w, 3});
    labels.push_back(im.label);
    if (o.size == 0) size = size == 0 ? std::min(im.h, im.w) : std::min(size, std::min(im.h, im.w));
  }
  hid_t f = h5id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create");
  write_1d(f, "jpeg", H5T_STD_U8LE, H5T_NATIVE_UINT8, bytes.data(), bytes.size(),
           hsize_t(std::min<int64_t>(o.chunk_bytes, int64_t(bytes.size()))));
  write_1d(f, "offsets", H5T_STD_U64LE, H5T_NATIVE_UINT64, offsets.data(), offsets.size());
  {
    hsize_t dims[2] = {images.size(), 3};
    hid_t space = H5Screate_simple(2, dims, nullptr);
    hid_t d = h5id(H5Dcreate2(f, "shapes", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "shapes");
    h5(H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, shapes.data()), "shapes");
    H5Dclose(d);
    H5Sclose(space);
  }
  write_1d(f, "labels", H5T_STD_I32LE, H5T_NATIVE_INT32, labels.data(), labels.size());
  int_attr(f, "classes", o.classes);
  int_attr(f, "size", size);
  {
    hid_t type = H5Tcopy(H5T_C_S1);
    const char* layout = "jpeg";
    if (o.variable_length_layout)
      H5Tset_size(type, H5T_VARIABLE);
    else
      H5Tset_size(type, 4);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = h5id(H5Acreate2(f, "layout", type, s, H5P_DEFAULT, H5P_DEFAULT), "layout");
    if (o.variable_length_layout)
      h5(H5Awrite(a, type, &layout), "layout");
    else
      h5(H5Awrite(a, type, layout), "layout");
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(type);
  }
  H5Fclose(f);
}

FashionImages fashion_images(int64_t n, bool test_set) {
  const std::string dir = settings::fashion_dir() + "/";  // DTRAIN_FASHION_DIR, as dtrain data
  const std::string stem = test_set ? "t10k" : "train";
  io::IdxImages im = io::read_idx_images(dir + stem + "-images-idx3-ubyte.gz");
  std::vector<uint8_t> lab = io::read_idx_labels(dir + stem + "-labels-idx1-ubyte.gz");
  FashionImages f;
  f.n = std::min(n, im.n);
  f.pixels.assign(im.pixels.begin(), im.pixels.begin() + f.n * 28 * 28);
  f.labels.assign(lab.begin(), lab.begin() + f.n);
  return f;
}

std::vector<uint8_t> fashion_rgb(const FashionImages& f, int64_t k, int64_t h, int64_t w, bool gray) {
  std::vector<uint8_t> g(static_cast<size_t>(h * w));
  io::resize_image(f.pixels.data() + k * 28 * 28, 28, 28, 1, h, w, g.data());
  std::vector<uint8_t> rgb(static_cast<size_t>(h * w * 3));
  for (int64_t i = 0; i < h * w; ++i) {
    const unsigned p = g[size_t(i)];
    rgb[size_t(3 * i)] = uint8_t(p);
    rgb[size_t(3 * i + 1)] = gray ? uint8_t(p) : uint8_t((p + (p + 85u * unsigned(k)) % 256u) / 2u);
    rgb[size_t(3 * i + 2)] = gray ? uint8_t(p) : uint8_t(255u - p);
  }
  return rgb;
}

}  // namespace dtrain::test
