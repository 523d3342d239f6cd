// engine/commands.cpp — subcommands other than the MPI plumbing in main.cpp.
#include "engine/commands.hpp"

#include <mpi.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <map>
#include <iostream>
#include <sstream>

#include "core/error.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "engine/config.hpp"
#include "engine/options.hpp"
#include "engine/run_folder.hpp"
#include "engine/report.hpp"
#include "engine/trainer.hpp"
#include "io/idx.hpp"
#include "io/imagefolder.hpp"
#include "io/synth.hpp"
#include "layers/models.hpp"

namespace po = boost::program_options;

namespace dtrain::engine {

namespace {
po::variables_map parse(const std::vector<std::string>& args, const po::options_description& desc,
                        const char* cmd, const po::positional_options_description* pos = nullptr) {
  return parse_command_line(args, desc, std::string("dtrain ") + cmd + ": ", pos);
}
}  // namespace

std::string usage() {
  return "usage: dtrain <command> [options]\n"
         "  train   train a model: dtrain train --job jobs/fashion_lenet.ini [--key value ...]\n"
         "  data    make datasets: dtrain data fashion-mnist --out DIR | dtrain data synth --shape 224x224x3 --n N --out F\n"
         "          | dtrain data imagefolder --root DIR --out F --store raw|jpeg --size S [--labels FILE]\n"
         "  model   describe a model: dtrain model --name resnet50\n"
         "  tune    choose minibatch, exchange mode and PS count: [mpirun -np R] dtrain tune --job J --nodes n --workers-per-node g\n"
         "  report  predicted vs measured: dtrain report --metrics run1.jsonl [...] [--profile tuned.ini.profile.json]\n"
         "  bench   benchmarks: mpirun -np N dtrain bench comm | dtrain bench io --data F | dtrain bench compute --model M\n"
         "'dtrain <command> --help' lists a command's options; 'dtrain --version' the commit and libraries.\n";
}

int cmd_train(const std::vector<std::string>& args) {
  TrainConfig cfg;
  if (!parse_train_args(args, cfg)) {
    std::cout << train_help();
    return kExitOk;
  }
  const RunClock clock = start_run_clock();
  TrainResult r;
  try {
    r = train(cfg);
  } catch (const UsageError& e) {  // the set-up's checks (data files, model, channels) name where KEY was written
    throw UsageError(with_origin(cfg, e.what()));
  }
  TrainConfig written = cfg;
  written.metrics = r.metrics_path;  // the file train() wrote (rank 0), "" = none
  append_run_record(written, r, clock, MPI_COMM_WORLD);  // for dtrain report
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (r.requeue) {
    if (rank == 0)
      log::info("dtrain: checkpointed after ", r.steps, " steps on a stop request; exit code ", kExitRequeue,
                " (requeue the job and run it again with --resume auto to continue)");
    return kExitRequeue;
  }
  if (rank == 0) {
    char acc[96] = "";
    if (r.test_accuracy >= 0 && r.test_top5_accuracy >= 0)
      std::snprintf(acc, sizeof acc, ", final test accuracy %.2f%% (top-5 %.2f%%)", 100.0 * r.test_accuracy,
                    100.0 * r.test_top5_accuracy);
    else if (r.test_accuracy >= 0)
      std::snprintf(acc, sizeof acc, ", final test accuracy %.2f%%", 100.0 * r.test_accuracy);
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", r.seconds);
    log::info("dtrain: finished ", r.steps, " steps in ", r.epochs, " epoch(s), ", secs, " s, ",
              static_cast<long>(r.images_per_s), " images/s", acc,
              r.run_dir.empty() ? std::string() : "; outputs in " + r.run_dir,
              cfg.compute_stand_in_ms > 0 ? "; COMPUTE STAND-IN (" + format::shortest(cfg.compute_stand_in_ms) +
                                                " ms per step, no model trained: an emulation of the exchange)"
                                          : std::string());
  }
  return kExitOk;
}

int cmd_data(const std::vector<std::string>& args) {
  std::string what, out, src, shape, root, labels, class_table, store;
  int64_t n = 0, checkpoint_every = 0;
  int classes = 1000, size = 0, quality = 90, threads = 0;
  uint64_t seed = 1;
  bool overwrite = false;
  po::options_description desc(
      "dtrain data fashion-mnist --out DIR [--src DIR]\n"
      "dtrain data synth --shape HxWxC --n N --classes K --out FILE [--seed S]\n"
      "dtrain data imagefolder --root DIR --out FILE --store raw|jpeg --size S [--labels FILE]\n"
      "    [--class-table TRAIN.h5] [--quality Q] [--threads T] [--checkpoint-every N]\n"
      "  (docs/data-formats.md; an interrupted imagefolder run continues when the same command is run again)");
  desc.add_options()("help,h", "this help")("what", po::value(&what), "dataset: fashion-mnist | synth | imagefolder")(
      "out", po::value(&out), "output folder (fashion-mnist, default $DTRAIN_DATA_DIR or data) or file (synth, imagefolder)")(
      "src", po::value(&src)->default_value(settings::fashion_dir()), "fashion-mnist: folder with the four gzipped IDX files (default $DTRAIN_FASHION_DIR, else "
      "/usr/share/datasets/fashion-mnist; shown: this shell's value)")(
      "shape", po::value(&shape)->default_value("224x224x3"), "synth: image shape H x W x C")(
      "n", po::value(&n), "synth: number of samples")(
      "classes", po::value(&classes)->default_value(1000), "synth: number of classes")(
      "seed", po::value(&seed)->default_value(1), "synth: content seed")(
      "root", po::value(&root), "imagefolder: the image folder (one subfolder per class, or flat with --labels)")(
      "labels", po::value(&labels), "imagefolder: a file of 'NAME CLASS' lines (CLASS: a name or a 0-based index)")(
      "class-table", po::value(&class_table), "imagefolder: take the class names and indices from this file's /class_names")(
      "store", po::value(&store), "imagefolder: raw (S x S centre crop, uint8) | jpeg (shorter side S, re-encoded)")(
      "size", po::value(&size), "imagefolder: S, the stored (shorter) side in pixels")(
      "quality", po::value(&quality)->default_value(90), "imagefolder: JPEG quality of the jpeg store (1..100)")(
      "threads", po::value(&threads)->default_value(0), "imagefolder: decode/resize threads (0: $SLURM_CPUS_PER_TASK or all cores)")(
      "checkpoint-every", po::value(&checkpoint_every)->default_value(0),
      "imagefolder: inputs between checkpoints of the partial output (0: 1000, or 64 MiB)")(
      "overwrite", po::value(&overwrite)->default_value(false, "false"), "replace output files that exist");
  po::positional_options_description pos;
  pos.add("what", 1);
  auto vm = parse(args, desc, "data", &pos);
  if (vm.count("help")) {
    std::cout << desc;
    return kExitOk;
  }
  if (what.empty()) DT_USAGE("dtrain data: which dataset? (fashion-mnist | synth | imagefolder; --help lists the options)");
  // An option the dataset does not read is refused, not ignored (--classes 10
  // with imagefolder took the folders' count); --quality with --store raw is
  // warned about.
  {
    static const std::map<std::string, std::vector<std::string>> reads = {
        {"fashion-mnist", {"src"}},
        {"synth", {"shape", "n", "classes", "seed"}},
        {"imagefolder", {"root", "labels", "class-table", "store", "size", "quality", "threads", "checkpoint-every"}}};
    if (reads.count(what))
      for (const auto& [other, keys] : reads)
        if (other != what)
          refuse_unread_options(vm, keys, "dtrain data " + what + ": ", "by this dataset (it is " + other + "'s)");
    if (what == "imagefolder" && store == "raw" && !vm["quality"].defaulted())  // a warning: scripts loop over both stores
      log::warn("dtrain data imagefolder: option 'quality' is for --store jpeg, unused with --store raw (the "
                "decoded pixels are stored, no JPEG is written)");
  }
  if (what == "imagefolder") {
    const char* w = "dtrain data imagefolder: ";
    io::ImageFolderOptions o;
    if (store == "raw") o.store = io::StoreLayout::raw;
    else if (store == "jpeg") o.store = io::StoreLayout::jpeg;
    else if (store.empty()) DT_USAGE(w, "option 'store' is required (raw | jpeg)");
    else DT_USAGE(w, "option 'store': '", store, "' is not raw or jpeg");
    if (!vm.count("size")) DT_USAGE(w, "option 'size' (the stored side S, e.g. 256) is required");
    if (vm.count("labels") && labels.empty()) DT_USAGE(w, "option 'labels' is empty");
    if (vm.count("class-table") && class_table.empty()) DT_USAGE(w, "option 'class-table' is empty");
    o.root = root;
    o.out = out;
    o.labels = labels;
    o.class_table = class_table;
    o.size = size;
    o.quality = quality;
    o.threads = threads;
    o.checkpoint_every = checkpoint_every;
    o.overwrite = overwrite;
    if (!out.empty()) {
      check_output_folder(w, "out", out);
      // F with its report still F.skipped.txt.partial: perhaps a run of this
      // conversion stopped as it ended; the converter finishes it, or refuses F.
      std::error_code ec;
      const bool ending = std::filesystem::exists(out, ec) && std::filesystem::exists(out + ".skipped.txt.partial", ec) &&
                          !std::filesystem::exists(io::ImageStoreWriter::report_path(out), ec);
      // The longest name written beside F: F.skipped.txt.partial (20 bytes more).
      if (!ending) check_new_output(w, "out", out, overwrite, "choose another file", 20);
      check_new_output(w, "out", io::ImageStoreWriter::report_path(out), overwrite,
                       "choose another file (the report of skipped files is FILE.skipped.txt)", 0);
    }
    io::ImageFolderSummary s = io::convert_image_folder(o);
    log::info(s.describe());
    return kExitOk;
  }
  if (what == "synth") {
    long long h = 0, w = 0, c = 0;
    char x1 = 0, x2 = 0;
    std::istringstream is(shape);
    // Digits and two 'x' only (the stream took " 8x8x1", "8 x8x1" and "+8x8x1").
    const bool plain = !shape.empty() && std::all_of(shape.begin(), shape.end(), [](char ch) {
      return (ch >= '0' && ch <= '9') || ch == 'x';
    });
    if (!plain || !(is >> h >> x1 >> w >> x2 >> c) || x1 != 'x' || x2 != 'x' || !is.eof())
      DT_USAGE("dtrain data synth: option 'shape': '", visible(shape), "' is not HxWxC (e.g. 224x224x3)");
    if (classes < 1 || classes > kMaxClasses)
      DT_USAGE("dtrain data synth: option 'classes' must be in [1, ", kMaxClasses, "] (what dtrain train takes), got ",
               classes);
    if (out.empty()) DT_USAGE("dtrain data synth: option 'out' (the HDF5 file) is required");
    if (n <= 0) DT_USAGE("dtrain data synth: option 'n' must be > 0");
    if (h <= 0 || w <= 0 || c <= 0 || h > 65536 || w > 65536 || c > 4096 || h * w * c > (1LL << 30))
      DT_USAGE("dtrain data synth: option 'shape': ", shape, " must be positive with at most 2^30 bytes per image");
    check_output_folder("dtrain data synth: ", "out", out);
    check_new_output("dtrain data synth: ", "out", out, overwrite);
    io::synthesize_dataset(out, n, h, w, c, classes, seed);
    log::info(out, ": ", n, " synthetic images ", h, "x", w, "x", c, ", ", classes, " classes");
    return kExitOk;
  }
  if (what != "fashion-mnist") DT_USAGE("dtrain data: unknown dataset '", what, "' (known: fashion-mnist, synth, imagefolder)");
  if (vm.count("out") && out.empty()) DT_USAGE("dtrain data fashion-mnist: option 'out' is empty");
  if (out.empty()) out = settings::data_dir();
  for (const char* f : {"fashion-mnist-train.h5", "fashion-mnist-test.h5"})
    check_new_output("dtrain data fashion-mnist: ", "out", (std::filesystem::path(out) / f).string(), overwrite);
  io::ConvertSummary s;
  try {
    s = io::convert_fashion_mnist(src, out);
  } catch (const UsageError& e) {  // a source folder nobody typed: say where it came from
    if (vm["src"].defaulted() && settings::get("DTRAIN_FASHION_DIR"))
      throw UsageError(std::string(e.what()) + " (the source folder is $DTRAIN_FASHION_DIR, as --src was not given)");
    throw;
  }
  log::info(s.describe());
  return kExitOk;
}

int cmd_model(const std::vector<std::string>& args) {
  std::string name;
  int minibatch = 1;
  po::options_description desc("dtrain model --name NAME [--minibatch N]");
  const std::string models = layers::model_list_text();
  desc.add_options()("help,h", "this help")("name", po::value(&name), models.c_str())(
      "minibatch", po::value(&minibatch)->default_value(1), "minibatch for the shapes and FLOPs");
  po::positional_options_description pos;
  pos.add("name", 1);
  auto vm = parse(args, desc, "model", &pos);
  if (vm.count("help")) {
    std::cout << desc;
    return kExitOk;
  }
  if (name.empty()) DT_USAGE("dtrain model: which model? (--name ", models, ")");
  if (minibatch < 1 || minibatch > kMaxMinibatch)
    DT_USAGE("dtrain model: option 'minibatch' must be in [1, ", kMaxMinibatch, "] (as in dtrain train), got ", minibatch);
  layers::ModelOptions mo;
  mo.minibatch = minibatch;
  layers::Net net = layers::make_model(name, mo);
  std::printf("%-28s %-16s %-22s %14s %14s\n", "layer", "kind", "output", "parameters", "MFLOPs");
  int64_t total = 0;
  for (auto& r : net.summary()) {
    std::printf("%-28s %-16s %-22s %14lld %14.2f\n", r.name.c_str(), r.kind.c_str(), r.out.str().c_str(),
                static_cast<long long>(r.params), r.flops / 1e6);
    total += r.params;
  }
  std::printf("model %s: input %s, output %s, %lld parameters (%.1f MB fp32), %.4g GFLOPs forward per minibatch of %d\n",
              name.c_str(), net.input_shape().str().c_str(), net.output_shape().str().c_str(),
              static_cast<long long>(total), total * 4.0 / 1e6, net.forward_flops() / 1e9, minibatch);
  return kExitOk;
}

}  // namespace dtrain::engine
