#!/usr/bin/env bash
# Build bench/mpi/mpi_allreduce with Debian's Open MPI and run it over TCP on
# loopback. NP sets the rank count (default 4); arguments go to the benchmark,
# e.g.  NP=2 bench/mpi/run-mpi.sh -b 8 -e 64M -f 2 -n 20 -w 5
set -euo pipefail
cd "$(dirname "$0")"

mpicc -O2 -o mpi_allreduce mpi_allreduce.c

# The btl options only bind if the ob1 PML is chosen. No "--mca pml ob1" is
# needed here: Debian's /etc/openmpi/openmpi-mca-params.conf excludes the ucx
# PML and the ofi MTL, and cm finds no other MTL, so ob1 is the only PML left
# (checked with ompi_info and --mca pml_base_verbose 10; every peer goes over
# the tcp BTL, which without "--mca btl tcp,self" would be vader instead).
mpirun --allow-run-as-root --oversubscribe \
    --mca btl tcp,self --mca btl_tcp_if_include lo \
    -np "${NP:-4}" ./mpi_allreduce "$@"
