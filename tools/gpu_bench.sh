#!/usr/bin/env bash
# tools/gpu_bench.sh: GPU figures for docs/benchmarks.md, after tools/gpu_check.sh has
# built zinf (it reuses that build). On a 134M-parameter Llama (docs/examples/models/
# bench-134m.json, bf16, parameters and Adam state in host memory, a 4 GiB device budget,
# micro batch 8 x 1024 tokens of this project's text read as bytes), with
# `zinf bench train` (offloaded beside resident, alternating steps in one process):
#   fp32    exact fp32 products (the default)
#   tf32    zinf.tf32=true (tensor cores)
#   pinned  tf32 with offload_param.pin_memory=true (host homes page-locked: DMA copies)
#   ckpt    tf32 with --activation-checkpointing
#   cpuckpt tf32, checkpointing, activation_checkpointing.cpu_checkpointing=true
#   blocking tf32 with zinf.cuda_sync=blocking (host threads sleep while the GPU works,
#           leaving their cores to the CPU optimizer: compare with tf32)
#   zoff    tf32 with the parameters on the device and the optimizer state in host
#           memory (ZeRO-Offload): its step_median_s against the resident run's (the
#           state on the device, updated there) is what offload_optimizer none saves
# The k-th name of BENCHES writes $RESULTS/bench_<k>-<name>.json (zinf bench train --json) and a line to
# $RESULTS/bench_summary.txt; a run past its time limit (150 s, or what is left of
# DEADLINE) is cut and noted, and a bench with no time left is skipped.
#
# Environment: RESULTS (default gpu-check-out/), ARCHIVE (also pack RESULTS' bench files
# into this .tar.gz at the end), DEADLINE (seconds for all of it, default 450),
# BUILD_DIR (default build-gpu), STEPS (default 6), SEQ_LEN (1024), MODEL, CONFIG (the
# files above), DEVICE (cuda; host checks the script on a machine without a GPU, with a
# small MODEL), BENCHES (the names above to run, in order, a name may repeat to
# interleave runs; default "fp32 tf32 pinned ckpt cpuckpt").
set -uo pipefail

# paths given relative to where the script is started from
[ -z "${RESULTS:-}" ] || RESULTS=$(realpath -m "$RESULTS")
[ -z "${ARCHIVE:-}" ] || ARCHIVE=$(realpath -m "$ARCHIVE")
cd "$(dirname "$0")/.."
root=$(pwd)
out=${RESULTS:-$root/gpu-check-out}
deadline=$(($(date +%s) + ${DEADLINE:-450}))
build=${BUILD_DIR:-build-gpu}
steps=${STEPS:-6}
seq=${SEQ_LEN:-1024}
model=${MODEL:-docs/examples/models/bench-134m.json}
config=${CONFIG:-docs/examples/train-bench-gpu.json}
device=${DEVICE:-cuda}
benches=${BENCHES:-fp32 tf32 pinned ckpt cpuckpt}
mkdir -p "$out"
summary="$out/bench_summary.txt"
: >"$summary"
[ -x "$build/zinf" ] || { echo "gpu_bench: $build/zinf missing (run tools/gpu_check.sh first)" | tee -a "$summary"; exit 2; }

work=$(mktemp -d /var/tmp/zinf-gpu-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat docs/*.md src/*.c src/model/*.c kernels/*.cu >"$work/text.txt"

bench() {
	local name=$1 limit=$2 t0 rc
	shift 2
	t0=$(date +%s)
	if [ $((deadline - t0)) -lt 20 ]; then
		echo "bench $name: skipped (the deadline has passed)" | tee -a "$summary"
		return 124
	fi
	[ "$limit" -le $((deadline - t0)) ] || limit=$((deadline - t0))
	timeout --kill-after=10 "$limit" "$build/zinf" bench train --init "$model" \
		--config "$config" --set zinf.device="$device" --data "$work/text.txt" \
		--data-format text --seq-len "$seq" --steps "$steps" --shuffle seeded --json \
		"$@" >"$out/bench_$name.json" 2>"$out/bench_$name.log"
	rc=$?
	echo "bench $name: exit $rc after $(($(date +%s) - t0)) s: $(tail -c 600 "$out/bench_$name.json" | tr -d '\n')" |
		tee -a "$summary"
	return $rc
}

{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
	nproc
} >"$out/bench_machine.txt" 2>&1
status=0
i=0
for b in $benches; do
	i=$((i + 1))
	t="$i-$b" # runs of a name repeated in BENCHES keep their own files
	case $b in
	fp32) bench "$t" 150 ;;
	tf32) bench "$t" 150 --set zinf.tf32=true ;;
	pinned) bench "$t" 150 --set zinf.tf32=true \
		--set zero_optimization.offload_param.pin_memory=true ;;
	ckpt) bench "$t" 150 --set zinf.tf32=true --activation-checkpointing ;;
	cpuckpt) bench "$t" 150 --set zinf.tf32=true --activation-checkpointing \
		--set activation_checkpointing.cpu_checkpointing=true ;;
	blocking) bench "$t" 150 --set zinf.tf32=true --set zinf.cuda_sync=blocking ;;
	zoff) bench "$t" 150 --set zinf.tf32=true \
		--set zero_optimization.offload_param.device=none ;;
	*) echo "gpu_bench: unknown bench $b" | tee -a "$summary"; false ;;
	esac || status=$?
done
echo "gpu_bench: done: exit $status; results in $out" | tee -a "$summary"
if [ -n "${ARCHIVE:-}" ]; then
	(cd "$out" && tar czf "$ARCHIVE" bench_*) && echo "gpu_bench: packed into $ARCHIVE"
fi
exit $status
