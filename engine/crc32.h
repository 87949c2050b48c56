/*
** crc32.h: CRC-32 (IEEE, the CRC of java.util.zip.CRC32 and zlib) of message
** bodies, as BODYCRC stores it masked. Folded with carry-less
** multiply on x86-64 CPUs that have it, table-driven elsewhere; both give the
** same value.
*/
#ifndef RMQ_CRC32_H
#define RMQ_CRC32_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Inputs shorter than this never take the folding path. */
#define RMQ_CRC32_FOLD_MIN 64

/* CRC-32 of len bytes, continuing from crc (0 to start), as zlib's crc32(). */
uint32_t rmq_crc32_update(uint32_t crc, const void *bytes, size_t len);
uint32_t rmq_crc32(const void *bytes, size_t len);
/* Whether this CPU takes the folding path (tests report which one ran). */
bool rmq_crc32_folds(void);

#endif
