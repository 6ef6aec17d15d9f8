#!/usr/bin/env bash
# Installs the Debian 12 packages Troupe builds and tests with. Idempotent and
# non-interactive: packages already present are skipped, apt runs only when needed.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache
  libcaf-dev
  libssl-dev  # the store's request MACs, the control plane's TLS certificates
  libgloo-dev
  libopenmpi-dev openmpi-bin
  libprotobuf-dev protobuf-compiler
  libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev
  libyaml-cpp-dev  # troupe-run --config-file (horovodrun's YAML)
  libeigen3-dev liblbfgspp-dev  # autotune: Gaussian process, L-BFGS-B (header-only)
  prometheus-cpp-dev  # metrics: prometheus-cpp core and pull (/metrics over civetweb)
  prometheus curl  # promtool and a real server for the metrics tests
  libcurl4-openssl-dev nlohmann-json3-dev  # etcd rendezvous: its HTTP/JSON gateway
  etcd-server etcd-client  # a real etcd for the etcd rendezvous tests
  procps  # pgrep in the launcher tests
  iproute2  # ss: the test that a local job listens on loopback only
  clang libclang-rt-14-dev  # libFuzzer targets (fuzz/), run bounded as fuzz.* tests
  # Python package (troupe, troupe.torch) and its tests, for /usr/bin/python3
  python3-dev pybind11-dev python3-numpy
  python3-torch python3-torchvision python3-pytest
  python3-mpi4py  # process sets from MPI communicators
  python3-cloudpickle  # broadcast_object / allgather_object, as Horovod
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
