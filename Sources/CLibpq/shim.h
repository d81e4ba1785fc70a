#ifndef KINDRED_CLIBPQ_SHIM_H
#define KINDRED_CLIBPQ_SHIM_H
#include <libpq-fe.h>
// How KindredPostgres waits on libpq's sockets (PostgresPoller): epoll, and an eventfd to wake the poller.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <pthread.h>
// Names the calling thread (the poller's, as top and perf show it): pthread_setname_np is a GNU extension, declared
// here whatever the feature macros were when pthread.h came in.
int pthread_setname_np(pthread_t thread, const char *name);
static inline void kindred_name_thread(const char *name) { (void)pthread_setname_np(pthread_self(), name); }
#endif
