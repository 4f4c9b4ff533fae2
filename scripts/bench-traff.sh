#!/usr/bin/env bash
# Träff 2021's comparison (his Table 2, issue 10 item 4), twice:
#
#  1. under the model (copse study traff, tools/study_traff.hpp), for his
#     36 x 8 = 288 ranks, at his element counts (MPI_INT, 4 bytes each):
#       native          the MPI library's allreduce, which the model cannot know: the
#                       best of recursive-doubling, rabenseifner and ring (named)
#       reduce+bcast    binomial reduce, then binomial bcast (sum of the two times)
#       tree            binary-tree (his User-Allreduce1), blocks of 16000 elements
#                       (his choice: ceil(count / 16000) blocks) and --blocks auto
#       dual            dual-root (User-Allreduce2), the same two block choices
#     and the ratios tree / dual: his analysis predicts 4/3 for large counts
#     (beta terms 4 beta m against 3 beta m), he measured 1.14;
#  2. under mpirun on this machine (bench/traff_compare.cpp, mpicroscope
#     method): the MPI library's MPI_Allreduce, MPI_Reduce + MPI_Bcast, and
#     copse's binary-tree and dual-root with both block choices, on NP
#     processes in virtual nodes of K (COPSE_HIERARCHY_RANKS_PER_NODE=K; K = 1:
#     the algorithms run flat over every process, as in the paper).
#
#   scripts/bench-traff.sh [--build DIR] [--np P] [--vn K,K,...] [--counts N,N,...]
#                          [--sim-only | --mpi-only] [--seconds S]
#
# Defaults: --build build/release (built here with the release preset when it
# is that), --np 8, --vn 1,2, the model at every count of his Table 2, mpirun
# at 0, 1, 25, 250, 2500, 25000, 250000, 2500000. Part 1's model is the
# configuration's (COPSE_MODEL_*, copse.toml: copse study traff --model config).
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/release np=8 vns=1,2 seconds=0.25 sim=1 mpi=1
counts=0,1,25,250,2500,25000,250000,2500000
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --vn) vns=$2; shift 2 ;;
    --counts) counts=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --sim-only) mpi=0; shift ;;
    --mpi-only) sim=0; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "bench-traff.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ $build == build/release ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target copse_cli traff_compare >/dev/null
fi

if [[ $sim -eq 1 ]]; then
  echo "== Model: 36 x 8 = 288 ranks (copse study traff), MPI_INT counts, times in us =="
  # The study's table (tools/study_traff.hpp) at every count of his Table 2,
  # under the configuration's model; its data and plot go to study-traff/.
  "$build/copse" study traff --nodes 36 --ranks-per-node 8 --model config --out study-traff
fi

if [[ $mpi -eq 1 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  for k in ${vns//,/ }; do
    echo
    echo "== mpirun -np $np, virtual nodes of $k (COPSE_HIERARCHY_RANKS_PER_NODE=$k) =="
    mpirun --oversubscribe --bind-to none --mca btl self,vader --mca mpi_yield_when_idle 1 -np "$np" \
      -x COPSE_HIERARCHY_RANKS_PER_NODE="$k" "$build/traff_compare" --counts "$counts" --seconds "$seconds"
  done
fi
