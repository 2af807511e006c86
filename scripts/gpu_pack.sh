#!/usr/bin/env bash
# Run on the development machine (Debian, the CUDA toolkit, the virtualenv's CUDA LibTorch): builds
# build-gpu for CUDA_ARCH (default 90: H100 / H200) with the CLI and captures (no GUI: the GPU
# machines have no display), and packs what scripts/gpu_run.sh needs on a GPU machine into
# .gpubin/ (ignored by git): `luka` with its CUDA plugin, the CUDA tests and benchmarks, the shared
# libraries they need that the GPU machine lacks (HDF5, ICU, libdeflate, cairo...; LibTorch, CUDA
# and NCCL come from its python3), the Qwen3 tokenizer and a long text; then what two device calls
# carry (one call carries at most 64 MiB): .gpucarry-a (.gpubin compressed, the default model's
# first part) and .gpucarry-b (the rest of the model).
#
#   scripts/gpu_pack.sh [CUDA_ARCH]                 here; then scripts/gpu_run.sh's two calls
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:-90}"
py="${PYTHON:-.venv/bin/python}"
version="$("$py" -c 'import torch; print(torch.__version__)')" || { echo "gpu_pack: $py has no torch" >&2; exit 1; }
case "$version" in
  *+cpu) echo "gpu_pack: $py's torch $version has no CUDA" >&2; exit 1 ;;
esac
torch_prefix="$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
generator=()
[ -f build-gpu/CMakeCache.txt ] || { command -v ninja >/dev/null && generator=(-G Ninja); }
export CCACHE_BASEDIR="$PWD"  # share objects with build/ where the flags agree
cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLUKA_APP=ON -DLUKA_GUI=OFF -DLUKA_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DTorch_DIR="$torch_prefix/Torch" >/dev/null
targets=(luka luka_cuda_plugin test_device test_device_gpu test_run_controller test_cuda_device test_cuda_decode_attention test_cuda_luka_decode test_cuda_luka_v2
         test_cuda_model test_cuda_graph test_cuda_fused test_step_kernels_cuda test_graphed_step_cuda test_tiled_prefill_cuda
         bench_cuda_decode bench_cuda_model bench_capture_steps)
cmake --build build-gpu -j"$(nproc)" --target "${targets[@]}"

rm -rf .gpubin
mkdir -p .gpubin/bin .gpubin/tests .gpubin/bench .gpubin/lib
cp build-gpu/luka build-gpu/libluka_cuda.so .gpubin/bin/
cp build-gpu/tests/core/device/test_device build-gpu/tests/core/device/test_device_gpu build-gpu/tests/studio/test_run_controller .gpubin/tests/
cp build-gpu/tests/kernels/cuda/test_cuda_{device,decode_attention,luka_decode,luka_v2,model,graph,fused} .gpubin/tests/
cp build-gpu/tests/core/run/test_step_kernels_cuda build-gpu/tests/core/run/test_graphed_step_cuda .gpubin/tests/
cp build-gpu/tests/core/luka/test_tiled_prefill_cuda .gpubin/tests/
cp build-gpu/bench/bench_cuda_{decode,model} build-gpu/bench/bench_capture_steps .gpubin/bench/
strip --strip-unneeded .gpubin/bin/* .gpubin/tests/* .gpubin/bench/*
# The test binaries look for the plugin beside them and in ../lib, as an installed luka would.
ln -s ../bin/libluka_cuda.so .gpubin/lib/libluka_cuda.so
# The shared libraries outside LibTorch, CUDA and the C/C++ runtime that the GPU machine (an
# Ubuntu image with PyTorch, no package registry) may not have.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libstdc\+\+|libgcc_s|libtorch|libc10|libgomp|libcu|libnv|libnccl|libcaffe2|libshm)'
for f in .gpubin/bin/* .gpubin/tests/* .gpubin/bench/*; do
  LD_LIBRARY_PATH="$("$py" -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib" ldd "$f" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] || cp -L "$path" .gpubin/lib/
done
# The Qwen3 tokenizer (captures of the Qwen3-shaped checkpoint tokenize text) and a long text.
shared=../shared/data
if [ -f "$shared/qwen3-tokenizer/tokenizer.json" ]; then
  mkdir -p .gpubin/qwen3-tokenizer .gpubin/texts
  cp "$shared"/qwen3-tokenizer/tokenizer.json "$shared"/qwen3-tokenizer/tokenizer_config.json .gpubin/qwen3-tokenizer/
  head -c 160000 "$shared/texts/emma.txt" > .gpubin/texts/emma-head.txt
fi
echo "$version" > .gpubin/TORCH_VERSION
echo "sm_$arch" > .gpubin/ARCH
git describe --always --dirty > .gpubin/REVISION
# What the two device calls carry (each at most 64 MiB together with the checkout): the first
# .gpucarry-a (.gpubin as a tar.xz, about 24 MB, and the first part of the default model
# compressed with xz, sized to fill the call), the second .gpucarry-b (the rest of the model).
rm -rf .gpucarry-a .gpucarry-b
mkdir -p .gpucarry-a .gpucarry-b
tar -cJf .gpucarry-a/gpubin.tar.xz .gpubin
model="$(readlink -f models/default 2>/dev/null || true)"
if [ -f "$model" ]; then
  sha256sum "$model" | cut -d' ' -f1 > .gpucarry-a/SHA256
  basename "$model" > .gpucarry-a/NAME
  xz -T"$(nproc)" -6 -c "$model" > .gpucarry-a/model.xz
  limit=$((64 * 1024 * 1024 - 512 * 1024))
  checkout="$( (git ls-files -z; git ls-files -z --others --exclude-standard) | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')"
  total="$(stat -c %s .gpucarry-a/model.xz)"
  first=$((limit - checkout - $(stat -c %s .gpucarry-a/gpubin.tar.xz)))
  [ $((total - first + checkout)) -le "$limit" ] || { echo "gpu_pack: the model does not fit in two calls beside the checkout" >&2; exit 1; }
  head -c "$first" .gpucarry-a/model.xz > .gpucarry-a/model-part
  tail -c +"$((first + 1))" .gpucarry-a/model.xz > .gpucarry-b/model-part
  rm .gpucarry-a/model.xz
fi
du -sh .gpubin .gpucarry-a .gpucarry-b 2>/dev/null
echo "packed for torch $version, sm_$arch at $(cat .gpubin/REVISION): see scripts/gpu_run.sh for the two calls"
