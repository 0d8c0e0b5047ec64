# The Debian package of AON, made by CPack from the install rules of every
# part (packaging/README.md): `bash scripts/package.sh` or, in a configured
# build, `cpack --config build/CPackConfig.cmake`.
#
# Dependencies: the shared libraries the binaries link (HDF5, Open MPI, PMIx,
# libdeflate, libotf2, zlib, libstdc++ ...) are found by dpkg-shlibdeps from the
# ELF files themselves; the rest is named here. CUDA's CUPTI (the agent links
# libcupti.so from the CUDA toolkit, found through its install RUNPATH) comes
# from the CUDA toolkit, which is not a Debian package: not a Depends, said in
# the description.
set(CPACK_GENERATOR DEB)
# cpack installs what the build made: `make install` and cpack do not rebuild
# every target (the test suites) first. scripts/package.sh builds the tools.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)
set(CPACK_PACKAGE_NAME aon)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "AON developers <aon-dev@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "always-on GPU profiler for Slurm and MPI machine-learning jobs")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "always-on GPU profiler for Slurm and MPI machine-learning jobs
 aon run (or srun --aon with the SPANK plugin) profiles every rank of a job
 within a budget of its step time: CUDA activity through CUPTI, NCCL, NVTX,
 PyTorch operators and modules, JAX/XLA, host stacks; one timeline per job,
 Perfetto, OTF2 and JSON exports, and a report that says what to fix.
 .
 GPU capture needs the CUDA toolkit's CUPTI (libcupti.so.13), which the CUDA
 toolkit installs; without a GPU, aon run --source synthetic runs a labeled
 synthetic workload. PyTorch operator ranges need AON's observer built
 against the job's torch (from source); steps and module ranges work
 without it. The SPANK plugin is /usr/lib/aon/aon.so, enabled by a
 line in Slurm's plugstack.conf: optional /usr/lib/aon/aon.so")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The agent's CUPTI: a library of the CUDA toolkit, not of a package.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${CUDAToolkit_LIBRARY_DIR}")
# Everything but the PyTorch operator observer: it is built against one torch
# version and refuses any other (docs/pytorch.md), so a binary package would
# tie every user to the torch of the build machine. Built from source (cmake
# --install installs it), it matches the torch the jobs use.
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};${PROJECT_NAME};Unspecified;/")
# mpirun for multi-rank jobs, Python, numpy and h5py for the reader and the hooks.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "openmpi-bin, python3, python3-numpy, python3-h5py")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-pandas, hdf5-tools")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "slurm-client, otf2-tools")
include(CPack)
