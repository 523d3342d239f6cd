// io/imagefolder.cpp — the parallel, resumable folder → dataset converter (see imagefolder.hpp).
#include "io/imagefolder.hpp"

#include <vips/vips.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "io/image_codec.hpp"
#include "io/output_lock.hpp"

namespace dtrain::io {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kDefaultCheckpointEvery = 1000;          // inputs
constexpr int64_t kCheckpointBytes = int64_t{64} << 20;    // buffered output bytes
constexpr int kMaxSide = 65500;                             // JPEG's limit is 65535

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// FNV-1a, 64 bit: a stable fingerprint of the conversion (not a security hash).
struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;  // separator
  }
  std::string hex() const {
    char b[17];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
    return b;
  }
};

std::string resume_key(const ImageFolderOptions& o, const ImageList& list) {
  Fnv f;
  f.add("dtrain imagefolder 1");
  f.add(o.store == StoreLayout::raw ? "raw" : "jpeg");
  f.add(std::to_string(o.size));
  if (o.store == StoreLayout::jpeg) f.add(std::to_string(o.quality));
  for (const auto& c : list.class_names) f.add(c);
  for (size_t i = 0; i < list.files.size(); ++i) {
    f.add(list.files[i]);
    f.add(std::to_string(list.labels[i]));
  }
  return f.hex();
}

std::string hms(double seconds) {
  const long s = long(seconds + 0.5);
  char b[32];
  std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return b;
}

// One converted input: stored pixels / JPEG, or why it was skipped.
struct Converted {
  std::optional<std::string> skipped;  // the reason
  RgbImage image;                      // raw: S×S
  std::vector<uint8_t> jpeg;           // jpeg store
  int height = 0, width = 0;
};

std::vector<uint8_t> read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) DT_FAIL("cannot open ", path, ": ", std::strerror(errno));
  std::vector<uint8_t> bytes;
  uint8_t block[1 << 16];
  size_t n = 0;
  while ((n = std::fread(block, 1, sizeof block, f)) > 0) bytes.insert(bytes.end(), block, block + n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) DT_FAIL("reading ", path, " failed: ", std::strerror(err));
  return bytes;
}

Converted convert_one(const std::string& path, const ImageFolderOptions& o) {
  Converted c;
  try {
    const std::vector<uint8_t> bytes = read_file(path);
    DecodedImage d = decode_image(bytes, o.size);
    const bool swap = d.orientation >= 5;  // EXIF 5..8 turn the image by 90°
    int tw = 0, th = 0;
    shorter_side_size(swap ? d.image.height : d.image.width, swap ? d.image.width : d.image.height, o.size, tw, th);
    if (std::max(tw, th) > kMaxSide)
      throw BadImage("aspect ratio " + std::to_string(d.image.width) + ":" + std::to_string(d.image.height) +
                     " too extreme (the longer side would be " + std::to_string(std::max(tw, th)) + ")");
    const bool raw = o.store == StoreLayout::raw;
    c.image = orient_resize(d.image, d.orientation, o.size, raw);
    c.height = c.image.height;
    c.width = c.image.width;
    if (!raw) {
      c.jpeg = encode_jpeg(c.image, o.quality);
      c.image = RgbImage{};
    }
  } catch (const BadImage& e) {
    c.skipped = e.what();
  }
  return c;
}

void check_options(const ImageFolderOptions& o) {
  const char* w = "dtrain data imagefolder: ";
  if (o.root.empty()) DT_USAGE(w, "option 'root' (the image folder) is required");
  if (o.out.empty()) DT_USAGE(w, "option 'out' (the HDF5 file) is required");
  if (o.size < 1 || o.size > 8192) DT_USAGE(w, "option 'size' must be in [1, 8192], got ", o.size);
  if (o.quality < 1 || o.quality > 100) DT_USAGE(w, "option 'quality' must be in [1, 100], got ", o.quality);
  if (o.threads < 0 || o.threads > 1024) DT_USAGE(w, "option 'threads' must be in [0, 1024], got ", o.threads);
  if (o.checkpoint_every < 0) DT_USAGE(w, "option 'checkpoint-every' must be >= 0, got ", o.checkpoint_every);
}

int default_threads() {
  if (auto c = settings::slurm_cpus_per_task(); c && *c > 0) return int(std::min(*c, 1024L));
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

// Workers and the in-order hand-over (the file comment of imagefolder.hpp).
class Pipeline {
 public:
  Pipeline(const ImageList& list, const ImageFolderOptions& o, int64_t start, int threads)
      : list_(list), opt_(o), window_(std::max<int64_t>(16, 4 * int64_t(threads))), next_(start), taken_(start),
        slots_(size_t(window_)) {
    for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { work(); });
  }
  ~Pipeline() { stop(); }

  // The result of input i (inputs are taken in order, each once).
  Converted take(int64_t i) {
    std::unique_lock lk(mu_);
    auto& slot = slots_[size_t(i % window_)];
    ready_.wait(lk, [&] { return slot.has_value() || error_; });
    if (error_) std::rethrow_exception(error_);
    Converted c = std::move(*slot);
    slot.reset();
    taken_ = i + 1;
    space_.notify_all();
    return c;
  }

  void stop() {
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
    }
    space_.notify_all();
    for (auto& t : workers_)
      if (t.joinable()) t.join();
  }

 private:
  void work() {
    init_vips();
    const int64_t m = int64_t(list_.files.size());
    for (;;) {
      int64_t i = 0;
      {
        std::unique_lock lk(mu_);
        if (stopping_ || next_ >= m) break;
        i = next_++;
        space_.wait(lk, [&] { return stopping_ || i < taken_ + window_; });
        if (stopping_) break;
      }
      try {
        Converted c = convert_one((fs::path(list_.root) / list_.files[size_t(i)]).string(), opt_);
        std::lock_guard lk(mu_);
        slots_[size_t(i % window_)] = std::move(c);
      } catch (...) {
        std::lock_guard lk(mu_);
        if (!error_) error_ = std::current_exception();
        stopping_ = true;
      }
      ready_.notify_all();
    }
    vips_thread_shutdown();
  }

  const ImageList& list_;
  const ImageFolderOptions& opt_;
  const int64_t window_;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  int64_t next_, taken_;
  std::vector<std::optional<Converted>> slots_;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

std::string ImageFolderSummary::describe() const {
  std::ostringstream os;
  os << path << ": " << stored << " images";
  if (store == StoreLayout::raw)
    os << " " << size << "x" << size << "x3 (raw)";
  else
    os << " (jpeg q" << quality << ", shorter side " << size << ")";
  os << ", " << classes << " classes, " << skipped << " skipped (listed in " << report_path << ")";
  char b[160];
  std::snprintf(b, sizeof b, "; %.1f MB (%.1f KB/image); %lld inputs in %.1f s, %.0f images/s with %d thread(s)",
                double(file_bytes) / 1e6, stored > 0 ? double(file_bytes) / 1e3 / double(stored) : 0.0,
                static_cast<long long>(inputs - resumed_from), seconds, images_per_s, threads);
  os << b;
  if (resumed_from > 0) os << " (resumed after " << resumed_from << " of " << inputs << ")";
  return os.str();
}

namespace {

// In a class tree, F inside a class folder would make its own partial files
// inputs of a resumed run (F.partial*, F.skipped.txt.partial under ROOT/<class>/).
void check_out_outside_classes(const ImageFolderOptions& o) {
  std::error_code ec1, ec2;
  const fs::path out = fs::weakly_canonical(o.out, ec1), root = fs::weakly_canonical(o.root, ec2);
  if (ec1 || ec2) return;  // the listing names what is wrong with root
  const fs::path rel = out.lexically_relative(root);
  if (rel.empty() || *rel.begin() == ".." || std::distance(rel.begin(), rel.end()) < 2) return;
  DT_USAGE("option 'out': ", o.out, " is inside the class folder '", format::visible(rel.begin()->string()), "' of ",
           o.root, " (option 'root'), where its partial files would become inputs of a resumed run; write it "
           "outside the class folders");
}


// The summary's fields that follow from the options and the file list.
ImageFolderSummary summary_of(const ImageFolderOptions& o, const ImageList& list) {
  ImageFolderSummary s;
  s.path = o.out;
  s.report_path = ImageStoreWriter::report_path(o.out);
  s.store = o.store;
  s.size = o.size;
  s.quality = o.quality;
  s.classes = int(list.class_names.size());
  s.threads = o.threads;
  s.inputs = int64_t(list.files.size());
  return s;
}

// The summary of a conversion that an earlier run finished (finish_interrupted).
ImageFolderSummary finished_summary(const ImageFolderOptions& o, const ImageList& list) {
  ImageFolderSummary s = summary_of(o, list);
  s.resumed_from = s.inputs;
  std::ifstream report(s.report_path);
  std::string line;
  while (std::getline(report, line)) ++s.skipped;
  s.stored = s.inputs - s.skipped;
  std::error_code ec;
  s.file_bytes = int64_t(fs::file_size(o.out, ec));
  return s;
}

}  // namespace

ImageList list_images(const ImageFolderOptions& o) {
  std::vector<std::string> table;
  if (!o.class_table.empty()) table = read_class_names(o.class_table);
  return o.labels.empty() ? list_class_tree(o.root, table) : list_labelled_folder(o.root, o.labels, table);
}

ImageFolderSummary convert_image_folder(const ImageFolderOptions& opt) {
  check_options(opt);
  ImageFolderOptions o = opt;
  if (o.threads == 0) o.threads = default_threads();
  if (o.checkpoint_every == 0) o.checkpoint_every = kDefaultCheckpointEvery;
  if (o.labels.empty()) check_out_outside_classes(o);
  const ImageList list = list_images(o);
  if (!list.ignored.empty())
    log::warn(o.root, ": ", list.ignored.size(), " entr", list.ignored.size() == 1 ? "y" : "ies",
              " directly in the root (files, links that loop or lead back to the root) are no class folder and are "
              "not converted (first: ", format::visible(list.ignored.front()), ")");
  if (!list.empty_classes.empty())
    log::warn(o.root, ": ", list.empty_classes.size(), " of the ", list.class_names.size(),
              " classes have no input file and will have no image (first: '",
              format::visible(list.empty_classes.front()), "')");
  if (!list.not_files.empty())
    log::warn(o.root, ": ", list.not_files.size(), " entr", list.not_files.size() == 1 ? "y" : "ies",
              " under the class folders are no regular file (a broken or looping link, a fifo, a socket) and are "
              "not converted (first: ", format::visible(list.not_files.front()), ")");
  init_vips();
  const OutputLock lock(o.out, "dtrain data imagefolder");

  StoreSpec spec;
  spec.path = o.out;
  spec.layout = o.store;
  spec.size = o.size;
  spec.quality = o.quality;
  spec.inputs = int64_t(list.files.size());
  spec.class_names = list.class_names;
  spec.resume_key = resume_key(o, list);
  if (ImageStoreWriter::finish_interrupted(spec)) {  // an earlier run stopped after F took its name
    remove_stale_temporaries(o.out, "imagefolder");
    log::info("imagefolder: finished the end of an earlier run of this conversion (stopped after ", o.out,
              " was written)");
    return finished_summary(o, list);
  }
  // F may exist where this conversion's own partial file is resumed over it
  // (its end was stopped after F took its name, or it replaces F by --overwrite).
  const bool own_partial = ImageStoreWriter::owns(ImageStoreWriter::partial_path(o.out), spec) &&
                           ImageStoreWriter::owns(o.out, spec);
  if (!o.overwrite && !own_partial && std::filesystem::exists(o.out))
    DT_USAGE("option 'out': ", o.out, " exists; choose another file");
  remove_stale_temporaries(o.out, "imagefolder");
  std::function<void(int64_t)> kill_point;
  if (auto k = settings::convert_kill_at(); k && *k > 0)
    kill_point = [k = *k](int64_t stored) {
      if (stored >= k) std::raise(SIGKILL);
    };
  ImageStoreWriter store(spec, kill_point);
  const StoreProgress start = store.progress();
  const int64_t m = spec.inputs;
  if (store.resumed())
    log::info("imagefolder: resuming ", ImageStoreWriter::partial_path(o.out), ": ", start.inputs_done, " of ", m,
              " inputs done, ", start.samples_done, " images stored");

  const auto t0 = Clock::now();
  auto last_print = t0;
  int64_t since_checkpoint = 0;
  {
    Pipeline pipe(list, o, start.inputs_done, o.threads);
    for (int64_t i = start.inputs_done; i < m; ++i) {
      Converted c = pipe.take(i);
      const int32_t label = list.labels[size_t(i)];
      if (c.skipped)
        store.add_skipped(list.files[size_t(i)], *c.skipped);
      else if (o.store == StoreLayout::raw)
        store.add_raw(c.image, label);
      else
        store.add_jpeg(std::move(c.jpeg), c.height, c.width, label);
      if (++since_checkpoint >= o.checkpoint_every || store.buffered_bytes() >= kCheckpointBytes) {
        store.checkpoint();
        since_checkpoint = 0;
      }
      if (std::chrono::duration<double>(Clock::now() - last_print).count() >= o.progress_seconds) {
        last_print = Clock::now();
        const double rate = double(i + 1 - start.inputs_done) / std::max(1e-9, since(t0));
        const auto& p = store.progress();
        char b[200];
        std::snprintf(b, sizeof b, "imagefolder: %lld/%lld images (%.1f%%), %.0f images/s, ETA %s, %lld skipped",
                      static_cast<long long>(i + 1), static_cast<long long>(m), 100.0 * double(i + 1) / double(m),
                      rate, hms(double(m - i - 1) / std::max(rate, 1e-9)).c_str(),
                      static_cast<long long>(p.inputs_done - p.samples_done));
        log::info(b);
      }
    }
  }
  ImageFolderSummary s = summary_of(o, list);
  s.file_bytes = store.commit();
  const StoreProgress& p = store.progress();
  s.stored = p.samples_done;
  s.skipped = p.inputs_done - p.samples_done;
  s.resumed_from = start.inputs_done;
  s.seconds = since(t0);
  s.images_per_s = double(m - start.inputs_done) / std::max(1e-9, s.seconds);
  return s;
}

}  // namespace dtrain::io
