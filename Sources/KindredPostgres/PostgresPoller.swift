internal import CLibpq
import Foundation
import Synchronization

#if canImport(Glibc)
    internal import Glibc
#endif

/// One thread per ``PostgresClient`` that waits (epoll) on the sockets of the client's connections with a statement
/// in flight and reads their results as they arrive, so that a statement costs no hand-off to a thread before its
/// round trip: the caller sends it (libpq non-blocking), the poller reads the answer and resumes the caller.
///
/// A connection registers its socket with a ``Waiter`` for one operation at a time (one-shot: the poller re-arms
/// it while the waiter asks for more). The waiter's `step` runs on the poller's thread with exclusive use of the
/// connection; it returns `.finished(resume)` once the operation's last result is read, and the poller forgets the
/// waiter before it calls `resume`, so that the connection's next operation may register at once.
final class PostgresPoller: @unchecked Sendable {
    // Safety: `epollFD` and `wakeFD` are fixed after init; `waiters` is behind its mutex; the thread owns the rest.

    /// What one operation does when its socket is ready.
    struct Waiter: Sendable {
        /// Called on the poller's thread when the socket is ready (`readable`: input or an error/hang-up).
        var step: @Sendable (_ readable: Bool) -> Next
        /// Called instead when the poller stops with the operation still waiting.
        var abandon: @Sendable () -> Void
    }

    enum Next {
        /// Wait for input again (and for room to write, while output is pending).
        case wait(writable: Bool)
        /// Done: the poller forgets the waiter, then calls this.
        case finished(@Sendable () -> Void)
    }

    private let epollFD: Int32
    private let wakeFD: Int32
    private let waiters = Mutex<[Int32: Waiter]>([:])
    private let stopped = Atomic<Bool>(false)

    /// nil when epoll or eventfd cannot be had (the connections then wait on the thread pool as before).
    init?() {
        let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { return nil }
        let wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard wakeFD >= 0 else {
            close(epollFD)
            return nil
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeFD
        guard epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event) == 0 else {
            close(epollFD)
            close(wakeFD)
            return nil
        }
        self.epollFD = epollFD
        self.wakeFD = wakeFD
        let thread = Thread { [self] in
            // Foundation's `Thread.name` set before start names the Thread object, not the OS thread: without this the
            // poller shows in top and perf under its creator's name.
            kindred_name_thread("PG-poll")
            self.loop()
        }
        thread.start()
    }

    /// Waits for `fd` to be readable (and writable with `writable`), then runs `waiter`'s step on the poller's thread.
    /// False when the poller is stopped or the socket cannot be watched: the caller finishes the operation itself.
    func watch(_ fd: Int32, writable: Bool, _ waiter: Waiter) -> Bool {
        let accepted = self.waiters.withLock { waiters -> Bool in
            guard !self.stopped.load(ordering: .acquiring) else { return false }
            waiters[fd] = waiter
            return true
        }
        guard accepted else { return false }
        guard self.arm(fd, writable: writable) else {
            // The caller finishes the operation, unless a stopping loop took the waiter meanwhile: it abandons it, and
            // the operation must not end twice.
            return self.waiters.withLock { $0.removeValue(forKey: fd) } == nil
        }
        return true
    }

    /// Stops the thread; operations still waiting are abandoned.
    func stop() {
        guard !self.stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var one: UInt64 = 1
        _ = write(self.wakeFD, &one, MemoryLayout<UInt64>.size)
    }

    private func arm(_ fd: Int32, writable: Bool) -> Bool {
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLONESHOT.rawValue | (writable ? EPOLLOUT.rawValue : 0)
        event.data.fd = fd
        if epoll_ctl(self.epollFD, EPOLL_CTL_MOD, fd, &event) == 0 { return true }
        guard errno == ENOENT else { return false }
        return epoll_ctl(self.epollFD, EPOLL_CTL_ADD, fd, &event) == 0
    }

    private func loop() {
        var events = [epoll_event](repeating: epoll_event(), count: 64)
        while !self.stopped.load(ordering: .acquiring) {
            let count = epoll_wait(self.epollFD, &events, Int32(events.count), -1)
            if count < 0 {
                if errno == EINTR { continue }
                break
            }
            for index in 0..<Int(count) {
                let fd = events[index].data.fd
                if fd == self.wakeFD { continue }
                guard let waiter = self.waiters.withLock({ $0[fd] }) else { continue }
                let readable = events[index].events & (EPOLLIN.rawValue | EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0
                switch waiter.step(readable) {
                case .wait(let writable):
                    if !self.arm(fd, writable: writable) {
                        // The socket cannot be watched any more (closed under the operation): give it up.
                        _ = self.waiters.withLock { $0.removeValue(forKey: fd) }
                        waiter.abandon()
                    }
                case .finished(let resume):
                    _ = self.waiters.withLock { $0.removeValue(forKey: fd) }
                    resume()
                }
            }
        }
        let left = self.waiters.withLock { waiters in
            defer { waiters.removeAll() }
            return Array(waiters.values)
        }
        for waiter in left { waiter.abandon() }
    }

    // The descriptors close with the object, not when the loop ends: `stop()` may still be writing to `wakeFD` after
    // the loop saw `stopped` (woken by a socket meanwhile), and a number closed there could already name another file.
    deinit {
        close(self.epollFD)
        close(self.wakeFD)
    }
}

/// Where an operation the poller drives stands after a step.
enum PolledStep<Output: Sendable> {
    /// Wait until the socket is readable again (or writable, while output is pending).
    case waiting(writable: Bool)
    case finished(Result<Output, PostgresError>)
}

/// An operation sent with libpq's non-blocking calls whose results are read step by step as the socket allows: the
/// first step on the caller's thread, the next ones on the poller's (or, without a poller, on a pool thread that waits
/// in `poll(2)` between steps). Never stepped on two threads at once.
protocol PolledOperation: AnyObject, Sendable {
    associatedtype Output: Sendable
    /// Flushes pending output, takes input when `readable`, and reads every result libpq can give without blocking.
    func step(readable: Bool) -> PolledStep<Output>
}
