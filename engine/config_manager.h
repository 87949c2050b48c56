/*
** config_manager.h: ConfigManager's persist and load of a config file
** (<store>/config/<name>.json), as MixAll.string2File and
** ConfigManager.load do it, made durable.
**
** persist writes <path>.tmp and fsyncs it, copies the old <path> to
** <path>.bak (fsync), renames .tmp over <path> and fsyncs the directory:
** after a crash at any point <path> holds the old text or the new one,
** and <path>.bak the text before. load reads <path>, or <path>.bak when
** <path> is missing, empty, unreadable or rejected by the parser. All file
** I/O but mkdir and rename goes through io.h. Errors name the path.
*/
#ifndef RMQ_CONFIG_MANAGER_H
#define RMQ_CONFIG_MANAGER_H

#include <stdbool.h>
#include <stddef.h>

#include "config_json.h"
#include "rmq.h"

/* A config file larger than this is treated as damaged rather than read. */
#define RMQ_CONFIG_MAX_SIZE (256 << 20)

/*
** Write text to <path>.tmp (fsync), copy the old <path> to <path>.bak (fsync;
** an empty old file is not copied, so that it never wipes a useful .bak),
** rename .tmp over <path>, fsync the directory. Creates the directory (e.g.
** <store>/config) when missing. RMQ_EINVAL: path NULL, empty or too long
** for ".tmp" and ".bak" to be added. RMQ_EIO: a call failed, named with the
** file and errno ("cannot fsync config/x.json.tmp: Input/output error");
** <path> then still holds its old text, except when the directory's fsync
** failed: the new text is in place but may not survive a crash.
** RMQ_ECORRUPT: the old <path> is larger than RMQ_CONFIG_MAX_SIZE, so it
** cannot be kept in .bak. RMQ_ENOMEM. Persists of one path must not run at once (they share .tmp):
** RocketMQ's ConfigManager.persist is synchronized too.
*/
int rmq_config_persist(const char *path, const char *text, size_t len, rmq_err *err);

/*
** Checks text and applies it to ctx; returns RMQ_OK, RMQ_ECORRUPT when the
** text is damaged (load then tries <path>.bak), or another code that load
** returns at once. The rmq_*_parse functions of config_json.h fit.
*/
typedef int (*rmq_config_parse_fn)(void *ctx, const char *text, size_t len, rmq_err *err);
enum { RMQ_CONFIG_NONE, RMQ_CONFIG_FILE, RMQ_CONFIG_BAK };

/*
** Load <path>, or <path>.bak when <path> is missing, empty, unreadable or
** parse returns RMQ_ECORRUPT for it. *from says which: RMQ_CONFIG_FILE,
** RMQ_CONFIG_BAK, or RMQ_CONFIG_NONE when parse never succeeded.
** Returns RMQ_OK with RMQ_CONFIG_NONE when neither file exists or both are
** empty (a new store). Otherwise a file that exists but cannot be used is an
** error, never an empty result: RMQ_ECORRUPT (text that parse rejects, or
** larger than RMQ_CONFIG_MAX_SIZE) or RMQ_EIO (a read failed), with the
** path and parse's message, and the .bak's problem after it; parse's other
** codes as they are; RMQ_EINVAL (path NULL, empty or too long); RMQ_ENOMEM.
** parse is called at most twice (the file, then the .bak): a parse that fails
** must leave ctx as it was (the rmq_*_parse functions do).
*/
int rmq_config_load(const char *path, rmq_config_parse_fn parse, void *ctx, int *from,
                    rmq_err *err);

/*
** The whole of <path>, malloc'd and NUL-terminated, in *text (NULL when the
** file does not exist). RMQ_EIO (named), RMQ_ECORRUPT (larger than
** RMQ_CONFIG_MAX_SIZE), RMQ_ENOMEM.
*/
int rmq_config_read(const char *path, char **text, size_t *len, rmq_err *err);

/*
** Damage, for rocketmq_verify and rocketmq_repair. A file a store cannot do
** without (consumerOffset.json, delayOffset.json) is never replaced by an
** empty table on its own: a damaged copy is reported, and moved aside only
** by a repair, which keeps what still reads.
*/

/* How one copy (<path> or <path>.bak) reads. */
typedef enum rmq_config_state {
  RMQ_CONFIG_ABSENT, /* missing or empty: load passes over it */
  RMQ_CONFIG_SOUND,
  RMQ_CONFIG_DAMAGED /* the parser rejects it, or it cannot be read (damage.at -1) */
} rmq_config_state;

typedef struct rmq_config_copy {
  rmq_config_state state;
  int64_t size;             /* its bytes */
  rmq_config_damage damage; /* DAMAGED: where it breaks (-1: unreadable as a whole) and why */
} rmq_config_copy;

/*
** Reads a text as far as it goes into ctx: RMQ_OK for a damaged text too,
** *d saying where it breaks. The rmq_*_salvage functions of config_json.h fit.
*/
typedef int (*rmq_config_salvage_fn)(void *ctx, const char *text, size_t len, rmq_config_damage *d,
                                     rmq_err *err);

/*
** How <path> and <path>.bak read, each through salvage into ctx, the .bak
** first so that the entries of <path> replace its .bak's. RMQ_EINVAL (a
** bad path), RMQ_ENOMEM, salvage's other codes.
*/
int rmq_config_examine(const char *path, rmq_config_salvage_fn salvage, void *ctx,
                       rmq_config_copy *file, rmq_config_copy *bak, rmq_err *err);
/*
** Whether the copies need a repair: <path> is damaged (load then reads the
** .bak), or missing with a damaged .bak (load fails). A damaged .bak beside a
** sound file is not: load never reads it, and the next persist replaces it.
*/
bool rmq_config_needs_repair(const rmq_config_copy *file, const rmq_config_copy *bak);
/*
** Rename each damaged copy into damaged_dir, made under store_dir first
** when it is "" (rmq_damaged_dir), add its size to *moved and sync both
** directories. RMQ_EIO names what could not be moved.
*/
int rmq_config_set_aside(const char *store_dir, const char *path, const rmq_config_copy *file,
                         const rmq_config_copy *bak, char *damaged_dir, size_t cap, int64_t *moved,
                         rmq_err *err);
/* Append to err's message how to repair a damaged config file of store_dir. */
void rmq_config_repair_hint(rmq_err *err, const char *store_dir);

#endif
