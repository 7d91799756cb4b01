#!/usr/bin/env bash
# GPU check of the trainer (124M GPT-2, T=1024, bf16 autocast, micro-batch 64, chunked loss), one
# script, about 8 minutes on an H100:
#   1. levers, our model alone, compiled (benchmarks/train_step.py --ours-only), one at a time:
#      inductor's coordinate-descent tuning (TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1), then CUDA
#      graphs (compile mode reduce-overhead); each is kept only when its tokens/s beat the one before
#   2. the real `corpusforge train` (pipelines.cli train) with the levers kept, 512k-token batches,
#      16 steps, on a synthetic token-shard folder (benchmarks/synthetic_tokens.py)
#   3. train_step.py ours vs transformers' GPT2LMHeadModel, both compiled with the same settings,
#      with the torch.profiler top-kernels table; then both eager (micro-batch 16) if time is left
# Every section runs under a deadline (GPU_CHECK_SECONDS, default 500 s) and is skipped when too
# little is left. $OUT (default ./gpu_check_out) receives summary.txt (every figure) and logs.tgz
# (each section's full log and the run's metrics.jsonl). Run from the repository root:
#   bash benchmarks/gpu_check.sh
# Smoke run on a CPU (no figures worth reading; checks the plumbing):
#   MODEL_ARGS="--device cpu --model small --n-layer 1 --n-embd 32 --n-head 2 --block-size 32" \
#   TRAIN_ARGS="--device cpu --model gpt2 --n_layer 1 --n_embd 32 --n_head 2 --block_size 32 --batch_tokens 2048" \
#   MB=8 COMPILE= bash benchmarks/gpu_check.sh
set -u
OUT=${OUT:-gpu_check_out}
WORK=${GPU_CHECK_WORK:-$(mktemp -d)}
LOGS=$WORK/logs
mkdir -p "$OUT" "$LOGS"
MODEL_ARGS=${MODEL_ARGS:---device cuda --model gpt2 --block-size 1024}
TRAIN_ARGS=${TRAIN_ARGS:---model gpt2 --batch_tokens 524288}
COMPILE=${COMPILE---compile}
LIMIT=${GPU_CHECK_SECONDS:-500}
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"

say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $(( LIMIT - SECONDS )); }
# section NAME NEEDED_SECONDS COMMAND...: runs COMMAND for at most twice NEEDED_SECONDS (and within the
# deadline), log in $LOGS/NAME.log
section() {
    local name=$1 need=$2; shift 2
    if (( $(left) < need )); then say "== $name: skipped ($(left) s left, needs ~$need s)"; return 1; fi
    say "== $name ($(left) s left): $*"
    local t0=$SECONDS cap=$(( 2 * need < $(left) ? 2 * need : $(left) ))
    timeout "$cap" "$@" > "$LOGS/$name.log" 2>&1
    local rc=$?
    grep -E "^(device|model|ours:|side|transformers|corpusforge|ratio|FLOPs|profile|  [ 0-9.]+%)|MFU|tok/s|loss|torch.compile|Error|error" \
        "$LOGS/$name.log" | grep -v "^\s*$" | tail -40 | tee -a "$SUMMARY"
    say "-- $name: rc $rc, $(( SECONDS - t0 )) s"
    return $rc
}
# our tokens/s in a train_step.py log (the fifth column of its "corpusforge model.gpt.GPT" row)
rate() { awk '/^corpusforge model.gpt.GPT/ {gsub(",", "", $5); print $5}' "$LOGS/$1.log" 2>/dev/null | tail -1; }
finish() { tar czf "$OUT/logs.tgz" -C "$WORK" logs; }
trap finish EXIT

say "== environment"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$SUMMARY"
$PY -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, torch.cuda.get_device_name())" 2>&1 | tee -a "$SUMMARY"

DATA=$WORK/tokens
$PY benchmarks/synthetic_tokens.py "$DATA" 2>&1 | tee -a "$SUMMARY"

TS="$PY benchmarks/train_step.py $MODEL_ARGS --warmup 3 --steps 4 --rounds 3"
MB=${MB:-64}
LOSS=chunked
faster() { [[ -n "$2" && ( -z "$1" || $(awk -v a="${1:-0}" -v b="$2" 'BEGIN {print (b > a)}') == 1 ) ]]; }
# 1. levers (ours alone, compiled)
section lever_base 60 $TS $COMPILE --ours-only --batch $MB --loss $LOSS
section lever_cdt 80 env TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 $TS $COMPILE --ours-only --batch $MB --loss $LOSS
base=$(rate lever_base); cdt=$(rate lever_cdt)
CDT=0; best=$base
if faster "$base" "$cdt"; then CDT=1; best=$cdt; fi
say "coordinate-descent tuning: off ${base:-n/a} tok/s, on ${cdt:-n/a} tok/s -> $CDT"
section lever_graphs 60 env TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=$CDT $TS $COMPILE --compile-mode reduce-overhead \
    --ours-only --batch $MB --loss $LOSS
graphs=$(rate lever_graphs)
MODE=default
if faster "$best" "$graphs"; then MODE=reduce-overhead; fi
say "CUDA graphs: off ${best:-n/a} tok/s, on ${graphs:-n/a} tok/s -> compile mode $MODE"

# 2. the real trainer
section train 70 env TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=$CDT $PY -m pipelines.cli train --data "$DATA" \
    --out "$WORK/run" $TRAIN_ARGS --micro_batch $MB --loss_impl $LOSS --max_steps 16 --warmup_steps 2 --log_interval 1 \
    --ckpt_interval 1000 --no_hf_export --quiet $COMPILE ${COMPILE:+--compile_mode $MODE}
cp "$WORK/run/metrics.jsonl" "$LOGS/train_metrics.jsonl" 2>/dev/null
$PY - "$WORK/run/metrics.jsonl" <<'PYEOF' 2>&1 | tee -a "$SUMMARY"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if '"mfu"' in line]
timed = rows[1:] or rows
if timed:
    tps = sorted(r["tokens_per_s"] for r in timed)
    mfu = sorted(r["mfu"] or 0 for r in timed)
    print(f"trainer steps 2-{len(rows)}: tokens/s {tps[0]:,.0f} - {tps[-1]:,.0f} (median {tps[len(tps) // 2]:,.0f}); "
          f"MFU {mfu[0]:.2%} - {mfu[-1]:.2%} (median {mfu[len(mfu) // 2]:.2%}); "
          f"loss {rows[0]['loss']:.4f} -> {rows[-1]['loss']:.4f}")
PYEOF

# 3. ours vs transformers, both compiled with the same settings (with the profile), then eager
section compiled_vs_hf 110 env TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=$CDT $TS $COMPILE ${COMPILE:+--compile-mode $MODE} \
    --batch $MB --loss $LOSS --profile 3
section eager_vs_hf 30 $TS --batch 16 --loss $LOSS
rm -rf "$DATA" "$WORK/run"
say "== done in $SECONDS s"
