// io/image_list.hpp — which files `dtrain data imagefolder` converts, and with
// which labels (docs/data-formats.md, "dtrain data imagefolder").
//
// Two source layouts, as ImageNet ships them:
//   - a class tree: ROOT/<class>/<file>, one subfolder per class (train). The
//     classes are the subfolder names, sorted (byte order) → indices 0..K−1;
//     with a class table (the /class_names of an earlier file), each subfolder
//     must be one of its names and gets that index. Every regular file in a
//     class folder (at any depth below it) is a candidate, whatever its name:
//     the converter decides by content. Files directly in ROOT are listed as
//     ignored, and so are entries of ROOT that cannot be followed (a looping
//     link) or lead back to ROOT or above it (`self -> .`: every image twice).
//     Samples are ordered by class index, then by path.
//   - a flat folder and a labels file (validation): one "NAME CLASS" line per
//     image (whitespace-separated, or NAME,CLASS: one comma and one word
//     after it, NAME may hold spaces; blank lines and lines
//     starting with '#' are skipped). NAME is a path relative to ROOT; CLASS
//     is a class name (looked up in the class table; without one the classes
//     are the sorted distinct names of the file) or a class index (0-based; with
//     a class table it must be below its size, without one the table is the
//     indices 0..max as text). Samples are ordered by NAME.
//
// Errors (UsageError, exit 2, before anything is written): ROOT missing or not
// a folder; a labels file mixing indices and names, or (with a class table
// whose names are digits) an index that is also another class's name; no candidate file at all ("no images under ROOT"); a labels file
// that is missing, has a malformed line, names a file twice, names a missing
// file, or a class the class table lacks (each naming the file and line); a
// class folder the class table lacks; a class table that is missing or has
// no /class_names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::io {

struct ImageList {
  std::string root;
  std::vector<std::string> files;         // [M] paths relative to root, in sample order
  std::vector<int32_t> labels;            // [M] class indices
  std::vector<std::string> class_names;   // [K]
  std::vector<std::string> ignored;       // files not taken (relative to root), for the report
  // For warnings (the conversion goes on): classes that no candidate file has
  // (an empty class folder; indices a labels file skips), and entries under
  // the class folders that are no regular file (a broken or looping link, a
  // fifo, a socket), relative to root; each in listing order.
  std::vector<std::string> empty_classes;
  std::vector<std::string> not_files;
};

// A class tree under root. class_table: empty = the sorted subfolder names.
ImageList list_class_tree(const std::string& root, const std::vector<std::string>& class_table);

// A flat folder with a labels file. class_table: empty = derived (see above).
ImageList list_labelled_folder(const std::string& root, const std::string& labels_file,
                               const std::vector<std::string>& class_table);

// The /class_names of a dataset file written by the converter. Throws
// UsageError naming the file when it is missing or has no /class_names.
std::vector<std::string> read_class_names(const std::string& h5_path);
// The same, empty when the file has no /class_names (files of other writers).
std::vector<std::string> class_names_if_any(const std::string& h5_path);

}  // namespace dtrain::io
