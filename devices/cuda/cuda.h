/* cuda.h - the CUDA device.  For now only a probe that proves the toolchain
 * builds and links; kernels (cuBLAS + one .cu per op family) come later. */
#ifndef GR_CUDA_H
#define GR_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices; 0 when there is no GPU or no driver. */
int cuda_device_count(void);

#ifdef __cplusplus
}
#endif

#endif
