/*
** damaged.h: <store>/damaged/, where recovery and rocketmq_repair set aside
** what they take out of a store: a damaged commit-log tail, and consume-queue
** and index files rebuilt from the log. Nothing there is read again; it is
** kept for whoever wants to look at what was damaged.
*/
#ifndef RMQ_DAMAGED_H
#define RMQ_DAMAGED_H

#include <stddef.h>
#include <stdint.h>

#include "rmq.h"

/*
** Create <store>/damaged/<UTC time yyyymmddThhmmss.mmm> into out (cap
** bytes). Errors: RMQ_EIO naming the directory.
*/
int rmq_damaged_dir(const char *store, char *out, size_t cap, rmq_err *err);

/*
** Rename dir/name to damaged_dir/sub/name (sub's directories made as
** needed, e.g. "consumequeue/T/0"), adding the file's size to *moved when
** moved is not NULL. Errors: RMQ_EIO naming both paths.
*/
int rmq_damaged_move(const char *dir, const char *name, const char *damaged_dir, const char *sub,
                     int64_t *moved, rmq_err *err);

#endif
