import Foundation
import KindredProto

#if canImport(Glibc)
import Glibc
#endif

/// A readers-writer lock (pthread): many readers at once, one writer. Decks are synchronous CPU work, so
/// readers hold it without suspending, and both cores serve decks at the same time (an actor would serialise
/// them on one).
final class ReadersWriterLock: @unchecked Sendable {
    private let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)

    init() {
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        // Writers first: a steady stream of decks must not starve event application.
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(self.lock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
    }

    deinit {
        pthread_rwlock_destroy(self.lock)
        self.lock.deallocate()
    }

    func read<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(self.lock)
        defer { pthread_rwlock_unlock(self.lock) }
        return try body()
    }

    func write<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(self.lock)
        defer { pthread_rwlock_unlock(self.lock) }
        return try body()
    }
}
