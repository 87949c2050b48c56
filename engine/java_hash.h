/*
** java_hash.h: Java's String.hashCode over UTF-8 text, and the two codes the
** store derives from it (MessageExtBrokerInner.tagsString2tagsCode and
** IndexService's key hash).
*/
#ifndef RMQ_JAVA_HASH_H
#define RMQ_JAVA_HASH_H

#include <stddef.h>
#include <stdint.h>

/* Java String.hashCode over the UTF-16 units of UTF-8 text (U+FFFD for bad sequences). */
int32_t rmq_java_hash(const char *utf8, size_t len);
/* tagsCode of a TAGS value: the Java hash sign-extended; 0 for empty/absent. */
int64_t rmq_tags_code(const char *tags, size_t len);
/* Index key hash of "topic#key": abs(javaHash), Integer.MIN_VALUE -> 0. */
int32_t rmq_index_key_hash(const char *topic, size_t topic_len, const char *key, size_t key_len);

#endif
