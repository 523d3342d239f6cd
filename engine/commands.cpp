// engine/commands.cpp — subcommands other than the MPI plumbing in main.cpp.
#include "engine/commands.hpp"

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/settings.hpp"
#include "engine/config.hpp"
#include "engine/trainer.hpp"
#include "io/idx.hpp"
#include "layers/models.hpp"

namespace po = boost::program_options;

namespace dtrain::engine {

namespace {
po::variables_map parse(const std::vector<std::string>& args, const po::options_description& desc,
                        const char* cmd, const po::positional_options_description* pos = nullptr) {
  po::variables_map vm;
  try {
    auto p = po::command_line_parser(args).options(desc);
    if (pos) p.positional(*pos);
    po::store(p.run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    DT_USAGE("dtrain ", cmd, ": ", e.what());
  }
  return vm;
}
}  // namespace

std::string usage() {
  return "usage: dtrain <command> [options]\n"
         "  train   train a model: dtrain train --job jobs/fashion_lenet.ini [--key value ...]\n"
         "  data    convert datasets: dtrain data fashion-mnist --out DIR\n"
         "  model   describe a model: dtrain model --name resnet50\n"
         "'dtrain <command> --help' lists a command's options.\n";
}

int cmd_train(const std::vector<std::string>& args) {
  TrainConfig cfg;
  if (!parse_train_args(args, cfg)) {
    std::cout << train_help();
    return kExitOk;
  }
  TrainResult r = train(cfg);
  log::info("dtrain: finished ", r.steps, " steps in ", r.epochs, " epoch(s), ", r.seconds, " s, ",
            static_cast<long>(r.images_per_s), " images/s",
            r.test_accuracy >= 0 ? ", final test accuracy " + std::to_string(100.0 * r.test_accuracy) + "%" : std::string());
  return kExitOk;
}

int cmd_data(const std::vector<std::string>& args) {
  std::string what, out, src;
  po::options_description desc("dtrain data fashion-mnist --out DIR [--src DIR]");
  desc.add_options()("help,h", "this help")("what", po::value(&what), "dataset: fashion-mnist")(
      "out", po::value(&out)->default_value(settings::data_dir()), "output folder")(
      "src", po::value(&src)->default_value(settings::fashion_dir()), "folder with the gzipped IDX files");
  po::positional_options_description pos;
  pos.add("what", 1);
  auto vm = parse(args, desc, "data", &pos);
  if (vm.count("help") || what.empty()) {
    std::cout << desc;
    return what.empty() && !vm.count("help") ? kExitUsage : kExitOk;
  }
  if (what != "fashion-mnist") DT_USAGE("dtrain data: unknown dataset '", what, "' (known: fashion-mnist)");
  io::ConvertSummary s = io::convert_fashion_mnist(src, out);
  log::info(s.describe());
  return kExitOk;
}

int cmd_model(const std::vector<std::string>& args) {
  std::string name;
  int minibatch = 1;
  po::options_description desc("dtrain model --name NAME [--minibatch N]");
  desc.add_options()("help,h", "this help")("name", po::value(&name), "lenet5 | resnet20 | alexnet | alexnet-owt | resnet18 | resnet50")(
      "minibatch", po::value(&minibatch)->default_value(1), "minibatch for the shapes and FLOPs");
  auto vm = parse(args, desc, "model");
  if (vm.count("help") || name.empty()) {
    std::cout << desc;
    return name.empty() && !vm.count("help") ? kExitUsage : kExitOk;
  }
  if (minibatch < 1) DT_USAGE("dtrain model: option 'minibatch' must be >= 1");
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
  std::printf("model %s: input %s, output %s, %lld parameters (%.1f MB fp32), %.3f GFLOPs forward per minibatch of %d\n",
              name.c_str(), net.input_shape().str().c_str(), net.output_shape().str().c_str(),
              static_cast<long long>(total), total * 4.0 / 1e6, net.forward_flops() / 1e9, minibatch);
  return kExitOk;
}

}  // namespace dtrain::engine
