/*
 * copy.h - the byte copy of the shared-memory data paths (rings and slots).
 *
 * glibc's memcpy copies 2 KiB-1 MiB with `rep movsb` on CPUs that report
 * fast string moves (ERMS/FSRM); on the AMD EPYC VMs we run on that is 15-20x
 * slower when the destination sits 8-16 bytes past the source's 64-byte
 * alignment, which is exactly a malloc'd buffer (16 bytes into its page)
 * against a page-aligned ring or slot: 2.3 GB/s instead of 36-45 GB/s for
 * 4-192 KiB (a copy bench on the 2-core VM, 2026-12-01). So areal_comm_copy
 * uses a plain AVX2 loop of unaligned 32-byte loads and stores where the
 * CPU has AVX2 (checked once), and memcpy otherwise and below 1 KiB.
 * Rejected: aligning the destination first and then calling memcpy (the
 * relative misalignment stays, and so does the slow path), copying in
 * memcpy pieces under the rep threshold (still 3-4x slower than the loop),
 * SSE2 16-byte moves only (half the loop's speed), non-temporal stores
 * (the peer reads the data right away, from cache).
 */
#ifndef AREAL_COMM_COPY_H
#define AREAL_COMM_COPY_H

#include <stddef.h>

/* Copies n bytes from src to dst (the ranges must not overlap), as memcpy. */
void areal_comm_copy(void *dst, const void *src, size_t n);

#endif
