// io/idx.cpp — IDX reading through zlib and the Fashion-MNIST converter.
#include "io/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <sstream>
#include <system_error>

#include "core/error.hpp"
#include "core/format.hpp"
#include "io/hdf5_dataset.hpp"
#include "io/output_lock.hpp"

namespace dtrain::io {

namespace {

constexpr uint32_t kMagicLabels = 0x00000801;       // uint8 data, 1 dimension
constexpr uint32_t kMagicImages = 0x00000803;       // uint8 data, 3 dimensions
constexpr int64_t kMaxIdxBytes = int64_t{1} << 36;  // refuse absurd headers (64 GiB)

class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) DT_USAGE(format::missing_path(path), ": no such file");
    f_ = gzopen(path.c_str(), "rb");
    if (!f_) DT_USAGE(path, ": cannot open");
    gzbuffer(f_, 1 << 20);
  }
  ~GzFile() {
    if (f_) gzclose(f_);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  // Reads up to `bytes`; returns how many were read. Throws on a zlib error.
  int64_t read(void* dst, int64_t bytes) {
    int64_t done = 0;
    while (done < bytes) {
      unsigned want = unsigned(std::min<int64_t>(bytes - done, 1 << 30));
      int got = gzread(f_, static_cast<char*>(dst) + done, want);
      if (got < 0) {
        int errnum = 0;
        const char* msg = gzerror(f_, &errnum);
        DT_USAGE(path_, ": corrupt gzip data: ", msg ? msg : "unknown zlib error");
      }
      if (got == 0) break;
      done += got;
    }
    return done;
  }
  // Z_BUF_ERROR after a short read: the gzip stream itself was cut off.
  bool stream_cut() {
    int errnum = Z_OK;
    gzerror(f_, &errnum);
    return errnum == Z_BUF_ERROR;
  }

 private:
  std::string path_;
  gzFile f_ = nullptr;
};

// Reads the header; checks the magic and returns the dimensions.
std::vector<int64_t> read_header(GzFile& f, const std::string& path, uint32_t magic,
                                 const char* kind) {
  unsigned char b[4];
  if (f.read(b, 4) != 4) DT_USAGE(path, ": truncated IDX header (file too short)");
  const uint32_t m = uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3];
  if (m != magic) {
    std::ostringstream os;
    os << std::hex << "0x" << m << ", expected 0x" << magic << " (" << kind << ")";
    DT_USAGE(path, ": bad IDX magic number ", os.str());
  }
  std::vector<int64_t> dims(magic & 0xff);
  int64_t total = 1;
  for (auto& d : dims) {
    if (f.read(b, 4) != 4) DT_USAGE(path, ": truncated IDX header (file too short)");
    d = int64_t(uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3]);
    if (d == 0) DT_USAGE(path, ": IDX dimension is 0");
    total *= d;
    if (total > kMaxIdxBytes) DT_USAGE(path, ": IDX header advertises more than 64 GiB");
  }
  return dims;
}

// Reads exactly `bytes` of payload and checks that nothing follows it.
std::vector<uint8_t> read_payload(GzFile& f, const std::string& path, int64_t bytes) {
  std::vector<uint8_t> data;
  // Grow as data arrives, so a bogus header on a short file fails as "truncated".
  const int64_t step = int64_t{16} << 20;
  while (int64_t(data.size()) < bytes) {
    const int64_t have = int64_t(data.size());
    const int64_t want = std::min(step, bytes - have);
    data.resize(size_t(have + want));
    const int64_t got = f.read(data.data() + have, want);
    if (got < want) {
      DT_USAGE(path, ": truncated: header advertises ", bytes, " data bytes, file holds ",
               have + got, f.stream_cut() ? " (gzip stream cut off)" : "");
    }
  }
  unsigned char extra;
  if (f.read(&extra, 1) != 0)
    DT_USAGE(path, ": holds more bytes than its IDX header advertises (", bytes, ")");
  // The payload is whole but the gzip stream ends before its trailer: its CRC
  // was never checked (a changed byte in such a file was converted silently).
  if (f.stream_cut()) DT_USAGE(path, ": truncated: the gzip stream is cut off before its end (CRC not checked)");
  return data;
}

// One split, read and checked whole (images and labels agree, labels in range)
// before anything is written.
struct Split {
  IdxImages img;
  std::vector<int32_t> labels;
};

Split read_split(const std::string& images_path, const std::string& labels_path) {
  Split s;
  s.img = read_idx_images(images_path);
  std::vector<uint8_t> raw = read_idx_labels(labels_path);
  if (int64_t(raw.size()) != s.img.n)
    DT_USAGE(images_path, " holds ", s.img.n, " images but ", labels_path, " holds ", raw.size(),
             " labels");
  s.labels.resize(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] >= kFashionClasses)
      DT_USAGE(labels_path, ": label ", int(raw[i]), " at index ", i, " is outside [0, ",
               kFashionClasses, ")");
    s.labels[i] = raw[i];
  }
  return s;
}

// A writer of one split, its file a temporary one until commit().
std::unique_ptr<DatasetWriter> write_split(const Split& s, const std::string& out_path) {
  auto w = std::make_unique<DatasetWriter>(out_path, s.img.n, s.img.rows, s.img.cols, 1, kFashionClasses);
  w->write(0, s.img.n, s.img.pixels, s.labels);
  return w;
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  GzFile f(path);
  auto dims = read_header(f, path, kMagicImages, "images: uint8, 3 dimensions");
  IdxImages img;
  img.n = dims[0];
  img.rows = dims[1];
  img.cols = dims[2];
  img.pixels = read_payload(f, path, img.n * img.rows * img.cols);
  return img;
}

std::vector<uint8_t> read_idx_labels(const std::string& path) {
  GzFile f(path);
  auto dims = read_header(f, path, kMagicLabels, "labels: uint8, 1 dimension");
  return read_payload(f, path, dims[0]);
}

std::string ConvertSummary::describe() const {
  std::ostringstream os;
  os << train_path << ": " << n_train << " images " << height << "x" << width << "x" << channels
     << ", " << classes << " classes\n"
     << test_path << ": " << n_test << " images " << height << "x" << width << "x" << channels
     << ", " << classes << " classes";
  return os.str();
}

ConvertSummary convert_fashion_mnist(const std::string& src_dir, const std::string& out_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // Training images, labels, then test images, labels (the advice names them too).
  constexpr const char* kFiles[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                    "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
  constexpr const char* kAdvice =
      "It must hold train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and "
      "t10k-labels-idx1-ubyte.gz: Debian's dataset-fashion-mnist package puts them in "
      "/usr/share/datasets/fashion-mnist, elsewhere download them from "
      "https://github.com/zalandoresearch/fashion-mnist (data/fashion) and give the folder with --src DIR or "
      "DTRAIN_FASHION_DIR";
  if (src_dir.empty()) DT_USAGE("the Fashion-MNIST source folder is empty (''). ", kAdvice);
  if (!fs::is_directory(src_dir, ec))
    DT_USAGE(format::missing_path(src_dir), fs::exists(src_dir, ec) ? ": is not a directory" : ": no such directory",
             " (Fashion-MNIST source). ", kAdvice);
  // All four checked before anything is written: a folder with only the
  // training files must not leave a converted training split behind.
  std::string missing, odd;
  for (const char* f : kFiles) {
    const fs::path p = fs::path(src_dir) / f;
    if (fs::is_regular_file(p, ec)) continue;
    std::string& list = fs::exists(p, ec) ? odd : missing;  // a folder or FIFO by that name: odd
    list += (list.empty() ? "" : ", ") + std::string(f);
  }
  if (!odd.empty())
    DT_USAGE(src_dir, ": ", odd, " in this Fashion-MNIST source folder is not a regular file (nothing written)");
  if (!missing.empty())
    DT_USAGE(src_dir, ": no ", missing, " in this Fashion-MNIST source folder (nothing written). ", kAdvice);
  // Both splits read and checked before the folder or either file is made: a bad
  // test split must not leave a converted training split behind either.
  const fs::path src(src_dir), out(out_dir);
  const Split train = read_split((src / kFiles[0]).string(), (src / kFiles[1]).string());
  const Split test = read_split((src / kFiles[2]).string(), (src / kFiles[3]).string());
  const int64_t h = train.img.rows, w = train.img.cols;
  if (h != test.img.rows || w != test.img.cols)
    DT_USAGE(src_dir, ": train images are ", h, "x", w, " (", kFiles[0], ") but test images are ", test.img.rows,
             "x", test.img.cols, " (", kFiles[2], "; nothing written)");
  // The folders this call makes (the first missing ancestor and below), removed
  // again on a failure.
  fs::path made;
  for (fs::path p = fs::absolute(out_dir, ec); !p.empty() && !fs::exists(p, ec) && !fs::is_symlink(p, ec);
       p = p.parent_path()) {
    made = p;
    if (p == p.parent_path()) break;
  }
  fs::create_directories(out_dir, ec);
  if (ec) {
    const std::string why = ec.message();
    DT_USAGE(out_dir, ": cannot create directory: ", why,
             fs::is_symlink(out_dir, ec) ? " (it is a symbolic link to a path that does not exist)" : "");
  }

  ConvertSummary s;
  s.train_path = (out / "fashion-mnist-train.h5").string();
  s.test_path = (out / "fashion-mnist-test.h5").string();
  // Both written to temporary files, then both renamed: a failed (full disk)
  // or interrupted test split leaves no training split behind, which a rerun
  // would refuse as an existing output (nor the folder this call made). Each
  // file's lock (output_lock.hpp); under them, the temporaries of a run
  // stopped before (Ctrl-C, a killed job) go.
  try {
    const OutputLock train_lock(s.train_path, "dtrain data fashion-mnist");
    const OutputLock test_lock(s.test_path, "dtrain data fashion-mnist");
    for (const std::string& f : {s.train_path, s.test_path}) remove_stale_temporaries(f, "fashion-mnist");
    const std::unique_ptr<DatasetWriter> wtrain = write_split(train, s.train_path);
    const std::unique_ptr<DatasetWriter> wtest = write_split(test, s.test_path);
    wtrain->commit();
    wtest->commit();
  } catch (...) {
    // Leaf first, each only when empty, up to the first folder this call made.
    if (!made.empty())
      for (fs::path p = fs::absolute(out_dir, ec).lexically_normal(); ; p = p.parent_path()) {
        fs::remove(p, ec);
        if (p == made.lexically_normal() || p == p.parent_path()) break;
      }
    throw;
  }
  s.n_train = train.img.n;
  s.n_test = test.img.n;
  s.height = h;
  s.width = w;
  s.channels = 1;
  s.classes = kFashionClasses;
  return s;
}

}  // namespace dtrain::io
