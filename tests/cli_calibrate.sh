#!/usr/bin/env bash
# `copse calibrate`, checked by running the binary: a quick calibration of
# this machine writes a model file that the configuration loads (every key
# from the file, with the measured values), every figure it prints is
# positive and finite, and bad input exits 2 with one line, before anything
# is measured. With CALIBRATE_MPI and MPIRUN_SCRIPT set (the CTest test
# "mpi: copse_calibrate_mpi np 2"), the same for the MPI part: two processes
# on virtual nodes add inter_alpha and inter_beta to the file.
#
# Run by CTest with COPSE=<path to the copse binary>; by hand:
#   COPSE=build/default/copse bash tests/cli_calibrate.sh

CLI_TEST_NAME=cli_calibrate
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cd "$tmp"  # no ./copse.toml of the caller's

# Every measured figure positive and finite (JSON has no inf or nan: they
# would be null), and every model key's value the number its text says. A fit's
# coefficient may be 0 only where the fit says it clamped it (a busy machine can
# leave the small messages as slow as the large ones: CI runs two tests at a
# time), and then the tool has said so on stderr; the times themselves are
# always positive.
fit_ok='all(0 <= x < 1 for l in d["levels"] for x in (l["ping_pong"]["alpha"], l["ping_pong"]["beta"], l["stream"]["beta"], l["ping_pong"]["alpha_spread"]["min"], l["ping_pong"]["beta_spread"]["median"])) and all(p["alpha"] + p["beta"] > 0 and (p["clamped"] or (p["alpha"] > 0 and p["beta"] > 0)) for l in d["levels"] for p in [l["ping_pong"]])'
figures_ok="$fit_ok"' and all(g["gamma"] > 0 and g["gamma"] < 1e-6 and g["gamma_spread"]["min"] > 0 for g in d["gamma"]) and all(all(0 < t["min"] <= t["median"] <= t["max"] < 1 for t in l["ping_pong"]["sizes"] + l["stream"]["sizes"]) for l in d["levels"])'
clamps_said() {
  local clamped
  clamped=$(python3 -c 'import json, sys; print(sum(l["ping_pong"]["clamped"] for l in json.load(open(sys.argv[1]))["levels"]))' "$out")
  checks=$((checks + 1))
  [[ $(grep -c "warning: the ping-pong fit of level" "$err") == "$clamped" ]] ||
    fail "$clamped clamped fits, but stderr says: $(head -c 300 "$err")"
}

model="$tmp/model.toml"
if [[ -z "${CALIBRATE_MPI:-}" ]]; then
  expect 0 calibrate --help && for opt in --output --repetitions --max-bytes --quick --json --config; do
    stdout_has "$opt"
  done

  # Bad input: exit 2, one line, nothing written.
  expect 2 calibrate --quick --repetitions 0 --output "$model" && stderr_has "--repetitions"
  expect 2 calibrate --quick --max-bytes 8 --output "$model" && stderr_has "--max-bytes"
  expect 2 calibrate --quick --max-bytes 4XB --output "$model" && stderr_has "--max-bytes"
  expect 2 calibrate --quick --output ""
  expect 2 calibrate --quick --bogus
  echo "[model]" >"$tmp/mine.toml"
  expect 2 calibrate --quick --output "$tmp/mine.toml" && stderr_has "not written by copse calibrate"
  grep -qx "\[model\]" "$tmp/mine.toml" || fail "a file copse calibrate did not write was changed"
  [[ -e "$model" ]] && fail "bad input wrote $model"

  # A quick calibration, in JSON.
  start=$(date +%s%N)
  expect 0 calibrate --quick --output "$model" --json
  elapsed_ms=$((($(date +%s%N) - start) / 1000000))
  json_check "$figures_ok" "every figure positive and finite"
  clamps_said
  json_check 'len(d["gamma"]) == 12 and {(g["op"], g["dtype"]) for g in d["gamma"]} == {(o, t) for o in ("sum", "max", "prod") for t in ("int32", "int64", "float", "double")}' "gamma for sum, max, prod over four types"
  json_check 'd["quick"] and d["repetitions"] == 3 and d["output"].endswith("model.toml")'
  json_check 'all([t["bytes"] for t in l[k]["sizes"]] == [8, 32, 128, 512, 2048, 8192, 32768, 131072, 262144] for l in d["levels"] for k in ("ping_pong", "stream"))' "quick sizes: 8 B to 256 KiB"
  json_check 'abs(d["model"]["gamma"]["value"] - sum(sorted(g["gamma"] for g in d["gamma"])[5:7]) / 2) < 1e-15' "gamma: the kernels' median"
  # Levels: one per pair of cores the machine has (none on a single core),
  # each named, and the model keys of the roles they got.
  json_check 'len(d["levels"]) + len(d["not_measured"]) == 4' "every level measured or said to be missing"
  json_check 'len(d["levels"]) == 0 or any(l["role"] == "intra" for l in d["levels"])'
  json_check '("intra_alpha" in d["model"]) == (len(d["levels"]) > 0) and ("group_size" in d["model"]) == (len(d["levels"]) > 1)'
  json_check '("timing" in d["model"]) == (len(d["levels"]) > 0) and d["model"].get("timing", {"text": "hockney"})["text"] == "hockney"' "Hockney figures"
  json_check 'all(abs(d["model"][r + "_alpha"]["value"] - l["ping_pong"]["alpha"]) < 1e-10 and abs(d["model"][r + "_beta"]["value"] - l["ping_pong"]["beta"]) < 1e-14 for l in d["levels"] if l["role"] for r in [l["role"]])' "model values are the ping-pong fits"
  ((elapsed_ms < 20000)) || fail "a quick calibration took ${elapsed_ms} ms"
  cp "$out" "$tmp/calibration.json"

  # The file loads through the configuration: every written key from the file,
  # with the value calibrate reported.
  head -1 "$model" | grep -q "^# copse calibrate" || fail "model file lacks its header: $(head -1 "$model")"
  expect 0 config --config "$model" --json
  json_check 's["model.gamma"]["source_kind"] == "file" and s["model.gamma"]["value"] > 0' "gamma from the file"
  python3 - "$tmp/calibration.json" "$out" <<'EOF' || fail "copse config does not read back every key calibrate wrote"
import json, sys
cal, conf = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["settings"]
for key, entry in cal["model"].items():
    s = conf["model." + key]
    assert s["source_kind"] == "file", (key, s)
    if key == "timing":
        assert s["value"] == entry["value"] == "hockney", (key, s, entry)
    else:
        assert abs(s["value"] - entry["value"]) <= 1e-12 * max(1, abs(entry["value"])), (key, s, entry)
EOF
  checks=$((checks + 1))
  # The human report: each level's figures with spread, the kernels, the file.
  expect 0 calibrate --quick --max-bytes 4KiB --output "$model"
  stdout_has "ping-pong: alpha"
  stdout_has "min "
  stdout_has "residual"
  stdout_has "gamma"
  stdout_has "model file $model"
  # sim reads the model from it.
  expect 0 sim --config "$model" --algorithm ring --ranks 4 --ranks-per-node 4 --bytes 1MiB --json
else
  # The MPI part: copse calibrate first, then two processes add the inter-node level.
  : "${MPIRUN_SCRIPT:?set MPIRUN_SCRIPT to tests/mpi/mpirun.sh}"
  expect 0 calibrate --quick --max-bytes 1KiB --output "$model"
  checks=$((checks + 1))
  if ! bash "$MPIRUN_SCRIPT" 2 "$CALIBRATE_MPI" --quick --output "$model" --json >"$out" 2>"$err"; then
    fail "mpirun -np 2 copse_calibrate_mpi failed: $(head -c 600 "$err")"
  else
    json_check "$figures_ok" "every figure positive and finite"
    clamps_said
    json_check 'd["levels"][0]["role"] == "inter" and d["levels"][0]["level"] == "network" and set(d["model"]) == {"inter_alpha", "inter_beta", "timing"}'
    cp "$out" "$tmp/calibration.json"
    expect 0 config --config "$model" --json
    json_check 's["model.inter_alpha"]["source_kind"] == "file" and s["model.inter_beta"]["source_kind"] == "file"'
    json_check 's["model.gamma"]["source_kind"] == "file"' "copse calibrate's keys kept"
    python3 - "$tmp/calibration.json" "$out" <<'EOF' || fail "copse config does not read back the inter-node keys"
import json, sys
cal, conf = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["settings"]
for key, entry in cal["model"].items():
    if key != "timing":
        assert abs(conf["model." + key]["value"] - entry["value"]) <= 1e-12 * max(1, abs(entry["value"])), key
EOF
    checks=$((checks + 1))
  fi
  # Bad input under mpirun: exit 2 from every process, one message.
  checks=$((checks + 1))
  bash "$MPIRUN_SCRIPT" 2 "$CALIBRATE_MPI" --quick --repetitions 0 --output "$model" >"$out" 2>"$err"
  rc=$?
  [[ $rc -eq 2 ]] || fail "copse_calibrate_mpi --repetitions 0 exited $rc, expected 2"
  grep -q "copse_calibrate_mpi: .*--repetitions" "$err" || fail "no message naming --repetitions: $(head -c 400 "$err")"
fi
finish
