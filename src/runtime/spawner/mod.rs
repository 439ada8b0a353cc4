//! spawner: one small single-threaded process per runtime that forks the per-container
//! monitors and the sandbox helpers, without exec.
//!
//! Before it, every container start was a fork+exec of podvisor's 10 MB binary (`shim run`)
//! and every new pod one more (`shim sandbox`): the dynamic loader, ~14,000 relocations and
//! the binary's start-up for each, and ~0.7 MB of private memory per monitor (the relocated
//! pages among them). libcontainer clones its caller without exec, so it must run in a
//! single-threaded process, and the daemon is not one: hence a process of its own. The
//! spawner is that process, made once: `podvisor shim spawner`, exec'd by the runtime
//! ([`crate::runtime::daemon::spawner::Spawner`]) when it first needs it, connected by a
//! `SOCK_SEQPACKET` socket pair (fd 3 in the spawner). A request names a container directory and carries the monitor's
//! descriptors (ready pipe, locked lock file, `shim.log`); the spawner forks, the child
//! becomes the monitor (`monitor::run`, as if exec'd: own session, stdio, fds 3 and 4, its
//! command line rewritten to `podvisor shim run <dir>`) and the spawner answers with the
//! monitor's pid and a pidfd it opened before the child could be reaped. A sandbox request
//! works the same way: the child creates and pins the pod's namespaces
//! (`sandbox::pin_namespaces`) and writes its result on the pipe it was given. When the
//! spawner has been quiet for a moment it makes a pod's namespaces ahead of time and holds
//! them ([`spare`]): the next pod that fits takes them (`Request::TakeSpare`) and needs no
//! helper, or its helper joins them instead of making its own.
//!
//! Why fork without exec is safe here: the spawner is single-threaded for its whole life
//! (checked through `/proc/self/task` at start and before every fork), so no lock can be held
//! by another thread at the fork. Monitors share the spawner's pages copy-on-write.
//!
//! Crash safety: the spawner holds nothing a container needs. Its children run in their own
//! sessions; when it dies (or is SIGKILLed) they are re-parented (to PID 1 or a subreaper) and
//! run on, exactly as monitors did when the daemon that exec'd them died. The runtime notices
//! a dead spawner at its next request (the send fails) and execs a new one; a request the
//! spawner died in the middle of is not repeated (the caller learns the outcome from the
//! monitor's ready pipe or the helper's result pipe). The spawner ends when the runtime's end
//! of the socket closes (the daemon exits or is killed): it never outlives its daemon, so a
//! new daemon always makes a new spawner. It reaps its children (SIGCHLD on a signalfd); the
//! runtime watches monitors through their pidfds as before.

//!
//! The daemon's side is [`crate::runtime::daemon::spawner`]; the messages are in
//! [`crate::runtime::protocol`]. Here: `serve` (the loop), `child` (a forked child made
//! clean, and made a monitor), `spare` (namespaces made ahead), `spare_monitor` (a monitor
//! forked ahead).

mod child;
mod serve;
mod spare;
mod spare_monitor;
pub use serve::serve;
