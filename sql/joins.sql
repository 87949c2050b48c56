-- joins.sql: messages next to ordinary tables.
.load build/rocketmq
.mode box
CREATE VIRTUAL TABLE mq USING rocketmq(dir='build/demo-store');
CREATE TEMP TABLE customers(order_key TEXT PRIMARY KEY, name TEXT);
INSERT INTO customers VALUES ('order-1001', 'ada'), ('order-1002', 'bob');

-- Each customer's messages, found through the index by key.
SELECT c.name, m.tags, m.body_text
  FROM customers c JOIN mq m ON m.topic = 'Orders' AND m.key = c.order_key
 ORDER BY c.name, m.commitlog_offset;

-- Messages per topic and tag (a scan of the commit log).
SELECT topic, tags, count(*) AS messages, sum(size) AS bytes
  FROM mq GROUP BY topic, tags ORDER BY topic, tags;
