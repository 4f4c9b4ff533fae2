#!/usr/bin/env bash
# Träff 2021's comparison (his Table 2, issue 10 item 4), twice:
#
#  1. under the model (copse sim), for his 36 x 8 = 288 ranks (8 per node:
#     --ranks-per-node 8), at his element counts (MPI_INT, so 4 bytes each):
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
# at 0, 1, 25, 250, 2500, 25000, 250000, 2500000. Model options for part 1
# come from COPSE_MODEL_* (copse sim reads the configuration).
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/release np=8 vns=1,2 seconds=0.25 sim=1 mpi=1
counts=0,1,25,250,2500,25000,250000,2500000
table_counts=0,1,2,8,15,21,25,87,150,212,250,875,1500,2125,2500,8750,15000,21250,25000,87500,150000,212500,250000,875000,1500000,2125000,2500000,4597152,6694304,8388608
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --np) np=$2; shift 2 ;;
    --vn) vns=$2; shift 2 ;;
    --counts) counts=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --sim-only) mpi=0; shift ;;
    --mpi-only) sim=0; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "bench-traff.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ $build == build/release ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target copse_cli traff_compare >/dev/null
fi

if [[ $sim -eq 1 ]]; then
  echo "== Model: 36 x 8 = 288 ranks (copse sim --ranks-per-node 8), MPI_INT counts, times in us =="
  python3 - "$build/copse" "$table_counts" <<'EOF'
import json, subprocess, sys
copse, counts = sys.argv[1], [int(c) for c in sys.argv[2].split(",")]
def sim(alg, count, blocks, collective="allreduce", extra=()):
    out = subprocess.run([copse, "sim", "--collective", collective, "--algorithm", alg, "--ranks", "288",
                          "--ranks-per-node", "8", "--bytes", str(4 * count), "--blocks", str(blocks), "--json", *extra],
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return j["time"] * 1e6, j["blocks"]
print(f"{'count':>9} {'native (model)':>26} {'reduce+bcast':>13} {'tree 16000':>16} {'dual 16000':>16} "
      f"{'tree auto':>16} {'dual auto':>16} {'t/d 16000':>9} {'t/d auto':>9}")
ratio = lambda a, b: a / b if b > 0 else float("nan")
for n in counts:
    native = min((sim(a, n, 1)[0], a) for a in ("recursive-doubling", "rabenseifner", "ring"))
    rb = sim("binomial", n, 1, "reduce")[0] + sim("binomial", n, 1, "bcast")[0]
    paper = max(1, -(-n // 16000))
    tp, bp = sim("binary-tree", n, paper)
    dp, _ = sim("dual-root", n, paper)
    ta, bta = sim("binary-tree", n, "auto")
    da, bda = sim("dual-root", n, "auto")
    print(f"{n:>9} {native[0]:>12.2f} {native[1]:>13} {rb:>13.2f} {tp:>9.2f} (b={bp:<3}) {dp:>9.2f} (b={bp:<3})"
          f" {ta:>9.2f} (b={bta:<3}) {da:>9.2f} (b={bda:<3}) {ratio(tp, dp):>9.3f} {ratio(ta, da):>9.3f}", flush=True)
# The beta term alone: no combine cost (gamma 0), the largest count, auto blocks.
n = counts[-1]
ta0, _ = sim("binary-tree", n, "auto", extra=["--gamma", "0"])
da0, _ = sim("dual-root", n, "auto", extra=["--gamma", "0"])
print(f"gamma 0 at {n}: tree {ta0:.2f} us, dual {da0:.2f} us, tree/dual {ratio(ta0, da0):.3f} "
      f"(the 4/3 of the beta terms, less the latency terms)")
EOF
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
