import NIOCore

/// Runs a task's jobs on a NIO event loop, so handlers start and resume on their connection's loop
/// without a thread hop per call. Work that blocks (libpq, Argon2) must not run here; services move it
/// to a thread pool of their own.
final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    // `EventLoop` is Sendable; the class holds no other state.
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        self.eventLoop.execute {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}
