! A Fortran program (TestFortran): 3 allreduces of 100 double precision
! values and a broadcast of 10 from rank 1, through the mpi module.
program f
  use mpi
  implicit none
  integer :: ierr, rank, n, i
  double precision :: a(100), b(100)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  a = 1
  do i = 1, 3
    call MPI_Allreduce(a, b, 100, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  end do
  call MPI_Bcast(a, 10, MPI_DOUBLE_PRECISION, 1, MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program f
