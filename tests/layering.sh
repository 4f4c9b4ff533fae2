#!/usr/bin/env bash
# The library's layers, bottom up; a file may include its own folder and the
# layers below, never one above nor a sibling on its level (README, "Layout"):
#   common     base: errors, generator, schedule types, cost model, datatypes and operators, waits, units
#   topology   trees, machines (hwloc), the hierarchy planner
#   algorithms schedule builders (builders/), patterns, registry, schedule files,
#              the verifier and the simulator, timelines
#   plan       hierarchy composition (leaders, lanes), selection, block autotuning,
#              arrival estimates, the planner and its plan cache
#   transport  links: the node's arena and shared-memory link engine, the
#              direct shared-memory reduce, the MPI link
#   exec       the step executor: one schedule, any links
#   runtime    communicators: thread ranks, MPI processes (set-up, segment, failure)
#   emulator   the emulated cluster: ranks as fibers, virtual clocks
#   tools      experiments, calibration, replay
#   config     configuration (file, environment, explicit) and TeamOptions from it;
#              the decision table: read, written, made from measurements
#   cli mpi    two siblings on top: the copse program; the MPI interposition
#              library (libcopse_mpi.so) and the C API
# bench/ and tests/ sit above all of them. Prints every violation; exit 1 if any.
set -uo pipefail
cd "$(dirname "$0")/.."
layers=(common topology algorithms plan transport exec runtime emulator tools config "cli mpi")
declare -A rank_of  # folder -> its layer's index (a lookup, not a subshell per include)
for i in "${!layers[@]}"; do
  for folder in ${layers[$i]}; do rank_of[$folder]=$i; done
done
bad=0 checked=0
for folder in ${layers[*]}; do
  mine=${rank_of[$folder]}
  while IFS=: read -r file line include; do
    path=${include#*\"}
    path=${path%%\"*}
    target=${path%%/*}
    theirs=${rank_of[$target]:--1}
    checked=$((checked + 1))
    if ((theirs < 0)); then
      echo "layering: $file:$line includes $path, from no known layer"
      bad=$((bad + 1))
    elif ((theirs > mine)); then
      echo "layering: $file:$line ($folder) includes $path ($target, a higher layer)"
      bad=$((bad + 1))
    elif ((theirs == mine)) && [[ $target != "$folder" ]]; then
      echo "layering: $file:$line ($folder) includes $path ($target, a sibling layer)"
      bad=$((bad + 1))
    fi
  done < <(grep -rn --include='*.hpp' --include='*.cpp' --include='*.h' '^#include "' "$folder")
done
echo "layering: $checked includes checked, $bad upward or sideways"
((bad == 0))
