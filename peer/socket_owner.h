// Who is at the other end of a TCP connection on this machine (docs/peers.md "No key"): the
// user that owns the socket at the other end. A keyless agent serves its own user only, and
// a keyless coordinator talks only to its own user's agent: both look the other end up.
//
// TCP has no SO_PEERCRED (that is for Unix sockets). What the kernel does know is the owner
// (uid) of every socket, by its address and port; for the other end of a connection on this
// machine that is the socket whose local address is our remote one and whose remote address
// is our local one. It is asked through sock_diag (NETLINK_SOCK_DIAG, an exact lookup of that
// 4-tuple: what `ss` uses), else read from /proc/net/tcp and /proc/net/tcp6, which list the
// same sockets. Only a live connection counts: a socket in TIME_WAIT (its owner shown as 0)
// or a listening one is not an answer.
//
// Sound because the 4-tuple names one connection for its whole life: an end found
// established while we hold our end is the end we talk to (unless its owner handed the
// socket to another process, which is its owner's choice). The owner is the socket's
// creator's uid, in this process's user namespace.
//
// Thread-safety: pure functions of the system's state.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace cairn {

// The uid owning the other end of the connected TCP socket `fd`, when that end is on this
// machine. kNotFound when no live socket of this machine is that end (another machine, or
// it closed); kIo when neither sock_diag nor /proc/net could be read.
Result<uid_t> connection_peer_uid(int fd);

// The same through one mechanism only (for tests; connection_peer_uid tries sock_diag, then
// /proc/net when sock_diag cannot be used).
Result<uid_t> connection_peer_uid_sock_diag(int fd);
Result<uid_t> connection_peer_uid_proc(int fd);

// For a keyless end of `fd`'s connection: "" when the other end runs as this process's user,
// else one line saying whose it is (or that it cannot be told), for the log and the refusal:
// "the OTHER runs as uid 1001, not as SELF uid 1000: …" (other "coordinator", self "this
// agent's").
std::string other_user_refusal(int fd, const std::string& other, const std::string& self);

}  // namespace cairn
