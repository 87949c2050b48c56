/*
** verify.h: the integrity check of a store (the contract is in rmq.h:
** rmq_verify_files, rmq_store_verify), interface to code in verify.c:
** the names of the kinds of defect it reports.
*/
#ifndef RMQ_VERIFY_H
#define RMQ_VERIFY_H

#include "rmq.h"

#define RMQ_DEFECT_FILE_NAME "file_name"
#define RMQ_DEFECT_FILE_SIZE "file_size"
#define RMQ_DEFECT_CRC "crc"
#define RMQ_DEFECT_LENGTH "length"
#define RMQ_DEFECT_MAGIC "magic"
#define RMQ_DEFECT_BLANK "blank"
#define RMQ_DEFECT_PHY_OFFSET "phy_offset"
#define RMQ_DEFECT_BODY_CODEC "body_codec" /* a compressed body that does not inflate */
#define RMQ_DEFECT_CQ_OFFSET "cq_offset"
#define RMQ_DEFECT_CQ_SIZE "cq_size"
#define RMQ_DEFECT_CQ_TAGS "cq_tags"
#define RMQ_DEFECT_CQ_QUEUE "cq_queue"
#define RMQ_DEFECT_CQ_QUEUE_OFFSET "cq_queue_offset"
#define RMQ_DEFECT_CQ_DUPLICATE "cq_duplicate"
#define RMQ_DEFECT_CQ_GAP "cq_gap"
#define RMQ_DEFECT_INDEX_ENTRY "index_entry"
#define RMQ_DEFECT_INDEX_HEADER "index_header"
#define RMQ_DEFECT_INDEX_SLOT "index_slot"
#define RMQ_DEFECT_INDEX_GAP "index_gap"
#define RMQ_DEFECT_CHECKPOINT "checkpoint"
#define RMQ_DEFECT_UNREADABLE "unreadable"
#define RMQ_DEFECT_CONFIG "config"

#endif
