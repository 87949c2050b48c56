/*
** file_name.h: the names of the store's files (UtilAll.offset2FileName for
** CommitLog and ConsumeQueue segments, UtilAll.timeMillisToHumanString for
** index files).
*/
#ifndef RMQ_FILE_NAME_H
#define RMQ_FILE_NAME_H

#include <stdint.h>

#include "rmq.h" /* rmq_file_name */

/* Parse such a name; returns 0, or -1 unless exactly 20 decimal digits. */
int rmq_file_name_parse(const char *name, int64_t *offset);
/* yyyyMMddHHmmssSSS of a ms timestamp in local time (index file names). */
void rmq_index_file_name(int64_t ms, char out[18]);

/*
** Create <store_dir>/damaged/<UTC time> (yyyyMMddTHHmmss.SSS), where recovery
** and a repair move what they take out of the store, never to be deleted by
** it; out receives its path. RMQ_EIO names the directory that could not be
** made.
*/
int rmq_damaged_dir_make(const char *store_dir, char *out, size_t cap, rmq_err *err);

#endif
