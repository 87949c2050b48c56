-- mqadmin.sql: the mqadmin commands of Apache RocketMQ 4.9 that read a
-- store, each answered by one query on the rocketmq table `mq` and its
-- companion tables. The queries take the store directory as the parameter
-- :dir and the command's options as parameters (:topic, :msgid, ...); an
-- option left unset is NULL. docs/mqadmin.md quotes each query, and
-- test/mqadmin.test runs them.
--
-- Here they read, read-only, a copy named store of the store Apache
-- RocketMQ 4.9.7 wrote in test/golden/store-normal (see its MANIFEST.md).
-- A broker keeps its consumers' offsets in config/consumerOffset.json,
-- which the golden store lacks: the copy gets one for a group GroupX.
.load build/rocketmq
.mode box
.shell rm -rf build/mqadmin && mkdir -p build/mqadmin && cp -R test/golden/store-normal build/mqadmin/store
.cd build/mqadmin
.output /dev/null
SELECT writefile('store/config/consumerOffset.json',
                 '{"offsetTable":{"TopicA@GroupX":{0:2,1:2,2:0,3:1}}}');
.output
CREATE VIRTUAL TABLE mq USING rocketmq(dir='store', readonly=1);
.parameter set :dir store

-- mqadmin queryMsgById -i C000020A00002A9F00000000000000C3
.parameter set :msgid "'C000020A00002A9F00000000000000C3'"
-- queryMsgById
SELECT msg_id AS offset_id, topic, tags, keys, queue_id, queue_offset, commitlog_offset,
       reconsume_times, born_timestamp, store_timestamp, born_host, store_host, sys_flag,
       properties, body,
       (SELECT group_concat(o."group") FROM rocketmq_consumer_offsets(:dir) o
         WHERE o.topic = m.topic AND o.queue_id = m.queue_id AND o.offset > m.queue_offset)
         AS consumed_by
  FROM mq m WHERE msg_id = :msgid;

-- mqadmin queryMsgByKey -t TopicA -k k1
.parameter set :topic TopicA
.parameter set :key k1
-- queryMsgByKey
SELECT coalesce(uniq_key, msg_id) AS message_id, queue_id, queue_offset
  FROM mq WHERE topic = :topic AND key = :key ORDER BY commitlog_offset;

-- mqadmin queryMsgByUniqueKey -t TopicA -i C000020110922F2A1B3C000000650001
.parameter set :uniqkey "'C000020110922F2A1B3C000000650001'"
-- queryMsgByUniqueKey
SELECT msg_id AS offset_id, topic, tags, keys, queue_id, queue_offset, commitlog_offset,
       reconsume_times, born_timestamp, store_timestamp, born_host, store_host, sys_flag,
       properties, body,
       (SELECT group_concat(o."group") FROM rocketmq_consumer_offsets(:dir) o
         WHERE o.topic = m.topic AND o.queue_id = m.queue_id AND o.offset > m.queue_offset)
         AS consumed_by
  FROM mq m WHERE topic = :topic AND uniq_key = :uniqkey
 ORDER BY store_timestamp, commitlog_offset LIMIT 1;

-- mqadmin queryMsgByOffset -t TopicA -b broker-a -i 0 -o 3
.parameter set :queue_id 0
.parameter set :offset 3
-- queryMsgByOffset
SELECT msg_id AS offset_id, topic, tags, keys, queue_id, queue_offset, commitlog_offset,
       reconsume_times, born_timestamp, store_timestamp, born_host, store_host, sys_flag,
       properties, body,
       (SELECT group_concat(o."group") FROM rocketmq_consumer_offsets(:dir) o
         WHERE o.topic = m.topic AND o.queue_id = m.queue_id AND o.offset > m.queue_offset)
         AS consumed_by
  FROM mq m WHERE topic = :topic AND queue_id = :queue_id AND queue_offset = :offset;

-- mqadmin printMsg -t TopicTx (-b and -e unset): of a transaction's records
-- only the committed one is in the consume queue, so only it is printed.
.parameter set :topic TopicTx
-- printMsg
SELECT m.queue_id, m.queue_offset, coalesce(m.uniq_key, m.msg_id) AS msgid, m.msg_id, m.size,
       m.sys_flag, m.flag, m.born_timestamp, m.born_host, m.store_timestamp, m.store_host,
       m.commitlog_offset, m.body_crc, m.reconsume_times, m.prepared_transaction_offset,
       m.properties, m.body
  FROM rocketmq_queues(:dir) q
  JOIN mq m ON m.topic = q.topic AND m.queue_id = q.queue_id AND m.queue_offset >= q.min_offset
 WHERE q.topic = :topic
   AND m.store_timestamp >= coalesce(:begin, 0) AND (:end IS NULL OR m.store_timestamp < :end)
 ORDER BY m.queue_id, m.queue_offset;

-- mqadmin printMsgByQueue -t TopicA -a broker-a -i 0 -f true
.parameter set :topic TopicA
-- printMsgByQueue
SELECT tags AS tag, count(*) AS count FROM mq
 WHERE topic = :topic AND queue_id = :queue_id AND queue_offset >= 0 AND trim(tags) <> ''
   AND store_timestamp >= coalesce(:begin, 0) AND (:end IS NULL OR store_timestamp < :end)
 GROUP BY tags ORDER BY count DESC, tag;

-- mqadmin topicStatus -t TopicA
-- topicStatus
SELECT q.queue_id, q.min_offset, q.max_offset, m.store_timestamp AS last_updated
  FROM rocketmq_queues(:dir) q
  LEFT JOIN mq m ON m.topic = q.topic AND m.queue_id = q.queue_id
                AND m.queue_offset = q.max_offset - 1
 WHERE q.topic = :topic ORDER BY q.queue_id;

-- mqadmin topicList -c
-- topicList
SELECT DISTINCT q.topic, o."group" AS consumer_group
  FROM rocketmq_queues(:dir) q
  LEFT JOIN rocketmq_consumer_offsets(:dir) o ON o.topic = q.topic
 ORDER BY 1, 2;

-- mqadmin consumerProgress -g GroupX
.parameter set :group GroupX
-- consumerProgress
SELECT q.topic, q.queue_id, q.max_offset AS broker_offset,
       coalesce(o.offset, 0) AS consumer_offset, q.max_offset - coalesce(o.offset, 0) AS diff,
       m.store_timestamp AS last_time,
       sum(q.max_offset - coalesce(o.offset, 0)) OVER () AS diff_total
  FROM rocketmq_queues(:dir) q
  LEFT JOIN rocketmq_consumer_offsets(:dir) o
    ON o."group" = :group AND o.topic = q.topic AND o.queue_id = q.queue_id
  LEFT JOIN mq m ON m.topic = q.topic AND m.queue_id = q.queue_id
                AND m.queue_offset = o.offset - 1
 WHERE q.topic IN (SELECT topic FROM rocketmq_consumer_offsets(:dir) WHERE "group" = :group)
 ORDER BY q.topic, q.queue_id;

-- mqadmin brokerStatus
-- brokerStatus
SELECT key, value FROM (
  SELECT CASE name WHEN 'commitlog_min_offset' THEN 'commitLogMinOffset'
                   WHEN 'commitlog_max_offset' THEN 'commitLogMaxOffset'
                   WHEN 'dispatch_behind_bytes' THEN 'dispatchBehindBytes'
                   WHEN 'disk_used_ratio' THEN 'commitLogDiskRatio'
                   WHEN 'put_count' THEN 'putMessageTimesTotal' END AS key, value
    FROM rocketmq_stats(:dir)
  UNION ALL
  SELECT 'remainHowManyDataToFlush',
         (SELECT value FROM rocketmq_stats(:dir) WHERE name = 'commitlog_max_offset')
         - (SELECT value FROM rocketmq_stats(:dir) WHERE name = 'flushed_offset')
  UNION ALL
  SELECT 'earliestMessageTimeStamp', (SELECT store_timestamp FROM mq WHERE commitlog_offset >= 0 LIMIT 1))
 WHERE key IS NOT NULL ORDER BY key;
