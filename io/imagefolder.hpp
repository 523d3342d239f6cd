// io/imagefolder.hpp — `dtrain data imagefolder`: an ImageNet-style folder of
// JPEG/PNG files → one dataset file, raw or jpeg layout (docs/data-formats.md).
//
// Pipeline: the file list (io/image_list.hpp) → T worker threads, each taking
// the next input, reading the file, decoding it, resizing it and (jpeg store)
// encoding it (io/image_codec.hpp) → a window of finished results → the
// calling thread, the one writer, which takes them strictly in input order
// (so the output does not depend on T) into an ImageStoreWriter
// (io/image_store.hpp), checkpointing every `checkpoint_every` inputs or
// 64 MiB, whichever comes first. The window is 4·T inputs: a slow image stalls
// the workers that ran ahead, never the order.
//
// Odd inputs (BadImage: not a JPEG/PNG, corrupt, truncated, absurd aspect
// ratio) are skipped and listed in F.skipped.txt; a file that cannot be read
// at all (I/O error, permission) is a runtime failure (Error, exit 1): a
// rerun resumes.
//
// Progress: a line on stdout every `progress_seconds` ("imagefolder: 1200/50000
// images (2.4%), 843 images/s, ETA 0:00:57, 1 skipped"), fit for a batch log.
//
// Resuming: the resume key hashes the layout, S, Q (jpeg), the class table and
// the (path, label) list — not the root's own path, T or the checkpoint
// interval, none of which changes the output. An F.partial with the same key
// is continued; another key is a UsageError telling how to start over.
#pragma once

#include <cstdint>
#include <string>

#include "io/image_list.hpp"
#include "io/image_store.hpp"

namespace dtrain::io {

struct ImageFolderOptions {
  std::string root;         // the folder
  std::string out;          // F
  std::string labels;       // "" = class tree; else a labels file (flat folder)
  std::string class_table;  // "" = none; else a file with /class_names
  StoreLayout store = StoreLayout::raw;
  int size = 0;             // S, 1..8192
  int quality = 90;         // jpeg store: 1..100
  int threads = 0;          // ≤ 0: SLURM_CPUS_PER_TASK, else the host's cores
  int64_t checkpoint_every = 0;  // inputs per checkpoint; 0 = 1000
  double progress_seconds = 5;
  bool overwrite = false;   // false: F existing once the lock is held is a UsageError
};

struct ImageFolderSummary {
  std::string path, report_path;
  StoreLayout store = StoreLayout::raw;
  int size = 0, quality = 0, classes = 0, threads = 0;
  int64_t inputs = 0, stored = 0, skipped = 0;
  int64_t resumed_from = 0;   // inputs an earlier run had done (0 = a fresh start)
  double seconds = 0;         // this run's wall time
  double images_per_s = 0;    // inputs handled by this run ÷ seconds
  int64_t file_bytes = 0;
  std::string describe() const;  // the summary line
};

// The file list the options name (UsageError on a bad tree or labels file).
ImageList list_images(const ImageFolderOptions& options);

// The conversion (see the file comment). Throws UsageError on bad options or
// input lists (before writing anything) and when no file could be decoded.
ImageFolderSummary convert_image_folder(const ImageFolderOptions& options);

}  // namespace dtrain::io
