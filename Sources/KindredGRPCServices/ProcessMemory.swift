import CMalloc
import CoreMetrics
import Foundation
import KindredGRPC

/// The process's memory as the kernel and as glibc's allocator see it. A resident set that grows while the bytes
/// in use stay flat is memory the allocator keeps after it was freed (fragmented arenas), not a leak.
public struct ProcessMemory: Sendable, Equatable {
    /// Resident set size (`/proc/self/statm`), bytes; 0 where unreadable.
    public var residentBytes: Int
    /// Bytes allocated and not yet freed: arena chunks in use plus blocks mapped on their own.
    public var heapInUseBytes: Int
    /// Free bytes the allocator holds in its arenas rather than giving back to the kernel.
    public var heapFreeBytes: Int

    /// Now.
    public static func current() -> ProcessMemory {
        let info = mallinfo2()
        return ProcessMemory(
            residentBytes: Self.residentBytes(),
            heapInUseBytes: Int(info.uordblks + info.hblkhd),
            heapFreeBytes: Int(info.fordblks)
        )
    }

    /// Makes glibc's allocator give every block of `threshold` bytes or more its own mapping, unmapped when it is
    /// freed. By default glibc raises that threshold by itself (up to 32 MiB) once such a block is freed, and
    /// large blocks then come from the arenas, which keep their peak as free memory: an auth server that hashed a
    /// few passwords at once (19 MiB each) held 58 MiB it no longer used for the rest of its life. A fixed
    /// threshold also fixes the arenas' trim threshold (glibc stops adjusting both), so a freed top of an arena
    /// goes back to the kernel too.
    public static func returnLargeBlocksWhenFreed(threshold: Int = 1 << 20) {
        _ = mallopt(M_MMAP_THRESHOLD, Int32(threshold))
    }

    /// Resident set size now (`/proc/self/statm`), bytes; 0 where unreadable.
    public static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Gauges `process_resident_memory_bytes`, `process_heap_in_use_bytes` and `process_heap_free_bytes`,
    /// sampled whenever `metrics` samples (every scrape of the admin port).
    public static func attach(to metrics: ServerMetrics) {
        let resident = Gauge(label: "process_resident_memory_bytes", factory: metrics.factory)
        let inUse = Gauge(label: "process_heap_in_use_bytes", factory: metrics.factory)
        let free = Gauge(label: "process_heap_free_bytes", factory: metrics.factory)
        metrics.addSampler {
            let memory = ProcessMemory.current()
            resident.record(memory.residentBytes)
            inUse.record(memory.heapInUseBytes)
            free.record(memory.heapFreeBytes)
        }
    }
}
