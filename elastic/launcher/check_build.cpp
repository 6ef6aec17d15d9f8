#include "elastic/launcher/check_build.hpp"

#include <algorithm>
#include <vector>

#include "backends/registry.hpp"

namespace troupe::elastic::launcher {

namespace {

std::string line(bool available, const std::string& what) {
  return std::string("    [") + (available ? "X" : " ") + "] " + what + "\n";
}

} // namespace

std::string build_report(const std::string& version, bool python_package) {
  const auto cpu = backends::built_cpu_backends();
  const auto has = [&](const char* name) {
    return std::find(cpu.begin(), cpu.end(), name) != cpu.end();
  };
  std::string nccl = "NCCL";
  if (const int v = backends::nccl_version(); v > 0)
    nccl += " " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
            std::to_string(v % 100);
  return "Troupe v" + version + ":\n\n" +
         "Available Frameworks:\n" + line(false, "TensorFlow") +
         line(python_package, "PyTorch (troupe.torch)") + line(false, "MXNet") +
         // Negotiation is Troupe's own control plane; the bootstrap comes
         // from troupe-run's store, or from MPI under mpirun.
         "\nAvailable Controllers:\n" + line(has("mpi"), "MPI") + line(true, "Gloo (troupe-run)") +
         "\nAvailable Tensor Operations:\n" + line(backends::nccl_built(), nccl) +
         line(false, "DDL") + line(false, "CCL") + line(has("mpi"), "MPI") +
         line(has("gloo"), "Gloo") + line(backends::cuda_built(), "CUDA staged through host memory");
}

} // namespace troupe::elastic::launcher
