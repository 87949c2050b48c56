/*
** registry.h: one engine per store directory per process.
**
** Every connection and table of a process that opens the same directory
** (compared by real path) shares one rmq_store, its threads and its lock.
** The first open starts the store; the last release closes it (a final
** flush, the services joined, `abort` removed). A second open must ask for
** the same settings, or it is an error naming the one that differs; a
** read-only open of a store this process has open for writing shares the
** live store.
*/
#ifndef RMQ_REGISTRY_H
#define RMQ_REGISTRY_H

#include "rmq.h"

/* Open dir (created when writable and missing) or share the process's open store. */
int rmq_registry_open(const char *dir, const rmq_config *cfg, rmq_store **out, rmq_err *err);
/* The live store for dir if this process has it open (a new reference), else NULL. */
rmq_store *rmq_registry_find(const char *dir);
/* Drop a reference; the last one closes the store. */
void rmq_registry_release(rmq_store *s);

#endif
