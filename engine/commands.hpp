// engine/commands.hpp — the dtrain subcommands (DESIGN.md §5):
//   dtrain train  --job FILE [--key value ...]
//   dtrain data   fashion-mnist --out DIR [--src DIR]
//   dtrain model  --name NAME [--minibatch N]
//   dtrain bench  comm [options]           (under mpirun)
//   dtrain bench  compute --model M        (one worker's step, per layer)
//   dtrain tune   --job J --nodes n --workers-per-node g   (engine/tune.hpp)
//   dtrain report --metrics run.jsonl ...               (engine/report.hpp)
// Each returns the process exit code and throws dtrain::Error on failure.
#pragma once

#include <string>
#include <vector>

namespace dtrain::engine {

int cmd_train(const std::vector<std::string>& args);
int cmd_data(const std::vector<std::string>& args);
int cmd_model(const std::vector<std::string>& args);
int cmd_bench_comm(const std::vector<std::string>& args);  // engine/bench_comm.cpp
int cmd_bench_compute(const std::vector<std::string>& args);  // engine/bench_compute.cpp
std::string usage();

}  // namespace dtrain::engine
