#ifndef CNETSHIMS_H
#define CNETSHIMS_H
/* epoll, accept4 and socket options that Swift's Glibc module does not expose. */
#include <sys/epoll.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#endif
