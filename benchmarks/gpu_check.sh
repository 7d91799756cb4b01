#!/usr/bin/env bash
# GPU check of the trainer (124M GPT-2, T=1024, bf16 autocast), one script, about 7 minutes on an H100:
#   1. levers, our model alone, compiled (benchmarks/train_step.py --ours-only): the loss path
#      (chunked vs full logits), the micro-batch (32 vs 64) with the better loss path; the best
#      pair is picked from the printed tokens/s
#   2. the real `corpusforge train` (pipelines.cli train) with that pair, 512k-token batches,
#      16 steps, on a synthetic token-shard folder (benchmarks/synthetic_tokens.py)
#   3. train_step.py ours vs transformers' GPT2LMHeadModel, both compiled, with the torch.profiler
#      top-kernels table; then both eager (micro-batch 16)
#   4. if time is left: CUDA graphs (compile mode reduce-overhead), then max-autotune-no-cudagraphs
# Every section runs under a deadline (GPU_CHECK_SECONDS, default 470 s) and is skipped when too
# little is left. $OUT (default ./gpu_check_out) receives summary.txt (every figure) and logs.tgz
# (each section's full log and the run's metrics.jsonl). Run from the repository root:
#   bash benchmarks/gpu_check.sh
# Smoke run on a CPU (no figures worth reading; checks the plumbing):
#   MODEL_ARGS="--device cpu --model small --n-layer 1 --n-embd 32 --n-head 2 --block-size 32" \
#   TRAIN_ARGS="--device cpu --model gpt2 --n_layer 1 --n_embd 32 --n_head 2 --block_size 32 --batch_tokens 2048" \
#   COMPILE= bash benchmarks/gpu_check.sh
set -u
OUT=${OUT:-gpu_check_out}
WORK=${GPU_CHECK_WORK:-$(mktemp -d)}
LOGS=$WORK/logs
mkdir -p "$OUT" "$LOGS"
MODEL_ARGS=${MODEL_ARGS:---device cuda --model gpt2 --block-size 1024}
TRAIN_ARGS=${TRAIN_ARGS:---model gpt2 --batch_tokens 524288}
COMPILE=${COMPILE---compile}
LIMIT=${GPU_CHECK_SECONDS:-470}
PY=${PYTHON:-python3}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"

say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $(( LIMIT - SECONDS )); }
# section NAME NEEDED_SECONDS COMMAND...: runs COMMAND with what is left of the deadline, log in $OUT/NAME.log
section() {
    local name=$1 need=$2; shift 2
    if (( $(left) < need )); then say "== $name: skipped ($(left) s left, needs ~$need s)"; return 1; fi
    say "== $name ($(left) s left): $*"
    local t0=$SECONDS
    timeout "$(left)" "$@" > "$LOGS/$name.log" 2>&1
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
# 1. levers (ours alone, compiled)
section lever_chunked_b32 60 $TS $COMPILE --ours-only --batch 32 --loss chunked
section lever_full_b32 60 $TS $COMPILE --ours-only --batch 32 --loss full
LOSS=chunked
a=$(rate lever_chunked_b32); b=$(rate lever_full_b32)
if [[ -n "$b" && ( -z "$a" || $(awk -v a="${a:-0}" -v b="$b" 'BEGIN {print (b > a)}') == 1 ) ]]; then LOSS=full; fi
say "loss path: chunked ${a:-n/a} tok/s, full ${b:-n/a} tok/s -> $LOSS"
MB=32
section lever_${LOSS}_b64 60 $TS $COMPILE --ours-only --batch 64 --loss $LOSS
c=$(rate lever_${LOSS}_b64); best=$([[ $LOSS == full ]] && echo "$b" || echo "$a")
if [[ -n "$c" && $(awk -v a="${best:-0}" -v c="$c" 'BEGIN {print (c > a)}') == 1 ]]; then MB=64; fi
say "micro-batch: 32 ${best:-n/a} tok/s, 64 ${c:-n/a} tok/s -> $MB"

# 2. the real trainer
section train 60 $PY -m pipelines.cli train --data "$DATA" --out "$WORK/run" $TRAIN_ARGS \
    --micro_batch $MB --loss_impl $LOSS --max_steps 16 --warmup_steps 2 --log_interval 1 --ckpt_interval 1000 \
    --no_hf_export --quiet $COMPILE
cp "$WORK/run/metrics.jsonl" "$LOGS/train_metrics.jsonl" 2>/dev/null

# 3. ours vs transformers, compiled (with the profile), then eager
section compiled_vs_hf 100 $TS $COMPILE --batch $MB --loss $LOSS --profile 3
section eager_vs_hf 30 $TS --batch 16 --loss $LOSS

# 4. compile modes, if time is left
section lever_cudagraphs 70 $TS $COMPILE --compile-mode reduce-overhead --ours-only --batch $MB --loss $LOSS
section lever_max_autotune 150 $TS $COMPILE --compile-mode max-autotune-no-cudagraphs --ours-only --batch $MB --loss $LOSS
rm -rf "$DATA" "$WORK/run"
say "== done in $SECONDS s"
