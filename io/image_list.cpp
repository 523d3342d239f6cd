// io/image_list.cpp — the file lists of `dtrain data imagefolder` (see image_list.hpp).
#include "io/image_list.hpp"

#include <glib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/error.hpp"
#include "core/format.hpp"
#include "io/h5_util.hpp"

namespace dtrain::io {

namespace fs = std::filesystem;

namespace {

void check_root(const std::string& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) DT_USAGE(format::missing_path(root), ": no such folder (option 'root')");
  if (!fs::is_directory(root, ec)) DT_USAGE(root, ": not a folder (option 'root')");
}

std::unordered_map<std::string, int32_t> index_of(const std::vector<std::string>& names) {
  std::unordered_map<std::string, int32_t> m;
  for (size_t i = 0; i < names.size(); ++i) m.emplace(names[i], int32_t(i));
  return m;
}

// /class_names is stored as UTF-8 text, and readers (h5py's asstr()) fail on
// anything else: GLib's validator (libvips' dependency) decides.
bool is_utf8(const std::string& s) { return g_utf8_validate(s.data(), gssize(s.size()), nullptr) != 0; }

void check_class_name(const std::string& name, const std::string& where) {
  if (!is_utf8(name))
    DT_USAGE(where, "class name '", format::visible(name), "' is not valid UTF-8 (class names are stored as UTF-8 "
             "text in /class_names); rename it");
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

ImageList list_class_tree(const std::string& root, const std::vector<std::string>& class_table) {
  check_root(root);
  ImageList list;
  list.root = root;
  std::vector<std::string> folders;
  std::error_code rec;
  const fs::path real_root = fs::canonical(root, rec);
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    std::error_code ec;
    bool folder = e.is_directory(ec) && !ec;  // a looping link: an error, not a folder
    if (folder && e.is_symlink(ec) && !rec) {  // a link to root or above it would list root again
      std::error_code cec;
      const fs::path target = fs::canonical(e.path(), cec);
      const fs::path back = real_root.lexically_relative(target);  // "." or "a/b": root at or below the target
      if (cec || back.empty() || *back.begin() != "..") folder = false;
    }
    if (folder) folders.push_back(name);
    else list.ignored.push_back(name);
  }
  std::sort(folders.begin(), folders.end());
  std::sort(list.ignored.begin(), list.ignored.end());
  if (folders.empty())
    DT_USAGE(root, ": no class subfolders (a class tree has one subfolder per class; a flat folder needs --labels)");
  for (const auto& f : folders) check_class_name(f, root + ": class folder: ");
  if (class_table.empty()) {
    list.class_names = folders;
  } else {
    list.class_names = class_table;
    const auto idx = index_of(class_table);
    for (const auto& f : folders)
      if (!idx.count(f))
        DT_USAGE(root, ": class folder '", f, "' is not in the class table (option 'class-table', ",
                 class_table.size(), " classes)");
  }
  const auto idx = index_of(list.class_names);
  // Sample order: class index, then path.
  std::vector<std::pair<int32_t, std::string>> order;
  for (const auto& f : folders) order.emplace_back(idx.at(f), f);
  std::sort(order.begin(), order.end());
  for (const auto& [label, folder] : order) {
    std::vector<std::string> files;
    // The class folder may be a symlink; symlinks to folders inside it are not followed
    // (no cycles), a broken or looping link is no regular file (not listed, like a fifo).
    std::error_code ec;
    fs::recursive_directory_iterator it(fs::path(root) / folder, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::error_code fec, dec;
      if (it->is_regular_file(fec)) files.push_back(fs::relative(it->path(), root).generic_string());
      else if (!it->is_directory(dec) || dec) list.not_files.push_back(fs::path(it->path()).lexically_relative(root).generic_string());
    }
    if (ec) DT_USAGE(root, ": cannot list class folder '", folder, "': ", ec.message());
    if (files.empty()) list.empty_classes.push_back(folder);
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      list.files.push_back(std::move(f));
      list.labels.push_back(label);
    }
  }
  if (list.files.empty()) DT_USAGE(root, ": no images under it (", folders.size(), " class folders, all empty)");
  return list;
}

ImageList list_labelled_folder(const std::string& root, const std::string& labels_file,
                               const std::vector<std::string>& class_table) {
  check_root(root);
  std::error_code ec;
  if (!fs::is_regular_file(labels_file, ec))
    DT_USAGE(format::missing_path(labels_file), ": no such file (option 'labels')");
  std::ifstream in(labels_file);
  if (!in) DT_USAGE(labels_file, ": cannot open (option 'labels')");
  struct Line {
    std::string name, cls;
    int number;
  };
  std::vector<Line> lines;
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    const auto first = text.find_first_not_of(" \t");
    if (first == std::string::npos || text[first] == '#') continue;
    std::string name, cls, extra;
    auto trim = [](const std::string& v) {
      const auto a = v.find_first_not_of(" \t"), b = v.find_last_not_of(" \t");
      return a == std::string::npos ? std::string() : v.substr(a, b - a + 1);
    };
    {
      std::istringstream is(text);
      is >> name >> cls >> extra;
    }
    // "NAME,CLASS": one comma and one word after it, NAME may hold spaces. Where
    // a line reads both ways ("a b,c": NAME "a" of class "b,c", or NAME "a b" of
    // class "c"), the reading whose NAME is a file under root wins, else NAME CLASS.
    const auto comma = text.find(',');
    const std::string after = comma == std::string::npos ? "" : trim(text.substr(comma + 1));
    if (comma != std::string::npos && text.find(',', comma + 1) == std::string::npos && !after.empty() &&
        after.find_first_of(" \t") == std::string::npos) {
      const std::string before = trim(text.substr(0, comma));
      std::error_code fec;
      const bool spaced_ok = !cls.empty() && extra.empty() && fs::exists(fs::path(root) / name, fec);
      if (!spaced_ok || fs::exists(fs::path(root) / before, fec)) {
        name = before;
        cls = after;
        extra.clear();
      }
    }
    if (name.empty() || cls.empty() || !extra.empty())
      DT_USAGE(labels_file, ":", number, ": expected 'NAME CLASS', found '", text, "'");
    lines.push_back({name, cls, number});
  }
  if (lines.empty()) DT_USAGE(labels_file, ": no 'NAME CLASS' lines (option 'labels')");

  ImageList list;
  list.root = root;
  // Indices or names, never both: one name among indices (a typo such as "1O")
  // would turn every index into a name and relabel the whole file. With a class
  // table, a file whose every class is a name of the table reads as names
  // (unless every class is digits: then indices, checked for ambiguity below).
  const auto in_table = index_of(class_table);
  const bool all_table_names = !class_table.empty() && std::all_of(lines.begin(), lines.end(), [&](const Line& l) {
    return in_table.count(l.cls) > 0;
  });
  const auto first_index = std::find_if(lines.begin(), lines.end(), [](const Line& l) { return all_digits(l.cls); });
  const auto first_name = std::find_if(lines.begin(), lines.end(), [](const Line& l) { return !all_digits(l.cls); });
  if (first_index != lines.end() && first_name != lines.end() && !all_table_names)
    DT_USAGE(labels_file, ":", first_name->number, ": class '", format::visible(first_name->cls),
             "' is not a 0-based index (at most 9 digits), but line ", first_index->number, "'s class '",
             first_index->cls, "' is one; a labels file gives every class as an index or every class as a name");
  const bool by_index = first_name == lines.end();
  if (by_index && !class_table.empty()) {
    // A class table whose names are digits: "2" could be index 2 or the class named "2".
    for (const auto& l : lines)
      if (auto it = in_table.find(l.cls); it != in_table.end() && std::stol(l.cls) != it->second) {
        const size_t k = size_t(std::stol(l.cls));
        DT_USAGE(labels_file, ":", l.number, ": class '", l.cls, "' is ambiguous: index ", l.cls,
                 k < class_table.size() ? " (the class table's '" + format::visible(class_table[k]) + "')"
                                        : std::string(" (outside the class table)"),
                 " or the class table's name of another class, ", it->second,
                 "; name every class by a class-table name that is not all digits, or by its index in a file whose "
                 "class names are not digits");
      }
  }
  if (!class_table.empty()) {
    list.class_names = class_table;
  } else if (by_index) {
    int32_t top = 0;
    for (const auto& l : lines) top = std::max(top, int32_t(std::stol(l.cls)));
    for (int32_t i = 0; i <= top; ++i) list.class_names.push_back(std::to_string(i));
  } else {
    std::set<std::string> names;
    for (const auto& l : lines) {
      check_class_name(l.cls, labels_file + ":" + std::to_string(l.number) + ": ");
      names.insert(l.cls);
    }
    list.class_names.assign(names.begin(), names.end());
  }
  const auto idx = index_of(list.class_names);
  std::map<std::string, std::pair<int32_t, int>> samples;  // name → (label, line); sorted by name
  for (const auto& l : lines) {
    int32_t label = -1;
    if (by_index) {
      label = int32_t(std::stol(l.cls));
      if (label >= int32_t(list.class_names.size()))
        DT_USAGE(labels_file, ":", l.number, ": class index ", label, " is outside [0, ", list.class_names.size(),
                 ") of the class table");
    } else {
      auto it = idx.find(l.cls);
      if (it == idx.end())
        DT_USAGE(labels_file, ":", l.number, ": class '", l.cls, "' is not in the class table (option 'class-table', ",
                 list.class_names.size(), " classes)");
      label = it->second;
    }
    const std::string rel = fs::path(l.name).lexically_normal().generic_string();
    if (!samples.emplace(rel, std::make_pair(label, l.number)).second)
      DT_USAGE(labels_file, ":", l.number, ": '", l.name, "' is named twice (first on line ", samples[rel].second, ")");
  }
  for (const auto& [rel, v] : samples) {
    const fs::path p = fs::path(root) / rel;
    if (!fs::is_regular_file(p, ec))
      DT_USAGE(labels_file, ":", v.second, ": names ", p.string(), ", which ",
               fs::exists(p, ec) ? "is not a regular file" : "does not exist");
    list.files.push_back(rel);
    list.labels.push_back(v.first);
  }
  if (by_index && class_table.empty()) {  // indices 0..max that no line names
    std::vector<char> used(list.class_names.size(), 0);
    for (int32_t l : list.labels) used[size_t(l)] = 1;
    for (size_t k = 0; k < used.size(); ++k)
      if (!used[k]) list.empty_classes.push_back(list.class_names[k]);
  }
  return list;
}

std::vector<std::string> read_class_names(const std::string& h5_path) {
  H5Id f = open_h5_read_only(h5_path);
  if (!h5_link_exists(f.get(), "class_names"))
    DT_USAGE(h5_path, ": /class_names: dataset is missing (option 'class-table' wants a file written by "
             "dtrain data imagefolder)");
  auto names = read_string_list(f.get(), h5_path, "class_names");
  if (names.empty()) DT_USAGE(h5_path, ": /class_names is empty");
  return names;
}

std::vector<std::string> class_names_if_any(const std::string& h5_path) {
  H5Id f = open_h5_read_only(h5_path);
  if (!h5_link_exists(f.get(), "class_names")) return {};
  return read_string_list(f.get(), h5_path, "class_names");
}

}  // namespace dtrain::io
