#ifndef KINDRED_CLIBPQ_SHIM_H
#define KINDRED_CLIBPQ_SHIM_H
#include <libpq-fe.h>
// How KindredPostgres waits on libpq's sockets (PostgresPoller): epoll, and an eventfd to wake the poller.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif
