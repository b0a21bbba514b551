#!/usr/bin/env bash
# `cnnrt serve` under load on the GPU machine: dynamic batching against --max-batch 1 (one GPU, CLIENTS
# concurrent clients), and, where the machine has two GPUs, --gpus 0,1 against --gpus 0 at saturation
# (SAT_CLIENTS clients of SAT_ROWS rows a request). Every answer is checked against the CPU backend (scripts/load_test.py).
#
#   scripts/serve_round.sh MODEL.onnx [MODEL.onnx ...]
#
# Uses the bundle (scripts/bundle_device.sh; .device/ or .device.tar.xz) when there is one, else `cnnrt` on
# PATH. A model file called model.onnx (the zoo's layout) is named after its folder. Settings from the
# environment: CLIENTS (64), SAT_CLIENTS (256), REQUESTS per client (300), ROWS per request (1), SAT_ROWS
# (ROWS), ENCODING (binary), DISTINCT inputs (32), INSTANCES per GPU (2), MAX_BATCH (64), DELAY_US (500),
# ONE_GPU and TWO_GPUS (0 skips that part), SERVE_FLAGS (extra flags for every server). Logs and the JSON of every run go to $OUT (default /tmp/cnnrt-serve); the summary
# table is printed last.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
if [ -d .device ] || [ -f .device.tar.xz ]; then
  [ -d .device ] || tar -xJf .device.tar.xz
  source .device/env.sh
fi
command -v cnnrt > /dev/null || { echo "serve_round: no cnnrt (bundle it, or put it on PATH)" >&2; exit 2; }
[ $# -gt 0 ] || { echo "usage: scripts/serve_round.sh MODEL.onnx [MODEL.onnx ...]" >&2; exit 2; }
OUT=${OUT:-/tmp/cnnrt-serve}
mkdir -p "$OUT"
export CNNRT_CACHE_DIR="$OUT/cache"  # tuning measured once per model, reused by every server after the first
CLIENTS=${CLIENTS:-64}
SAT_CLIENTS=${SAT_CLIENTS:-256}
REQUESTS=${REQUESTS:-300}
ROWS=${ROWS:-1}
SAT_ROWS=${SAT_ROWS:-$ROWS}
ONE_GPU=${ONE_GPU:-1}
TWO_GPUS=${TWO_GPUS:-1}
ENCODING=${ENCODING:-binary}
DISTINCT=${DISTINCT:-32}
INSTANCES=${INSTANCES:-2}
MAX_BATCH=${MAX_BATCH:-64}
DELAY_US=${DELAY_US:-500}
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
summary="$OUT/summary.txt"
{
  echo "serve round: $(cat .device/commit.txt 2>/dev/null || git describe --always --dirty 2>/dev/null)," \
    "$gpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | xargs)"
  echo "clients $CLIENTS x $REQUESTS requests of $ROWS row(s) (saturation: $SAT_CLIENTS clients, $SAT_ROWS" \
    "row(s)), $ENCODING, instances $INSTANCES per GPU, max batch $MAX_BATCH, delay $DELAY_US us," \
    "extra flags: ${SERVE_FLAGS:-none}"
  printf '%-18s %-24s %7s %11s %11s %9s %9s %10s %s\n' model config clients "requests/s" "rows/s" "p50 ms" \
    "p99 ms" "mean batch" "ok/wrong/failed/lost"
} > "$summary"

# Starts a server with the given flags, runs the load test, stops the server: run NAME MODEL CLIENTS ROWS FLAGS...
run() {
  local name=$1 model=$2 clients=$3 rows=$4; shift 4
  local log="$OUT/$name.server.log" port="" pid rc served
  served=${name%%__*}
  # shellcheck disable=SC2086
  cnnrt serve "$model" --name "$served" --host 127.0.0.1 --port 0 "$@" ${SERVE_FLAGS:-} > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do  # up to 10 minutes of planning and tuning before it listens
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] && break
    kill -0 $pid 2> /dev/null || break
    sleep 1
  done
  if [ -z "$port" ]; then
    echo "$name: the server did not start; $log says:" | tee -a "$summary"
    tail -5 "$log" | tee -a "$summary"
    kill $pid 2> /dev/null; wait $pid 2> /dev/null
    return
  fi
  python3 scripts/load_test.py --url "http://127.0.0.1:$port" --model "$served" --onnx "$model" \
    --clients "$clients" --requests "$REQUESTS" --rows "$rows" --encoding "$ENCODING" --distinct "$DISTINCT" \
    --json "$OUT/$name.json" --reference-cache "$OUT/reference" \
    > "$OUT/$name.load.txt" 2>&1
  cat "$OUT/$name.load.txt"
  kill -TERM $pid; wait $pid; rc=$?
  [ $rc -eq 0 ] || echo "$name: the server exited with status $rc after SIGTERM" | tee -a "$summary"
  python3 - "$OUT/$name.json" "$name" "$served" "$clients" >> "$summary" <<'PY'
import json, sys
path, name, model, clients = sys.argv[1:]
try:
    s = json.load(open(path))
except (OSError, ValueError):
    print("%-18s %-24s no result (see %s)" % (model, name.split("__")[-1], path.replace(".json", ".load.txt")))
    sys.exit()
print("%-18s %-24s %7s %11.0f %11.0f %9.3f %9.3f %10.1f %d/%d/%d/%d" % (
    model, name.split("__")[-1], clients, s["requests_per_s"], s["rows_per_s"], s["p50_ms"], s["p99_ms"],
    s["mean_batch"], s["ok"], s["wrong"], s["failed"], s["lost"]))
PY
}

ratio() {  # ratio LABEL NUMERATOR.json DENOMINATOR.json
  python3 - "$@" >> "$summary" <<'PY'
import json, sys
label, a, b = sys.argv[1:]
try:
    x, y = json.load(open(a)), json.load(open(b))
    print("  %s: throughput %.2fx, p99 %.3f ms against %.3f ms" % (label, x["requests_per_s"] / y["requests_per_s"],
                                                                 x["p99_ms"], y["p99_ms"]))
except (OSError, ValueError, ZeroDivisionError) as e:
    print("  %s: no ratio (%s)" % (label, e))
PY
}

for model in "$@"; do
  m=$(basename "$model" .onnx)
  [ "$m" = model ] && m=$(basename "$(dirname "$model")")
  # Every client's keep-alive connection holds an HTTP thread: give one to each, and some to spare.
  threads=$(( (CLIENTS > SAT_CLIENTS ? CLIENTS : SAT_CLIENTS) + 64 ))
  common=(--instances "$INSTANCES" --max-queue-delay-us "$DELAY_US" --http-threads "$threads")
  if [ "$ONE_GPU" != 0 ]; then
    run "${m}__gpu0_dynamic_b$MAX_BATCH" "$model" "$CLIENTS" "$ROWS" --gpus 0 --max-batch "$MAX_BATCH" "${common[@]}"
    run "${m}__gpu0_max_batch_1" "$model" "$CLIENTS" "$ROWS" --gpus 0 --max-batch "$ROWS" "${common[@]}"
    ratio "$m: dynamic batching / --max-batch $ROWS (no merging), one GPU, $CLIENTS clients" \
      "$OUT/${m}__gpu0_dynamic_b$MAX_BATCH.json" "$OUT/${m}__gpu0_max_batch_1.json"
  fi
  if [ "$gpus" -ge 2 ] && [ "$TWO_GPUS" != 0 ]; then
    run "${m}__gpu0_saturated" "$model" "$SAT_CLIENTS" "$SAT_ROWS" --gpus 0 --max-batch "$MAX_BATCH" "${common[@]}"
    run "${m}__gpu01_saturated" "$model" "$SAT_CLIENTS" "$SAT_ROWS" --gpus 0,1 --max-batch "$MAX_BATCH" "${common[@]}"
    ratio "$m: two GPUs / one GPU, $SAT_CLIENTS clients" \
      "$OUT/${m}__gpu01_saturated.json" "$OUT/${m}__gpu0_saturated.json"
  fi
done
echo
cat "$summary"
