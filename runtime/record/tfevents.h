/* tfevents.h - private to runtime/: TensorBoard event files, written.
 * Knows nothing of sessions: summary.c decides what goes in.
 *
 * An event file is a sequence of TFRecords, each
 *
 *     uint64  length of data, little-endian
 *     uint32  masked CRC-32C of those 8 bytes
 *     data    one tb.Event (runtime/record/tensorboard.proto), protobuf-encoded
 *     uint32  masked CRC-32C of data
 *
 * where masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8.  The first
 * record holds file_version "brain.Event:2"; each later one a summary of
 * scalar values at a step.
 *
 * Records collect in memory and reach the file whole, by write(2), when a
 * flush is due (every TFEV_FLUSH_SECS or TFEV_FLUSH_BYTES) and at
 * tfev_close, so a process killed at any point leaves every record it
 * flushed before, whole.  Only a kill in the middle of a write can cut that
 * write short, leaving a partial last record, which readers (TensorBoard
 * too) stop at. */
#ifndef GR_RUNTIME_TFEVENTS_H
#define GR_RUNTIME_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#define TFEV_FLUSH_SECS  2.0
#define TFEV_FLUSH_BYTES 65536
#define TFEV_HEADER      12 /* length and its CRC */
#define TFEV_FOOTER      4  /* the data's CRC */

typedef struct tfev_writer tfev_writer;

/* CRC-32C (Castagnoli) of n bytes, and its masked form as records hold. */
uint32_t tfev_crc32c(const uint8_t *p, size_t n);
uint32_t tfev_mask(uint32_t crc);

/* Makes folder dir (and its parents) if missing and a new file in it named
 * events.out.tfevents.<unix seconds>.<host>.<pid>.<n>, with its first
 * record written.  NULL with a one-line message in err on failure. */
tfev_writer *tfev_open(const char *dir, char *err, size_t errlen);
/* The file's path. */
const char *tfev_path(const tfev_writer *w);
/* Appends an event: tag = value at step, stamped with the wall clock;
 * flushes when one is due.  0, or -1 with a message when a flush failed. */
int tfev_scalar(tfev_writer *w, const char *tag, int64_t step, float value, char *err,
                size_t errlen);
/* Writes what is pending.  0, or -1 with a message. */
int tfev_flush(tfev_writer *w, char *err, size_t errlen);
/* Writes what is pending and fsyncs the file.  0, or -1 with a message. */
int tfev_sync(tfev_writer *w, char *err, size_t errlen);
/* Flushes and closes; -1 with a message when the last flush failed. */
int tfev_close(tfev_writer *w, char *err, size_t errlen);

#endif
