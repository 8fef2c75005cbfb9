#!/usr/bin/env bash
# tools/gpu_check.sh: the GPU check of zinf, for a machine with an NVIDIA GPU and the CUDA
# toolkit but possibly no network. Configures a CUDA build for sm_90, builds it, runs the
# gpu-labelled tests (ctest -L gpu), runs the model's kernel test under compute-sanitizer
# (memcheck, racecheck), trains the demo model on the cuda device backend, and
# (when python3 has torch and transformers) compares zinf's losses with a Hugging Face
# Llama trained on the same batches (tools/hf_compare.py) and checks tools/tokenize_hf.py
# with a real tokenizer (tools/tokenize_hf_check.py). Every phase has its own time limit,
# cut to what is left of DEADLINE; a phase with no time left is skipped and fails the
# check. A build that fails with -Werror (a compiler never tried) is noted, fails the
# check, and is redone without it, so the GPU is still exercised.
#
# Environment:
#   ZINF_DEPS_PREFIX  a folder holding the Debian packages of tools/fetch_debs.sh
#                     extracted (usr/...); when it is empty and .deb/ holds .deb files,
#                     they are extracted into it first. Passed to CMake through
#                     CMAKE_PREFIX_PATH and PKG_CONFIG_PATH, and to the tests through
#                     LD_LIBRARY_PATH (not to python3: torch keeps its own). Unset: the
#                     system's packages.
#   RESULTS           where logs and results go (default gpu-check-out/ in the checkout)
#   ARCHIVE           also pack RESULTS into this .tar.gz at the end (few files to carry)
#   DEADLINE          seconds the whole check may take (default 540)
#   BUILD_DIR         build folder (default build-gpu), CUDA_ARCH (default 90), JOBS
# Exit status: 0 when every phase passed, else that of the first failing phase.
set -uo pipefail

# paths given relative to where the script is started from
[ -z "${RESULTS:-}" ] || RESULTS=$(realpath -m "$RESULTS")
[ -z "${ARCHIVE:-}" ] || ARCHIVE=$(realpath -m "$ARCHIVE")
[ -z "${ZINF_DEPS_PREFIX:-}" ] || ZINF_DEPS_PREFIX=$(realpath -m "$ZINF_DEPS_PREFIX")
caller_ld=${LD_LIBRARY_PATH:-} # python3 gets this, not the carried packages'
cd "$(dirname "$0")/.."
root=$(pwd)
out=${RESULTS:-$root/gpu-check-out}
deadline=$(($(date +%s) + ${DEADLINE:-540}))
build=${BUILD_DIR:-build-gpu}
arch=${CUDA_ARCH:-90}
jobs=${JOBS:-$(nproc)}
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
status=0
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
# nothing in the Python phases may wait for a network
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

note() { echo "gpu_check: $*" | tee -a "$summary"; }

finish() {
	note "done: exit $status; results in $out"
	if [ -n "${ARCHIVE:-}" ]; then
		tar czf "$ARCHIVE" -C "$out" . && echo "gpu_check: packed into $ARCHIVE"
	fi
	exit $status
}

# phase NAME SECONDS CMD...: run CMD with a time limit (cut to what is left of the
# deadline), its output in $out/NAME.log.
phase() {
	local name=$1 limit=$2 t0 rc left
	shift 2
	t0=$(date +%s)
	left=$((deadline - t0))
	if [ "$left" -lt 15 ]; then
		note "$name: skipped (the check's deadline has passed)"
		[ $status -ne 0 ] || status=124
		return 124
	fi
	[ "$limit" -le "$left" ] || limit=$left
	timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
	rc=$?
	note "$name: exit $rc after $(($(date +%s) - t0)) s (limit $limit s, log $name.log)"
	if [ $rc -ne 0 ]; then
		tail -n 40 "$out/$name.log"
		[ $status -ne 0 ] || status=$rc
	fi
	return $rc
}

# ---- dependencies from extracted Debian packages ------------------------------------------
setup_prefix() {
	local p=$1 lib
	mkdir -p "$p"
	if [ -z "$(ls -A "$p" 2>/dev/null)" ] && ls .deb/*.deb >/dev/null 2>&1; then
		for deb in .deb/*.deb; do
			dpkg-deb -x "$deb" "$p" || { note "cannot extract $deb"; return 1; }
		done
		# .pc files name /usr; point them into the prefix
		find "$p" -name '*.pc' -type f -exec sed -i -E \
			-e "s#=/usr(/|$)#=$p/usr\1#" -e "s#-I/usr/#-I$p/usr/#g" -e "s#-L/usr/#-L$p/usr/#g" {} +
		# OpenBLAS: the pthread variant stands in for the alternatives links
		lib="$p/usr/lib/$multiarch"
		if [ -d "$lib/openblas-pthread" ]; then
			for f in libopenblas.so libopenblas.so.0 libblas.so libblas.so.3; do
				[ -e "$lib/openblas-pthread/$f" ] && ln -sf "openblas-pthread/$f" "$lib/$f"
			done
			mkdir -p "$lib/pkgconfig"
			ln -sf ../openblas-pthread/pkgconfig/openblas.pc "$lib/pkgconfig/openblas.pc"
		fi
		note "extracted $(ls .deb/*.deb | wc -l) packages into $p"
	fi
	lib="$p/usr/lib/$multiarch"
	export CMAKE_PREFIX_PATH="$p/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
	export PKG_CONFIG_PATH="$lib/pkgconfig:$lib/openblas-pthread/pkgconfig:$p/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
	deps_ld="$lib:$lib/openblas-pthread"
	export LD_LIBRARY_PATH="$deps_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export PATH="$p/usr/bin:$PATH"
	export CPATH="$p/usr/include:$p/usr/include/$multiarch${CPATH:+:$CPATH}"
	export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
}

deps_ld=
if [ -n "${ZINF_DEPS_PREFIX:-}" ]; then
	setup_prefix "$ZINF_DEPS_PREFIX" || { status=1; finish; }
fi
export PATH="$PATH:/usr/local/cuda/bin"

{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
	nvcc --version 2>&1 | tail -n 2
	cmake --version | head -n 1
} >"$out/machine.txt" 2>&1
note "$(head -n 3 "$out/machine.txt" | tr '\n' ' ')"

# ---- configure, build, gpu tests -------------------------------------------------------------
phase configure 120 cmake -S . -B "$build" -Wno-dev -DZINF_WERROR=ON -DZINF_CUDA=ON \
	-DCMAKE_CUDA_ARCHITECTURES="$arch" || finish
phase build 240 cmake --build "$build" -j "$jobs"
rc=$?
if [ $rc -ne 0 ]; then
	# a warning of a compiler never tried fails the check, but the GPU is still tested
	werror="-Werror|treated as an? error"
	[ $rc -ne 124 ] && [ $rc -ne 137 ] && grep -qiE -e "$werror" "$out/build.log" || finish
	grep -m 3 -iE -e "$werror" "$out/build.log" | sed 's/^/  /' | tee -a "$summary"
	phase configure_nowerror 60 cmake -S . -B "$build" -DZINF_WERROR=OFF || finish
	phase build_nowerror 240 cmake --build "$build" -j "$jobs" || finish
fi
phase ctest_gpu 150 ctest --test-dir "$build" -L gpu --output-on-failure --timeout 120
grep -E "tests passed|Passed|Failed|Skipped|\*\*\*" "$out/ctest_gpu.log" | tee -a "$summary"
cp "$build/Testing/Temporary/LastTest.log" "$out/ctest_gpu_last.log" 2>/dev/null
# Here a GPU is expected: a test that skipped for want of one (no device, a driver too old
# for the toolkit) fails the check instead of passing unseen.
if grep -h "skip: no CUDA device" "$out/ctest_gpu.log" "$out/ctest_gpu_last.log" 2>/dev/null |
	sort -u | head -n 3 | sed 's/^/  /' | grep . >"$out/no_gpu.txt"; then
	note "ctest_gpu: tests skipped for want of a GPU:"
	tee -a "$summary" <"$out/no_gpu.txt"
	[ $status -ne 0 ] || status=1
fi

# ---- the demo on cuda: the demo model and config, activations on the GPU --------------------------
demo=$(mktemp -d /var/tmp/zinf-gpu-demo.XXXXXX)
mkdir -p "$demo/nvme"
cat docs/*.md src/*.c src/model/*.c >"$demo/text.txt"
phase demo_cuda 60 env OMP_WAIT_POLICY=passive "$build/zinf" train \
	--init docs/examples/models/demo-llama.json --config docs/examples/train-demo.json \
	--set zinf.device=cuda --set zinf.device_memory_limit=256MiB \
	--set zero_optimization.offload_param.nvme_path="$demo/nvme" \
	--set zero_optimization.offload_optimizer.nvme_path="$demo/nvme" \
	--data "$demo/text.txt" --data-format text --seq-len 128 --steps 30 --shuffle seeded \
	--log-json "$out/demo_cuda.jsonl"
tail -n 3 "$out/demo_cuda.log" | tee -a "$summary"
# loss per step as CSV (step,loss,tokens_per_second,peak_device_bytes) for plotting
if [ -s "$out/demo_cuda.jsonl" ]; then
	echo "step,loss,tokens_per_second,peak_device_bytes" >"$out/demo_cuda_loss.csv"
	sed -E 's/.*"step": *([0-9]+).*"loss": *([^,]+),.*"tokens_per_second": *([^,]+),.*"peak_device_bytes": *([0-9]+).*/\1,\2,\3,\4/' \
		"$out/demo_cuda.jsonl" | grep -E '^[0-9]+,' >>"$out/demo_cuda_loss.csv"
fi
# the same with the gradient accumulators on NVMe and gas 2 (the gradient worker, reads
# back of partial sums and the step's read-ahead, with CUDA compute)
phase demo_cuda_nvme_grads 60 env OMP_WAIT_POLICY=passive "$build/zinf" train \
	--init docs/examples/models/demo-llama.json --config docs/examples/train-demo.json \
	--set zinf.device=cuda --set zinf.device_memory_limit=256MiB \
	--set zinf.offload_gradients=nvme --set gradient_accumulation_steps=2 \
	--set zero_optimization.offload_param.nvme_path="$demo/nvme" \
	--set zero_optimization.offload_optimizer.nvme_path="$demo/nvme" \
	--data "$demo/text.txt" --data-format text --seq-len 128 --steps 10 --shuffle seeded \
	--log-json "$out/demo_cuda_nvme_grads.jsonl"
tail -n 1 "$out/demo_cuda_nvme_grads.log" | tee -a "$summary"
rm -rf "$demo"

# ---- an independent reference: Hugging Face transformers, same model, same batches ---------------
# python3 runs with the system's libraries (torch's own); zinf, run by it, gets the
# packages' through a wrapper
case $build in
/*) zinf_cmd=$build/zinf ;;
*) zinf_cmd=$root/$build/zinf ;;
esac
if [ -n "$deps_ld" ]; then
	printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$LD_LIBRARY_PATH" \
		"$zinf_cmd" >"$out/zinf-with-deps.sh"
	chmod +x "$out/zinf-with-deps.sh"
	zinf_cmd=$out/zinf-with-deps.sh
fi
py() { env LD_LIBRARY_PATH="$caller_ld" python3 "$@"; }
if py -c "import torch, transformers" >/dev/null 2>&1; then
	phase hf_compare 120 env LD_LIBRARY_PATH="$caller_ld" python3 tools/hf_compare.py \
		--zinf "$zinf_cmd" --device cuda --out "$out/hf"
	tail -n 10 "$out/hf_compare.log" | tee -a "$summary"
	# yarn: frequencies blended over a 64-token context, cos and sin scaled (against
	# transformers 5's formulas, which zinf follows)
	if py -c 'import sys, transformers; sys.exit(int(transformers.__version__.split(".")[0]) < 5)'; then
		phase hf_compare_yarn 120 env LD_LIBRARY_PATH="$caller_ld" python3 \
			tools/hf_compare.py --zinf "$zinf_cmd" --device cuda --out "$out/hf-yarn" \
			--rope-scaling \
			'{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}'
		tail -n 10 "$out/hf_compare_yarn.log" | tee -a "$summary"
	else
		note "hf_compare_yarn: skipped (transformers before 5)"
	fi
	# the tokenizer script against a real tokenizer (trained here: no network needed)
	phase tokenize_hf 60 env LD_LIBRARY_PATH="$caller_ld" python3 tools/tokenize_hf_check.py
	tail -n 3 "$out/tokenize_hf.log" | tee -a "$summary"
else
	note "hf_compare, tokenize_hf: skipped (python3 here has no torch and transformers)"
fi

# ---- last, with the time left: the model's kernels under compute-sanitizer (out-of-bounds
# reads and writes, races in shared memory): this test's buffers are separate allocations,
# which memcheck can bound; a machine whose sanitizer does not support the GPU is noted,
# not failed
if command -v compute-sanitizer >/dev/null; then
	for tool in memcheck racecheck; do
		cs_status=$status
		phase "sanitizer_$tool" 90 compute-sanitizer --tool "$tool" --error-exitcode 3 \
			"$build/tests/model/test_gpu_llama_matches_cpu_runtime"
		rc=$?
		# exit 3: the sanitizer found something, which always counts; a sanitizer that
		# cannot run on this GPU, or runs past the time left, is noted only
		if [ $rc -ne 0 ] && [ $rc -ne 3 ] &&
			grep -qiE "device not supported|unsupported device" "$out/sanitizer_$tool.log"; then
			status=$cs_status
			note "sanitizer_$tool: not supported on this machine (not counted)"
		elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
			status=$cs_status
			note "sanitizer_$tool: cut at the time left (not counted)"
		fi
		grep -m 2 -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/sanitizer_$tool.log" | tee -a "$summary"
	done
else
	note "sanitizer: skipped (no compute-sanitizer on PATH)"
fi

finish
