! A plain Fortran MPI program, run under LD_PRELOAD=libcopse_mpi.so: MPI's
! collectives through all three Fortran bindings (mpif.h, `use mpi`,
! `use mpi_f08`), in and out of place, each result checked. Open MPI's
! Fortran bindings call PMPI_ directly, so only libcopse_mpi.so's own Fortran
! spellings can serve these calls; tests/pmpi/run.sh checks in the stats file
! that it did: at np >= 2, 5 allreduces, 1 reduce, 1 bcast, 1 barrier, 1
! scatter, 1 gather and 2 alltoalls served, and 1 allreduce (MPI_MAXLOC) passed. Stops with status 1 on a wrong result.

subroutine with_mpif_h(failures)
  implicit none
  include 'mpif.h'
  integer, intent(inout) :: failures
  integer :: ierr, rank, size, x(3), y(3), i
  integer, allocatable :: all(:)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  x = rank + 1
  call MPI_ALLREDUCE(x, y, 3, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (ierr /= MPI_SUCCESS .or. any(y /= size * (size + 1) / 2)) failures = failures + 1
  call MPI_ALLREDUCE(MPI_IN_PLACE, x, 3, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (ierr /= MPI_SUCCESS .or. any(x /= size)) failures = failures + 1
  ! scatter from the last rank: block q is (100 q, 100 q + 1)
  allocate(all(2 * size))
  do i = 0, size - 1
    all(2 * i + 1) = 100 * i
    all(2 * i + 2) = 100 * i + 1
  end do
  x = -1
  call MPI_SCATTER(all, 2, MPI_INTEGER, x, 2, MPI_INTEGER, size - 1, MPI_COMM_WORLD, ierr)
  if (ierr /= MPI_SUCCESS .or. x(1) /= 100 * rank .or. x(2) /= 100 * rank + 1) failures = failures + 1
  deallocate(all)
end subroutine

subroutine with_use_mpi(failures)
  use mpi
  implicit none
  integer, intent(inout) :: failures
  integer :: ierr, rank, size, dup, i, j, pair(2), best(2)
  integer, allocatable :: g(:)
  double precision :: d(5), e(5)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  do i = 1, 5
    d(i) = dble(rank + i) / 3d0
  end do
  call MPI_ALLREDUCE(d, e, 5, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  do i = 1, 5
    if (abs(e(i) - dble(size * i + size * (size - 1) / 2) / 3d0) > 1d-12) failures = failures + 1
  end do
  ! a root other than 0
  call MPI_REDUCE(d, e, 5, MPI_DOUBLE_PRECISION, MPI_MAX, size - 1, MPI_COMM_WORLD, ierr)
  if (rank == size - 1 .and. abs(e(1) - dble(size) / 3d0) > 1d-12) failures = failures + 1
  i = rank * 10
  call MPI_BCAST(i, 1, MPI_INTEGER, size - 1, MPI_COMM_WORLD, ierr)
  if (i /= (size - 1) * 10) failures = failures + 1
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  ! gather to the last rank, in place there
  allocate(g(size))
  g = -1
  j = 3 * rank
  if (rank == size - 1) then
    g(rank + 1) = j
    call MPI_GATHER(MPI_IN_PLACE, 0, MPI_INTEGER, g, 1, MPI_INTEGER, size - 1, MPI_COMM_WORLD, ierr)
    if (ierr /= MPI_SUCCESS .or. any(g /= (/ (3 * i, i = 0, size - 1) /))) failures = failures + 1
  else
    call MPI_GATHER(j, 1, MPI_INTEGER, g, 1, MPI_INTEGER, size - 1, MPI_COMM_WORLD, ierr)
  end if
  deallocate(g)
  ! a duplicate, freed through the Fortran binding
  call MPI_COMM_DUP(MPI_COMM_WORLD, dup, ierr)
  i = 1
  call MPI_ALLREDUCE(MPI_IN_PLACE, i, 1, MPI_INTEGER, MPI_SUM, dup, ierr)
  if (i /= size) failures = failures + 1
  call MPI_COMM_FREE(dup, ierr)
  if (dup /= MPI_COMM_NULL) failures = failures + 1
  ! passed to the MPI library: MPI_MAXLOC on pairs
  pair = (/ mod(rank * 7, 5), rank /)
  call MPI_ALLREDUCE(pair, best, 1, MPI_2INTEGER, MPI_MAXLOC, MPI_COMM_WORLD, ierr)
  if (ierr /= MPI_SUCCESS .or. best(1) /= maxval((/ (mod(i * 7, 5), i = 0, size - 1) /))) failures = failures + 1
end subroutine

subroutine with_mpi_f08(failures)
  use mpi_f08
  implicit none
  integer, intent(inout) :: failures
  integer :: rank, size, i, j
  real :: r(4)
  integer, allocatable :: s(:), t(:), c(:), d(:), g(:)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  r = real(rank + 1)
  ! no ierror: the optional argument arrives as a null pointer
  call MPI_Allreduce(MPI_IN_PLACE, r, 4, MPI_REAL, MPI_SUM, MPI_COMM_WORLD)
  if (any(r /= real(size * (size + 1) / 2))) failures = failures + 1
  ! alltoall: rank q's block for rank d is 100 q + d; out of place, then in place
  allocate(s(size), t(size))
  s = (/ (100 * rank + i, i = 0, size - 1) /)
  call MPI_Alltoall(s, 1, MPI_INTEGER, t, 1, MPI_INTEGER, MPI_COMM_WORLD)
  if (any(t /= (/ (100 * i + rank, i = 0, size - 1) /))) failures = failures + 1
  call MPI_Alltoall(MPI_IN_PLACE, 0, MPI_INTEGER, s, 1, MPI_INTEGER, MPI_COMM_WORLD)
  if (any(s /= t)) failures = failures + 1
  deallocate(s, t)
  ! allgatherv: rank q contributes q + 1 integers of value q, packed in rank order
  allocate(s(rank + 1), c(size), d(size), g(size * (size + 1) / 2))
  s = rank
  c = (/ (i + 1, i = 0, size - 1) /)
  d = (/ (i * (i + 1) / 2, i = 0, size - 1) /)
  call MPI_Allgatherv(s, rank + 1, MPI_INTEGER, g, c, d, MPI_INTEGER, MPI_COMM_WORLD)
  if (any(g /= (/ ((i, j = 0, i), i = 0, size - 1) /))) failures = failures + 1
  deallocate(s, c, d, g)
end subroutine

program fortran_collectives
  use mpi
  implicit none
  integer :: ierr, failures, rank
  failures = 0
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call with_mpif_h(failures)
  call with_use_mpi(failures)
  call with_mpi_f08(failures)
  if (failures > 0) print *, 'rank', rank, ':', failures, 'wrong results'
  call MPI_FINALIZE(ierr)
  if (failures > 0) stop 1
end program
