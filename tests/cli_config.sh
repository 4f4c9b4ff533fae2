#!/usr/bin/env bash
# `copse config`, checked by running the binary: exit codes (0 success, 2 bad
# input with exactly one line on stderr), the precedence
# default < config file < COPSE_* environment < --set, how the config file is
# chosen (--config, COPSE_CONFIG, ./copse.toml), and the --json output.
#
# Run by CTest with COPSE=<path to the copse binary>; by hand:
#   COPSE=build/default/copse bash tests/cli_config.sh

CLI_TEST_NAME=cli_config
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

# Only the variables each check sets: none inherited.
for name in $(compgen -e); do
  case "$name" in COPSE_*) unset "$name" ;; esac
done
cd "$tmp" || exit 1  # no ./copse.toml here unless a check writes one

keys="model.intra_alpha model.intra_beta model.inter_alpha model.inter_beta model.gamma model.ports
model.receive_overhead model.timing model.intra_overhead model.inter_overhead model.intra_gap model.inter_gap
model.nic_beta model.nic_rails model.group_size model.group_alpha model.group_beta hierarchy.grouping hierarchy.max_group hierarchy.form hierarchy.multi_leader hierarchy.node_topology
hierarchy.ranks_per_node collectives.allreduce collectives.reduce collectives.bcast collectives.barrier
collectives.allgather collectives.reduce_scatter collectives.scatter collectives.gather collectives.alltoall
collectives.blocks runtime.wait_timeout runtime.wait_report
runtime.spin mpi.serve mpi.min_bytes mpi.max_bytes mpi.stats mpi.cma mpi.keep_heap mpi.trace mpi.table"

# ------------------------------------------------------------------ help
expect 0 --help && stdout_has "config"
expect 0 config --help && for opt in --config --set --json; do stdout_has "$opt"; done

# ------------------------------------------------------------------ defaults
expect 0 config && stdout_has "config file: none"
for key in $keys; do stdout_has "$key"; done
stdout_has "COPSE_MODEL_INTER_ALPHA"
expect 0 config --json
json_check 'd["config_file"] is None and d["config_file_origin"] is None' "no config file by default"
json_check 'sorted(s) == sorted("""'"$keys"'""".split())' "every key is listed"
json_check 'all(set(v) >= {"value", "text", "env", "type", "source", "source_kind"} for v in s.values())' \
  "every key has value, text, env, type, source, source_kind"
json_check 'all(v["source"] == "default" and v["source_kind"] == "default" for v in s.values())' "all defaults"
json_check 'all(v["env"] == "COPSE_" + k.replace(".", "_").upper() for k, v in s.items())' "variable names"
json_check 's["model.intra_alpha"]["value"] == 2e-7 and s["model.intra_beta"]["value"] == 5e-11' "same-node model"
json_check 's["model.inter_alpha"]["value"] == 1.5e-6 and s["model.inter_beta"]["value"] == 1e-10' "other-node model"
json_check 's["model.gamma"]["value"] == 2.5e-11 and s["model.ports"]["value"] == "bi"' "gamma and ports"
json_check 's["model.receive_overhead"]["value"] == 0 and s["model.inter_alpha"]["text"] == "1.5us"' "times"
json_check 's["hierarchy.grouping"]["value"] == "auto" and s["hierarchy.max_group"]["value"] == 4' "grouping"
json_check 's["hierarchy.multi_leader"]["value"] is False and s["hierarchy.node_topology"]["value"] == ""' "hierarchy"
json_check 's["hierarchy.form"]["value"] == "leader"' "the default form: one leader (one node: the flat selection)"
json_check 's["collectives.allreduce"]["value"] == "dual-root" and s["collectives.blocks"]["value"] == "auto"' \
  "collectives"
json_check 's["runtime.wait_timeout"]["value"] == "none" and s["runtime.wait_report"]["value"] == 60 and s["runtime.spin"]["value"] == 2000' "runtime"
json_check 's["hierarchy.ranks_per_node"]["value"] == 0 and s["collectives.barrier"]["value"] == "dual-root"' \
  "virtual nodes off, barrier algorithm"
json_check 's["collectives.allgather"]["value"] == "binary-tree" and s["collectives.reduce_scatter"]["value"] == "binary-tree"' \
  "allgather and reduce_scatter algorithms"
json_check 's["mpi.serve"]["value"] == "all" and s["mpi.min_bytes"]["value"] == 0 and s["mpi.max_bytes"]["value"] == "none"' \
  "the MPI layer serves everything"
json_check 's["mpi.stats"]["value"] == "" and s["mpi.stats"]["env"] == "COPSE_MPI_STATS" and s["mpi.min_bytes"]["type"] == "SIZE"' \
  "no stats file; COPSE_MPI_STATS"

# ------------------------------------------------------------------ precedence
cat >"$tmp/a.toml" <<'EOF'
[model]
inter_alpha = "2us"
gamma = "30ps"
[collectives]
blocks = 8
[runtime]
spin = 10
EOF
expect 0 config --config "$tmp/a.toml" --json
json_check 'd["config_file"] == "'"$tmp/a.toml"'" and d["config_file_origin"] == "--config"' "--config names the file"
json_check 's["model.inter_alpha"]["value"] == 2e-6 and s["model.inter_alpha"]["source"] == "file '"$tmp/a.toml"'"' \
  "the file overrides the default"
json_check 's["collectives.blocks"]["value"] == 8 and s["model.intra_alpha"]["source"] == "default"' "others untouched"

expect COPSE_MODEL_INTER_ALPHA=3us COPSE_RUNTIME_SPIN=0 0 config --config "$tmp/a.toml" --json
json_check 's["model.inter_alpha"]["value"] == 3e-6 and s["model.inter_alpha"]["source"] == "env COPSE_MODEL_INTER_ALPHA"' \
  "the environment overrides the file"
json_check 's["runtime.spin"]["value"] == 0 and s["runtime.spin"]["source_kind"] == "env"' "env spin"
json_check 's["model.gamma"]["source_kind"] == "file"' "the file still gives gamma"

expect COPSE_MODEL_INTER_ALPHA=3us 0 config --config "$tmp/a.toml" --set model.inter_alpha=4us \
  --set collectives.blocks=auto --json
json_check 's["model.inter_alpha"]["value"] == 4e-6 and s["model.inter_alpha"]["source"] == "cli"' \
  "--set overrides the environment"
json_check 's["collectives.blocks"]["value"] == "auto" and s["collectives.blocks"]["source_kind"] == "cli"' \
  "--set overrides the file"

expect COPSE_MODEL_INTER_ALPHA=3us 0 config --config "$tmp/a.toml" --set model.inter_alpha=4us
stdout_has "config file: $tmp/a.toml (from --config)"
grep -E '^model\.inter_alpha +4us +COPSE_MODEL_INTER_ALPHA +cli$' "$out" >/dev/null ||
  fail "table row for model.inter_alpha: $(grep inter_alpha "$out")"
grep -E '^model\.gamma +30ps +COPSE_MODEL_GAMMA +file ' "$out" >/dev/null ||
  fail "table row for model.gamma: $(grep gamma "$out")"

# The MPI keys from the environment, and their text accepted back by --set.
expect COPSE_MPI_SERVE=bcast,allreduce COPSE_MPI_MIN_BYTES=1KiB COPSE_MPI_MAX_BYTES=2MB \
  COPSE_MPI_STATS=s.jsonl COPSE_HIERARCHY_RANKS_PER_NODE=2 0 config --json
json_check 's["mpi.serve"]["value"] == "allreduce,bcast" and s["mpi.serve"]["source"] == "env COPSE_MPI_SERVE"' \
  "mpi.serve from the environment, in canonical order"
json_check 's["mpi.min_bytes"]["value"] == 1024 and s["mpi.max_bytes"]["value"] == 2000000' "mpi byte bounds"
json_check 's["mpi.stats"]["value"] == "s.jsonl" and s["hierarchy.ranks_per_node"]["value"] == 2' "stats file, virtual nodes"
expect 0 config --set mpi.serve=allreduce,bcast --set mpi.min_bytes=1024 --set mpi.max_bytes=none --json
json_check 's["mpi.serve"]["source"] == "cli" and s["mpi.max_bytes"]["value"] == "none"' "--set the MPI keys"

# ------------------------------------------------------------------ which file
cat >"$tmp/b.toml" <<'EOF'
runtime.spin = 20
EOF
expect COPSE_CONFIG="$tmp/b.toml" 0 config --json
json_check 'd["config_file"] == "'"$tmp/b.toml"'" and d["config_file_origin"] == "env COPSE_CONFIG"' "COPSE_CONFIG"
json_check 's["runtime.spin"]["value"] == 20' "COPSE_CONFIG's value"
expect COPSE_CONFIG="$tmp/b.toml" 0 config --config "$tmp/a.toml" --json
json_check 's["runtime.spin"]["value"] == 10' "--config beats COPSE_CONFIG"

cp "$tmp/b.toml" "$tmp/copse.toml"
expect 0 config --json
json_check 'd["config_file"] == "./copse.toml" and d["config_file_origin"] == "working directory"' "./copse.toml"
json_check 's["runtime.spin"]["value"] == 20 and s["runtime.spin"]["source"] == "file ./copse.toml"' "./copse.toml value"
expect COPSE_CONFIG= 0 config --json
json_check 'd["config_file"] is None and s["runtime.spin"]["source"] == "default"' "COPSE_CONFIG= reads no file"
expect 0 config --config "" --json
json_check 'd["config_file"] is None' "--config '' reads no file"
rm "$tmp/copse.toml"

# ------------------------------------------------------------------ bad input: exit 2, one line
expect COPSE_MODEL_INTER_ALPHA=fast 2 config &&
  stderr_has 'copse: model.inter_alpha = "fast" (from env COPSE_MODEL_INTER_ALPHA): not a time' &&
  stderr_has "use e.g. 1.5us"
expect COPSE_MODEL_PORTS=both 2 config && stderr_has "model.ports" && stderr_has "env COPSE_MODEL_PORTS"
expect COPSE_HIERARCHY_GROUPING=size:0 2 config && stderr_has "hierarchy.grouping"
expect COPSE_HIERARCHY_MAX_GROUP=0 2 config && stderr_has "hierarchy.max_group"
expect COPSE_HIERARCHY_MULTI_LEADER=maybe 2 config && stderr_has "hierarchy.multi_leader"
expect COPSE_HIERARCHY_FORM=sideways 2 config && stderr_has "hierarchy.form" && stderr_has "multi-leader, lanes or auto"
expect COPSE_HIERARCHY_FORM=lanes 0 config --json
json_check 's["hierarchy.form"]["value"] == "lanes" and s["hierarchy.form"]["source_kind"] == "env"' "the form from the environment"
expect COPSE_COLLECTIVES_ALLREDUCE=nosuch 2 config && stderr_has "collectives.allreduce" &&
  stderr_has "unknown allreduce algorithm 'nosuch'"
expect COPSE_COLLECTIVES_BLOCKS=0 2 config && stderr_has "collectives.blocks"
expect COPSE_RUNTIME_WAIT_TIMEOUT=0 2 config && stderr_has "runtime.wait_timeout"
expect COPSE_RUNTIME_SPIN=-1 2 config && stderr_has "runtime.spin"
expect COPSE_HIERARCHY_RANKS_PER_NODE=-2 2 config && stderr_has "hierarchy.ranks_per_node"
expect COPSE_COLLECTIVES_ALLGATHER=dual-root 2 config && stderr_has "unknown allgather algorithm 'dual-root'"
expect COPSE_MPI_SERVE=allreduce,scan 2 config &&
  stderr_has 'copse: mpi.serve = "allreduce,scan" (from env COPSE_MPI_SERVE): unknown collective "scan"'
expect COPSE_MPI_MAX_BYTES=1XB 2 config && stderr_has "mpi.max_bytes" && stderr_has "use e.g. 64MiB, or none"
expect COPSE_MPI_STAT=x 2 config && stderr_has "did you mean COPSE_MPI_STATS"
expect COPSE_MODEL_GAMA=1ps 2 config && stderr_has "unknown environment variable COPSE_MODEL_GAMA" &&
  stderr_has "did you mean COPSE_MODEL_GAMMA"

printf '[model]\ngama = "1ps"\n' >"$tmp/typo.toml"
expect 2 config --config "$tmp/typo.toml" && stderr_has "unknown key model.gama" && stderr_has "$tmp/typo.toml"
printf '[runtime]\nspin = "many"\n' >"$tmp/value.toml"
expect 2 config --config "$tmp/value.toml" &&
  stderr_has "runtime.spin = \"many\" (from file $tmp/value.toml, line 2)"
printf '[model\n' >"$tmp/broken.toml"
expect 2 config --config "$tmp/broken.toml" && stderr_has "config file $tmp/broken.toml, line 1"
expect 2 config --config "$tmp/missing.toml" && stderr_has "cannot read config file"
expect COPSE_CONFIG="$tmp/missing.toml" 2 config && stderr_has "(from env COPSE_CONFIG)"
expect 2 config --set model.gamma && stderr_has "--set: expected KEY=VALUE"
expect 2 config --set model.gamma=1x && stderr_has 'model.gamma = "1x" (from cli)'
expect 2 config --set model.gama=1ps && stderr_has "unknown key model.gama"
expect 2 config --no-such-flag

# The engine reads the same configuration: a variable changes an emulated
# run's virtual time, a flag beats the variable, and a config file's
# hierarchy settings turn the hierarchy on.
vt() { python3 -c 'import json,sys; print(json.load(sys.stdin)["virtual_time_ps"])'; }
run_args=(emulate --nodes 2 --ranks-per-node 2 --algorithm ring --bytes 1KiB --repetitions 1 --json)
base=$("$COPSE" "${run_args[@]}" | vt)
slow=$(COPSE_MODEL_INTER_ALPHA=5us "$COPSE" "${run_args[@]}" | vt)
flag=$(COPSE_MODEL_INTER_ALPHA=5us "$COPSE" "${run_args[@]}" --inter-alpha 1.5us | vt)
checks=$((checks + 1)); if [[ "$slow" -gt "$base" && "$flag" == "$base" ]]; then :; else
  failures=$((failures + 1)); echo "FAIL emulate precedence: base $base, env $slow, env+flag $flag"; fi
printf '[hierarchy]\ngrouping = "size:2"\n' > "$tmp/hier.toml"
grouping=$("$COPSE" "${run_args[@]}" --config "$tmp/hier.toml" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("hierarchy", {}).get("grouping"))')
checks=$((checks + 1)); if [[ "$grouping" == "size:2" ]]; then :; else
  failures=$((failures + 1)); echo "FAIL emulate reads hierarchy.grouping from --config: got $grouping"; fi
COPSE_MODEL_INTER_ALPHA=fast expect 2 algorithms && stderr_has "model.inter_alpha"

finish
