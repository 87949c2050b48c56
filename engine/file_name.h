/*
** file_name.h: the names of the store's files (UtilAll.offset2FileName for
** CommitLog and ConsumeQueue segments, UtilAll.timeMillisToHumanString for
** index files).
*/
#ifndef RMQ_FILE_NAME_H
#define RMQ_FILE_NAME_H

#include <stdint.h>

/* 20-digit zero-padded start offset, as CommitLog and ConsumeQueue files are named. */
void rmq_file_name(int64_t offset, char out[21]);
/* Parse such a name; returns 0, or -1 unless exactly 20 decimal digits. */
int rmq_file_name_parse(const char *name, int64_t *offset);
/* yyyyMMddHHmmssSSS of a ms timestamp in local time (index file names). */
void rmq_index_file_name(int64_t ms, char out[18]);

#endif
