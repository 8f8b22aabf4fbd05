/* cuda_host.h - what tests built on the CUDA stand-in (tests/cuda_host.cmake
 * defines GR_TEST_CUDA_HOST for them) may ask it, from C. */
#ifndef CUDA_HOST_H
#define CUDA_HOST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cudaGraphLaunch calls so far, in this process. */
uint64_t cuda_host_graph_launches(void);

#ifdef __cplusplus
}
#endif

#endif
