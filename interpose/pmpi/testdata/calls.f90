! Every MPI call this program makes is known: interpose/pmpi's TestFortran
! records it on 3 ranks, built with MPICH's and with Open MPI's compiler,
! and compares each rank's events with wantFortran in fortran_test.go, one
! by one. Change both together. It checks what it receives, so that a
! call the library passed on wrongly (a Fortran sentinel taken for a
! buffer) fails here.
program calls
  use mpi
  implicit none
  integer :: ierr, rank, n, i, left, right
  integer :: st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 2)
  integer :: req, reqs(2), idx, outcount, idxs(2), msg
  integer :: counts(0:15), displs(0:15), rcounts(0:15), rdispls(0:15)
  integer :: wcounts(0:15), wdispls(0:15), wtypes(0:15)
  integer :: sub, dup, dup2, evens, inter, merged, wgroup, egroup, t, color
  integer :: blocks(1)
  integer(kind=MPI_ADDRESS_KIND) :: addr(1)
  integer :: ia(8), ib(8), evenranks(2)
  double precision :: a(100), b(100), g(300), h(300)
  double precision, volatile :: v(4) ! changed at MPI_BOTTOM, where the compiler cannot see
  logical :: flag

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  if (n /= 3) call fail('run on 3 ranks')
  left = mod(rank + n - 1, n)
  right = mod(rank + 1, n)
  do i = 0, n - 1
    counts(i) = i + 1
    displs(i) = i * (i + 1) / 2
    rcounts(i) = rank + 1
    rdispls(i) = i * (rank + 1)
    wcounts(i) = 2
    wdispls(i) = 8 * i
    wtypes(i) = MPI_INTEGER
  end do

  ! World collectives, sequence numbers 0-18.
  a = rank + 1
  call MPI_Allreduce(a, b, 100, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (b(100) /= 6) call fail('allreduce')
  b = a
  call MPI_Allreduce(MPI_IN_PLACE, b, 100, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (b(1) /= 6) call fail('allreduce in place')
  call MPI_Bcast(a, 10, MPI_DOUBLE_PRECISION, 1, MPI_COMM_WORLD, ierr)
  if (a(10) /= 2) call fail('bcast')
  ia = rank
  call MPI_Reduce(ia, ib, 8, MPI_INTEGER, MPI_SUM, 2, MPI_COMM_WORLD, ierr)
  if (rank == 2 .and. ib(8) /= 3) call fail('reduce')
  call MPI_Allgather(a, 4, MPI_DOUBLE_PRECISION, g, 4, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  call MPI_Allgatherv(a, rank + 1, MPI_DOUBLE_PRECISION, g, counts, displs, MPI_DOUBLE_PRECISION, &
                      MPI_COMM_WORLD, ierr)
  a = rank + 1
  if (rank == 0) then
    g(1:2) = 7
    call MPI_Gather(MPI_IN_PLACE, 2, MPI_DOUBLE_PRECISION, g, 2, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
    if (g(1) /= 7 .or. g(3) /= 2 .or. g(6) /= 3) call fail('gather in place')
  else
    call MPI_Gather(a, 2, MPI_DOUBLE_PRECISION, g, 2, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  end if
  call MPI_Gatherv(a, rank + 1, MPI_DOUBLE_PRECISION, g, counts, displs, MPI_DOUBLE_PRECISION, 0, &
                   MPI_COMM_WORLD, ierr)
  call MPI_Scatter(g, 3, MPI_DOUBLE_PRECISION, a, 3, MPI_DOUBLE_PRECISION, 1, MPI_COMM_WORLD, ierr)
  call MPI_Scatterv(g, counts, displs, MPI_DOUBLE_PRECISION, a, rank + 1, MPI_DOUBLE_PRECISION, 1, &
                    MPI_COMM_WORLD, ierr)
  call MPI_Reduce_scatter_block(g, a, 5, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Reduce_scatter(g, a, counts, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Alltoall(g, 2, MPI_DOUBLE_PRECISION, h, 2, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  do i = 0, n - 1
    h(2 * i + 1) = 100 * rank + i
  end do
  ! In place: the send count and type are not read.
  call MPI_Alltoall(MPI_IN_PLACE, 2, MPI_INTEGER, h, 2, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  do i = 0, n - 1
    if (h(2 * i + 1) /= 100 * i + rank) call fail('alltoall in place')
  end do
  call MPI_Alltoallv(g, counts, displs, MPI_DOUBLE_PRECISION, h, rcounts, rdispls, MPI_DOUBLE_PRECISION, &
                     MPI_COMM_WORLD, ierr)
  call MPI_Alltoallw(ia, wcounts, wdispls, wtypes, ib, wcounts, wdispls, wtypes, MPI_COMM_WORLD, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Scan(a, b, 7, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Exscan(a, b, 7, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)

  ! Non-blocking collectives, 19-25, completed by each completion call.
  call MPI_Iallreduce(a, b, 100, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, st, ierr)
  call MPI_Ibcast(a, 50, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, req, ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Test(req, flag, MPI_STATUS_IGNORE, ierr)
  end do
  if (req /= MPI_REQUEST_NULL) call fail('test left the request')
  call MPI_Ibarrier(MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Iallgather(a, 4, MPI_DOUBLE_PRECISION, g, 4, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call MPI_Ialltoallw(ia, wcounts, wdispls, wtypes, ib, wcounts, wdispls, wtypes, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Waitany(1, reqs, idx, st, ierr)
  if (idx /= 1) call fail('waitany index')
  call MPI_Ireduce(a, b, 10, MPI_DOUBLE_PRECISION, MPI_SUM, 1, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Waitsome(1, reqs, outcount, idxs, MPI_STATUSES_IGNORE, ierr)
  if (outcount /= 1 .or. idxs(1) /= 1) call fail('waitsome')
  b(1:5) = 1
  call MPI_Iallreduce(MPI_IN_PLACE, b, 5, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, reqs(1), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Testany(1, reqs, idx, flag, st, ierr)
  end do
  if (b(5) /= 3) call fail('iallreduce in place')

  ! Point-to-point on the world.
  a = rank
  call MPI_Sendrecv(a, 100, MPI_DOUBLE_PRECISION, right, 7, b, 100, MPI_DOUBLE_PRECISION, left, 7, &
                    MPI_COMM_WORLD, st, ierr)
  if (st(MPI_SOURCE) /= left .or. b(1) /= left) call fail('sendrecv')
  if (rank == 0) then
    call MPI_Send(a, 10, MPI_DOUBLE_PRECISION, 1, 11, MPI_COMM_WORLD, ierr)
    call MPI_Ssend(a, 20, MPI_DOUBLE_PRECISION, 2, 12, MPI_COMM_WORLD, ierr)
  else if (rank == 1) then
    call MPI_Recv(b, 100, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, st, ierr)
    if (st(MPI_SOURCE) /= 0 .or. st(MPI_TAG) /= 11) call fail('recv status')
  else
    call MPI_Recv(b, 20, MPI_DOUBLE_PRECISION, 0, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  end if
  call MPI_Irecv(b, 30, MPI_DOUBLE_PRECISION, left, 21, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(a, 30, MPI_DOUBLE_PRECISION, right, 21, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, sts, ierr)
  if (sts(MPI_SOURCE, 1) /= left .or. sts(MPI_TAG, 1) /= 21) call fail('waitall statuses')
  call MPI_Irecv(b, 6, MPI_DOUBLE_PRECISION, left, 32, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(a, 6, MPI_DOUBLE_PRECISION, right, 32, MPI_COMM_WORLD, reqs(2), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Testall(2, reqs, flag, sts, ierr)
  end do
  call MPI_Isend(a, 5, MPI_DOUBLE_PRECISION, right, 33, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Recv(b, 5, MPI_DOUBLE_PRECISION, left, 33, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  outcount = 0
  do while (outcount == 0)
    call MPI_Testsome(1, reqs, outcount, idxs, MPI_STATUSES_IGNORE, ierr)
  end do
  call MPI_Isend(a, 7, MPI_DOUBLE_PRECISION, right, 35, MPI_COMM_WORLD, req, ierr)
  call MPI_Request_free(req, ierr)
  call MPI_Recv(b, 7, MPI_DOUBLE_PRECISION, left, 35, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call MPI_Sendrecv_replace(a, 4, MPI_DOUBLE_PRECISION, right, 36, left, 36, MPI_COMM_WORLD, st, ierr)

  ! MPI_BOTTOM: four doubles at their absolute address.
  do i = 1, 4
    v(i) = 1000 * rank + i
  end do
  blocks(1) = 4
  call MPI_Get_address(v, addr(1), ierr)
  call MPI_Type_create_hindexed(1, blocks, addr, MPI_DOUBLE_PRECISION, t, ierr)
  call MPI_Type_commit(t, ierr)
  call MPI_Sendrecv(MPI_BOTTOM, 1, t, right, 37, b, 4, MPI_DOUBLE_PRECISION, left, 37, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
  if (b(4) /= 1000 * left + 4) call fail('send from MPI_BOTTOM')
  call MPI_Bcast(MPI_BOTTOM, 1, t, 0, MPI_COMM_WORLD, ierr)
  if (v(3) /= 3) call fail('bcast at MPI_BOTTOM')
  call MPI_Type_free(t, ierr)

  ! Matched probes.
  if (rank == 0) then
    call MPI_Send(a, 9, MPI_DOUBLE_PRECISION, 1, 38, MPI_COMM_WORLD, ierr)
    call MPI_Send(a, 3, MPI_DOUBLE_PRECISION, 2, 39, MPI_COMM_WORLD, ierr)
  else if (rank == 1) then
    call MPI_Mprobe(0, 38, MPI_COMM_WORLD, msg, st, ierr)
    call MPI_Mrecv(b, 9, MPI_DOUBLE_PRECISION, msg, st, ierr)
    if (st(MPI_TAG) /= 38 .or. msg /= MPI_MESSAGE_NULL) call fail('mrecv')
  else
    flag = .false.
    do while (.not. flag)
      call MPI_Improbe(0, 39, MPI_COMM_WORLD, flag, msg, st, ierr)
    end do
    call MPI_Imrecv(b, 3, MPI_DOUBLE_PRECISION, msg, req, ierr)
    call MPI_Wait(req, st, ierr)
    if (st(MPI_SOURCE) /= 0) call fail('imrecv')
  end if

  ! Communicators: even and odd world ranks, in reverse order (27).
  color = mod(rank, 2)
  call MPI_Comm_split(MPI_COMM_WORLD, color, -rank, sub, ierr)
  call MPI_Allreduce(a, b, 10, MPI_DOUBLE_PRECISION, MPI_SUM, sub, ierr)
  call MPI_Comm_dup(sub, dup, ierr)
  call MPI_Barrier(dup, ierr)
  call MPI_Comm_idup(sub, dup2, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call MPI_Barrier(dup2, ierr)
  call MPI_Comm_free(dup2, ierr)
  if (dup2 /= MPI_COMM_NULL) call fail('comm_free')
  ! The even ranks (28).
  call MPI_Comm_group(MPI_COMM_WORLD, wgroup, ierr)
  evenranks = (/ 0, 2 /)
  call MPI_Group_incl(wgroup, 2, evenranks, egroup, ierr)
  call MPI_Comm_create(MPI_COMM_WORLD, egroup, evens, ierr)
  if (evens /= MPI_COMM_NULL) then
    b(1) = 1
    call MPI_Allreduce(MPI_IN_PLACE, b, 1, MPI_DOUBLE_PRECISION, MPI_SUM, evens, ierr)
    if (b(1) /= 2) call fail('allreduce on the evens')
    call MPI_Comm_free(evens, ierr)
  end if
  call MPI_Group_free(egroup, ierr)
  call MPI_Group_free(wgroup, ierr)
  ! The two halves joined: the evens' leader is world rank 2, the odds' 1.
  if (color == 0) then
    call MPI_Intercomm_create(sub, 0, MPI_COMM_WORLD, 1, 99, inter, ierr)
  else
    call MPI_Intercomm_create(sub, 0, MPI_COMM_WORLD, 2, 99, inter, ierr)
  end if
  call MPI_Intercomm_merge(inter, color == 1, merged, ierr)
  call MPI_Allreduce(a, b, 2, MPI_DOUBLE_PRECISION, MPI_SUM, merged, ierr)
  call MPI_Comm_free(merged, ierr)
  call MPI_Comm_free(inter, ierr)
  call MPI_Comm_free(dup, ierr)
  call MPI_Comm_free(sub, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)

contains

  subroutine fail(what)
    character(len=*), intent(in) :: what
    integer :: e
    print *, 'calls.f90: ', what, ' is wrong on rank ', rank
    call MPI_Abort(MPI_COMM_WORLD, 1, e)
  end subroutine fail
end program calls
