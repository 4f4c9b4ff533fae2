! A plain Fortran MPI program, run under LD_PRELOAD=libcopse_mpi.so: MPI's
! collectives through all three Fortran bindings (mpif.h, `use mpi`,
! `use mpi_f08`), in and out of place, blocking, nonblocking (with the request
! calls, copse's requests mixed with the library's point-to-point ones) and
! persistent, each result checked. Open MPI's Fortran bindings call PMPI_
! directly, so only libcopse_mpi.so's own Fortran spellings can serve these
! calls; tests/pmpi/run.sh checks in the stats file that it did: at np >= 2,
! 5 allreduces, 1 reduce, 1 bcast, 1 barrier, 1 scatter, 1 gather and 2
! alltoalls served, and 1 allreduce (MPI_MAXLOC) passed; nonblocking, 4
! allreduces, 1 reduce, 2 bcasts, 4 barriers, 1 allgather, 1
! reduce_scatter_block, 1 scatter, 1 gather, 1 alltoall and one of each
! v-variant served; 1 persistent allreduce, 1 bcast, 1 barrier and 1
! allgatherv served. Stops with
! status 1 on a wrong result.

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

! The nonblocking collectives and the request calls through `use mpi`: each
! start's request completed by MPI_Wait, an MPI_Test loop, MPI_Waitall (with
! point-to-point requests of the library among copse's), MPI_Waitany and
! MPI_Testall; real statuses and the ignore constants. Buffers are
! ASYNCHRONOUS: written behind the compiler's back until the wait.
subroutine nonblocking_use_mpi(failures)
  use mpi
  implicit none
  integer, intent(inout) :: failures
  integer :: ierr, rank, size, i, req, reqs(4), left, right, index, done, status(MPI_STATUS_SIZE)
  integer :: statuses(MPI_STATUS_SIZE, 4), which(4)
  integer, asynchronous :: x(4), y(4), token, got, mine
  integer, allocatable, asynchronous :: all(:), part(:)
  double precision, asynchronous :: d(3), e(3)
  logical :: flag
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  left = mod(rank + size - 1, size)
  right = mod(rank + 1, size)
  ! MPI_Iallreduce, a message meanwhile (its MPI_Wait's status is real), MPI_Wait
  ! (a collective's status: MPI leaves its fields undefined)
  x = rank + 1
  y = -1
  call MPI_IALLREDUCE(x, y, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  if (ierr /= MPI_SUCCESS .or. req == MPI_REQUEST_NULL) failures = failures + 1
  got = -1
  token = 500 + rank
  call MPI_IRECV(got, 1, MPI_INTEGER, left, 7, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_ISEND(token, 1, MPI_INTEGER, right, 7, MPI_COMM_WORLD, reqs(2), ierr)
  status = -7
  call MPI_WAIT(reqs(1), status, ierr)
  if (ierr /= MPI_SUCCESS .or. reqs(1) /= MPI_REQUEST_NULL .or. got /= 500 + left) failures = failures + 1
  if (status(MPI_SOURCE) /= left .or. status(MPI_TAG) /= 7) failures = failures + 1
  call MPI_WAIT(reqs(2), MPI_STATUS_IGNORE, ierr)
  call MPI_WAIT(req, status, ierr)
  if (ierr /= MPI_SUCCESS .or. req /= MPI_REQUEST_NULL .or. any(y /= size * (size + 1) / 2)) failures = failures + 1
  ! MPI_Ibcast from the last rank, completed by an MPI_Test loop
  if (rank == size - 1) then
    d = (/ 1.5d0, -2d0, 3.25d0 /)
  else
    d = 0d0
  end if
  call MPI_IBCAST(d, 3, MPI_DOUBLE_PRECISION, size - 1, MPI_COMM_WORLD, req, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_TEST(req, flag, MPI_STATUS_IGNORE, ierr)
    if (ierr /= MPI_SUCCESS) exit
  end do
  if (req /= MPI_REQUEST_NULL .or. any(d /= (/ 1.5d0, -2d0, 3.25d0 /))) failures = failures + 1
  call MPI_IBARRIER(MPI_COMM_WORLD, req, ierr)
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  if (ierr /= MPI_SUCCESS .or. req /= MPI_REQUEST_NULL) failures = failures + 1
  ! Four outstanding, two of them the library's: MPI_Waitall, real statuses
  allocate(all(size))
  all = -1
  token = 1000 + rank
  got = -1
  d = dble(rank)
  call MPI_IALLREDUCE(d, e, 3, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_IRECV(got, 1, MPI_INTEGER, left, 5, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_ISEND(token, 1, MPI_INTEGER, right, 5, MPI_COMM_WORLD, reqs(3), ierr)
  mine = rank * 2
  call MPI_IALLGATHER(mine, 1, MPI_INTEGER, all, 1, MPI_INTEGER, MPI_COMM_WORLD, reqs(4), ierr)
  call MPI_WAITALL(4, reqs, statuses, ierr)
  if (ierr /= MPI_SUCCESS .or. any(reqs /= MPI_REQUEST_NULL)) failures = failures + 1
  if (any(e /= dble(size - 1)) .or. got /= 1000 + left) failures = failures + 1
  if (any(all /= (/ (2 * i, i = 0, size - 1) /))) failures = failures + 1
  if (statuses(MPI_SOURCE, 2) /= left .or. statuses(MPI_TAG, 2) /= 5) failures = failures + 1
  ! MPI_Ireduce to the last rank and MPI_Ireduce_scatter_block, each found by MPI_Waitany
  allocate(part(size))
  part = (/ (rank + i, i = 1, size) /)
  x = rank
  y = -1
  token = -1
  call MPI_IREDUCE(x, y, 4, MPI_INTEGER, MPI_SUM, size - 1, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_IREDUCE_SCATTER_BLOCK(part, token, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(2), ierr)
  done = 0
  do i = 1, 3
    call MPI_WAITANY(2, reqs, index, status, ierr)
    if (ierr /= MPI_SUCCESS) exit
    if (index == MPI_UNDEFINED) exit
    if (index < 1 .or. index > 2 .or. reqs(index) /= MPI_REQUEST_NULL) failures = failures + 1
    done = done + 1
  end do
  if (done /= 2 .or. index /= MPI_UNDEFINED) failures = failures + 1
  if (rank == size - 1 .and. any(y /= size * (size - 1) / 2)) failures = failures + 1
  ! block `rank` of everyone's part: sum over q of (q + rank + 1)
  if (token /= size * (size - 1) / 2 + size * (rank + 1)) failures = failures + 1
  ! MPI_Testall over copse's and the library's, MPI_STATUSES_IGNORE
  got = -1
  token = 2000 + rank
  call MPI_IRECV(got, 1, MPI_INTEGER, left, 6, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_IBARRIER(MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_ISEND(token, 1, MPI_INTEGER, right, 6, MPI_COMM_WORLD, reqs(3), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_TESTALL(3, reqs, flag, MPI_STATUSES_IGNORE, ierr)
    if (ierr /= MPI_SUCCESS) exit
  end do
  if (any(reqs(1:3) /= MPI_REQUEST_NULL) .or. got /= 2000 + left) failures = failures + 1
  ! MPI_Waitsome until none is active (indices from 1, each once), then
  ! MPI_Request_get_status (which frees nothing), and MPI_Wait
  x = 1
  y = -1
  call MPI_IBARRIER(MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_IALLREDUCE(x, y, 4, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(2), ierr)
  done = 0
  do i = 1, 100000
    call MPI_WAITSOME(2, reqs, index, which, statuses, ierr)
    if (ierr /= MPI_SUCCESS .or. index == MPI_UNDEFINED) exit
    done = done + sum(which(1:index))
  end do
  if (done /= 3 .or. any(reqs(1:2) /= MPI_REQUEST_NULL) .or. any(y /= size)) failures = failures + 1
  d = 0d0
  if (rank == 0) d = 7d0
  call MPI_IBCAST(d, 3, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, req, ierr)
  ! (once: Open MPI 4.1's own MPI_Request_get_status never completes an MPI_Ibcast)
  call MPI_REQUEST_GET_STATUS(req, flag, MPI_STATUS_IGNORE, ierr)
  if (ierr /= MPI_SUCCESS .or. req == MPI_REQUEST_NULL) failures = failures + 1
  call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
  if (req /= MPI_REQUEST_NULL .or. any(d /= 7d0)) failures = failures + 1
  deallocate(all, part)
end subroutine

! The nonblocking collectives that move blocks, through `use mpi`:
! MPI_Iscatter from the last rank (block q is 10 q), MPI_Igather to it and
! MPI_Ialltoall (the block for rank q is 100 rank + q), one MPI_Waitall.
subroutine nonblocking_blocks_use_mpi(failures)
  use mpi
  implicit none
  integer, intent(inout) :: failures
  integer :: ierr, rank, size, i, reqs(3)
  integer, asynchronous :: got, mine
  integer, allocatable, asynchronous :: all(:), part(:), sent(:), gathered(:)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  allocate(all(size), part(size), sent(size), gathered(size))
  sent = (/ (10 * i, i = 0, size - 1) /)
  part = (/ (100 * rank + i, i = 0, size - 1) /)
  all = -1
  gathered = -1
  got = -1
  mine = 3 * rank
  call MPI_ISCATTER(sent, 1, MPI_INTEGER, got, 1, MPI_INTEGER, size - 1, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_IGATHER(mine, 1, MPI_INTEGER, gathered, 1, MPI_INTEGER, size - 1, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_IALLTOALL(part, 1, MPI_INTEGER, all, 1, MPI_INTEGER, MPI_COMM_WORLD, reqs(3), ierr)
  call MPI_WAITALL(3, reqs, MPI_STATUSES_IGNORE, ierr)
  if (ierr /= MPI_SUCCESS .or. any(reqs(1:3) /= MPI_REQUEST_NULL) .or. got /= 10 * rank) failures = failures + 1
  if (rank == size - 1 .and. any(gathered /= (/ (3 * i, i = 0, size - 1) /))) failures = failures + 1
  if (any(all /= (/ (100 * i + rank, i = 0, size - 1) /))) failures = failures + 1
  deallocate(all, part, sent, gathered)
end subroutine

! The nonblocking v-variants through `use mpi`, counts unequal: rank q
! contributes q + 1 integers (10 q + j), packed in rank order. MPI_Iallgatherv,
! MPI_Igatherv to the last rank, MPI_Iscatterv from it (block q is 1000 + 10 q
! + j) and MPI_Ialltoallv (q + 1 copies of 100 rank + q for rank q), one
! MPI_Waitall; then MPIX_Allgatherv_init, started twice.
subroutine nonblocking_vector_use_mpi(failures)
  use mpi
  implicit none
  integer, intent(inout) :: failures
  integer :: ierr, rank, size, i, j, total, reqs(4), req, it
  integer, allocatable :: counts(:), displs(:), rcounts(:), rdispls(:), expect(:)
  integer, allocatable, asynchronous :: mine(:), all(:), gathered(:), sent(:), got(:), part(:), back(:)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  total = size * (size + 1) / 2
  allocate(counts(size), displs(size), rcounts(size), rdispls(size), expect(total))
  allocate(mine(rank + 1), all(total), gathered(total), sent(total), got(rank + 1), part(total), back(size * (rank + 1)))
  do i = 0, size - 1
    counts(i + 1) = i + 1
    displs(i + 1) = i * (i + 1) / 2
    rcounts(i + 1) = rank + 1
    rdispls(i + 1) = i * (rank + 1)
    do j = 0, i
      expect(displs(i + 1) + j + 1) = 10 * i + j
      sent(displs(i + 1) + j + 1) = 1000 + 10 * i + j
      part(displs(i + 1) + j + 1) = 100 * rank + i
    end do
  end do
  mine = (/ (10 * rank + j, j = 0, rank) /)
  all = -1
  gathered = -1
  got = -1
  back = -1
  call MPI_IALLGATHERV(mine, rank + 1, MPI_INTEGER, all, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_IGATHERV(mine, rank + 1, MPI_INTEGER, gathered, counts, displs, MPI_INTEGER, size - 1, MPI_COMM_WORLD, &
                    reqs(2), ierr)
  call MPI_ISCATTERV(sent, counts, displs, MPI_INTEGER, got, rank + 1, MPI_INTEGER, size - 1, MPI_COMM_WORLD, &
                     reqs(3), ierr)
  call MPI_IALLTOALLV(part, counts, displs, MPI_INTEGER, back, rcounts, rdispls, MPI_INTEGER, MPI_COMM_WORLD, &
                      reqs(4), ierr)
  call MPI_WAITALL(4, reqs, MPI_STATUSES_IGNORE, ierr)
  if (ierr /= MPI_SUCCESS .or. any(reqs /= MPI_REQUEST_NULL) .or. any(all /= expect)) failures = failures + 1
  if (rank == size - 1 .and. any(gathered /= expect)) failures = failures + 1
  if (any(got /= (/ (1000 + 10 * rank + j, j = 0, rank) /))) failures = failures + 1
  if (any(back /= (/ ((100 * i + rank, j = 0, rank), i = 0, size - 1) /))) failures = failures + 1
  call MPIX_ALLGATHERV_INIT(mine, rank + 1, MPI_INTEGER, all, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, &
                            MPI_INFO_NULL, req, ierr)
  do it = 1, 2
    mine = (/ (10 * rank + j + it, j = 0, rank) /)
    all = -1
    call MPI_START(req, ierr)
    call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
    if (ierr /= MPI_SUCCESS .or. any(all /= expect + it)) failures = failures + 1
  end do
  call MPI_REQUEST_FREE(req, ierr)
  deallocate(counts, displs, rcounts, rdispls, expect, mine, all, gathered, sent, got, part, back)
end subroutine

! A persistent allreduce through mpif.h: planned once by MPIX_ALLREDUCE_INIT
! (Open MPI's pcollreq extension; mpif-ext.h declares no interface), run
! by MPI_START/MPI_STARTALL and MPI_WAIT/MPI_WAITALL; the handle stays until
! MPI_REQUEST_FREE.
subroutine persistent_mpif_h(failures)
  implicit none
  include 'mpif.h'
  integer, intent(inout) :: failures
  integer :: ierr, rank, size, req, reqs(2), it, status(MPI_STATUS_SIZE)
  integer, asynchronous :: x(3), y(3)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, size, ierr)
  call MPIX_ALLREDUCE_INIT(x, y, 3, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, req, ierr)
  if (ierr /= MPI_SUCCESS .or. req == MPI_REQUEST_NULL) failures = failures + 1
  do it = 1, 6
    x = rank + it
    y = -1
    if (it <= 3) then
      call MPI_START(req, ierr)
      call MPI_WAIT(req, status, ierr)
    else
      call MPI_STARTALL(1, req, ierr)
      call MPI_WAITALL(1, req, MPI_STATUSES_IGNORE, ierr)
    end if
    if (ierr /= MPI_SUCCESS .or. req == MPI_REQUEST_NULL) failures = failures + 1
    if (any(y /= size * (size - 1) / 2 + size * it)) failures = failures + 1
  end do
  call MPI_REQUEST_FREE(req, ierr)
  if (ierr /= MPI_SUCCESS .or. req /= MPI_REQUEST_NULL) failures = failures + 1
  ! A persistent bcast from the last rank and a persistent barrier, started together twice
  call MPIX_BCAST_INIT(x, 3, MPI_INTEGER, size - 1, MPI_COMM_WORLD, MPI_INFO_NULL, reqs(1), ierr)
  call MPIX_BARRIER_INIT(MPI_COMM_WORLD, MPI_INFO_NULL, reqs(2), ierr)
  do it = 1, 2
    x = -1
    if (rank == size - 1) x = 10 * it
    call MPI_STARTALL(2, reqs, ierr)
    call MPI_WAITALL(2, reqs, MPI_STATUSES_IGNORE, ierr)
    if (ierr /= MPI_SUCCESS .or. any(x /= 10 * it)) failures = failures + 1
  end do
  call MPI_REQUEST_FREE(reqs(1), ierr)
  call MPI_REQUEST_FREE(reqs(2), ierr)
end subroutine

! The f08 spellings: TYPE(MPI_Request), no IERROR.
subroutine nonblocking_mpi_f08(failures)
  use mpi_f08
  implicit none
  integer, intent(inout) :: failures
  integer :: rank, size
  integer, asynchronous :: x(2), y(2)
  type(MPI_Request) :: req
  type(MPI_Status) :: status
  logical :: flag
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  x = (/ rank, 1 /)
  call MPI_Iallreduce(x, y, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req)
  call MPI_Wait(req, status)
  if (req /= MPI_REQUEST_NULL .or. y(1) /= size * (size - 1) / 2 .or. y(2) /= size) failures = failures + 1
  call MPI_Ibarrier(MPI_COMM_WORLD, req)
  flag = .false.
  do while (.not. flag)
    call MPI_Test(req, flag, MPI_STATUS_IGNORE)
  end do
  if (req /= MPI_REQUEST_NULL) failures = failures + 1
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
  call nonblocking_use_mpi(failures)
  call nonblocking_blocks_use_mpi(failures)
  call nonblocking_vector_use_mpi(failures)
  call persistent_mpif_h(failures)
  call nonblocking_mpi_f08(failures)
  if (failures > 0) print *, 'rank', rank, ':', failures, 'wrong results'
  call MPI_FINALIZE(ierr)
  if (failures > 0) stop 1
end program
