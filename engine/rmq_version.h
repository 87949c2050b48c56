/*
** rmq_version.h: the version of sqlite-rocketmq, as rocketmq_version()
** returns it.
*/
#ifndef RMQ_VERSION_H
#define RMQ_VERSION_H

#define RMQ_VERSION "0.1.0"

#endif
