! The mpi_f08 module's calls (TestFortran, wantFortran08 in
! fortran_test.go), on 3 ranks: Open MPI's mpi_f08 calls other entry
! points than mpif.h and `use mpi` do. Change both together.
program calls08
  use mpi_f08
  implicit none
  integer :: rank, n, left, right
  type(MPI_Request) :: req, reqs(2)
  type(MPI_Status) :: st
  type(MPI_Comm) :: sub
  double precision :: a(100), b(100), g(300)
  logical :: flag

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, n)
  left = mod(rank + n - 1, n)
  right = mod(rank + 1, n)

  a = rank + 1
  call MPI_Allreduce(a, b, 100, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  b = a
  call MPI_Allreduce(MPI_IN_PLACE, b, 100, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  if (b(1) /= n * (n + 1) / 2) call fail('allreduce in place')
  call MPI_Bcast(a, 10, MPI_DOUBLE_PRECISION, 1, MPI_COMM_WORLD)
  a = rank + 1
  if (rank == 0) then
    g(1:2) = 7
    call MPI_Gather(MPI_IN_PLACE, 2, MPI_DOUBLE_PRECISION, g, 2, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD)
    if (g(1) /= 7 .or. g(3) /= 2) call fail('gather in place')
  else
    call MPI_Gather(a, 2, MPI_DOUBLE_PRECISION, g, 2, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD)
  end if
  call MPI_Iallreduce(a, b, 10, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, req)
  flag = .false.
  do while (.not. flag)
    call MPI_Test(req, flag, MPI_STATUS_IGNORE)
  end do

  a = rank
  call MPI_Irecv(b, 30, MPI_DOUBLE_PRECISION, left, 21, MPI_COMM_WORLD, reqs(1))
  call MPI_Isend(a, 30, MPI_DOUBLE_PRECISION, right, 21, MPI_COMM_WORLD, reqs(2))
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
  call MPI_Sendrecv(a, 10, MPI_DOUBLE_PRECISION, right, 7, b, 10, MPI_DOUBLE_PRECISION, left, 7, &
                    MPI_COMM_WORLD, st)
  if (st%MPI_SOURCE /= left .or. b(1) /= left) call fail('sendrecv')

  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, sub)
  call MPI_Allreduce(a, b, 1, MPI_DOUBLE_PRECISION, MPI_SUM, sub)
  call MPI_Comm_free(sub)
  call MPI_Barrier(MPI_COMM_WORLD)
  call MPI_Finalize()

contains

  subroutine fail(what)
    character(len=*), intent(in) :: what
    print *, 'calls_f08.f90: ', what, ' is wrong on rank ', rank
    call MPI_Abort(MPI_COMM_WORLD, 1)
  end subroutine fail
end program calls08
