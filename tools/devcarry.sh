#!/usr/bin/env bash
# Packs what dtplan's CUDA binaries need on a lent GPU machine whose image has CUDA, NCCL and
# PyTorch but none of our Debian packages (the device tool of this workplace): the binaries
# named, Debian's Open MPI 4.1.4 libraries and a relocated tree of its components and help
# files, and env.sh, which sets the paths. Run from the repository root after a build with the
# CUDA backend ON; the folder (.devcarry/, git-ignored) travels as one `carry` path.
#
# One rank runs as an Open MPI singleton (no mpirun, no orted: ess_singleton_isolated).
# Components that need libraries such a machine lacks (UCX, libfabric, verbs, PSM, PMIx ext3x,
# netlink, OpenSHMEM) are left out; the rest is the usual single-node set.
#
# On the GPU machine, from the repository root: `source .devcarry/env.sh`, then run
# `.devcarry/bin/dtplan-run ...` (one rank; there is no mpirun) as
# data/measurements/h200-cuda/run.sh does. The build and the machine must share CUDA's major
# version (the binaries link libcudart.so.13 and libcublas.so.13).
#
# Usage: tools/devcarry.sh BUILD_DIR BINARY...     e.g. tools/devcarry.sh build dtplan-run test_runtime
set -euo pipefail
build=${1:?build directory}; shift
out=.devcarry
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi/lib
rm -rf "$out"; mkdir -p "$out/bin" "$out/lib"
for b in "$@"; do
  [ -x "$build/bin/$b" ] || { echo "devcarry: $build/bin/$b is not built" >&2; exit 1; }
  cp "$build/bin/$b" "$out/bin/"
  strip --strip-debug "$out/bin/$b"
done
# The shared libraries Open MPI itself needs (the device has glibc, libz and the CUDA stack).
for l in libmpi.so.40 libmpi_cxx.so.40 libopen-rte.so.40 libopen-pal.so.40 libhwloc.so.15 \
         libevent_core-2.1.so.7 libevent_pthreads-2.1.so.7 libudev.so.1; do
  cp -L "/usr/lib/x86_64-linux-gnu/$l" "$out/lib/"
done
for l in libmca_common_sm.so.40 libmca_common_ompio.so.41 libmca_common_monitoring.so.50; do
  cp -L "/usr/lib/x86_64-linux-gnu/$l" "$out/lib/"
done
# The relocated install tree that OPAL_PREFIX names: components and help files.
comp="$out/ompi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3"
mkdir -p "$comp" "$out/ompi/share"
skip='ucx|ofi|openib|psm|ext3x|netlink|oshmem|atomic_|memheap|scoll|spml|sshmem'
for f in "$ompi_lib"/openmpi3/*.so; do
  [[ "$(basename "$f")" =~ $skip ]] || cp "$f" "$comp/"
done
cp -r /usr/share/openmpi "$out/ompi/share/"
cat > "$out/env.sh" <<'EOF'
# Sourced on the device from the repository root: Open MPI as a relocated singleton, and the
# CUDA runtime, cuBLAS and NCCL wherever the image keeps them.
here=$(pwd)/.devcarry
cuda_dirs=""
for n in libcudart.so.13 libcublas.so.13 libnccl.so.2; do
  f=$(ls /usr/local/cuda/lib64/$n /usr/local/cuda/lib/$n 2>/dev/null | head -1)
  [ -z "$f" ] && f=$(find /usr/local /opt -name "$n" 2>/dev/null | head -1)
  [ -n "$f" ] && cuda_dirs="$cuda_dirs:$(dirname "$f")"
done
export LD_LIBRARY_PATH="$here/lib$cuda_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$here/ompi"
export OMPI_MCA_ess_singleton_isolated=1
export OMPI_MCA_btl_base_warn_component_unused=0
export OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
EOF
du -sh "$out"
