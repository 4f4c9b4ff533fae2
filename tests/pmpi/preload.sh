# Sourced by the scripts that run test programs under libcopse_mpi.so
# ($PMPI_LIB): what their MPI processes preload. Built with AddressSanitizer
# (the asan preset), libcopse_mpi.so needs the sanitizer's runtime loaded
# before everything else, and the programs are built without it: the
# runtime goes first. Open MPI's own allocations, never freed by design, are
# not ours to report. Sets `preload` (for LD_PRELOAD) and `asan` (the
# runtime's path; empty without the sanitizer).
preload=$PMPI_LIB
asan=$(ldd "$PMPI_LIB" | awk '/libasan/ { print $3 }')
if [[ -n $asan ]]; then
  preload="$asan $PMPI_LIB"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
