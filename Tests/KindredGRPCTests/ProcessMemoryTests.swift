import Glibc
import KindredGRPC
import KindredGRPCServices
import Testing

@Suite("Process memory")
struct ProcessMemoryTests {
    @Test("a freed large block goes back to the kernel, not into an arena's free memory")
    func largeBlocksAreReturned() {
        ProcessMemory.returnLargeBlocksWhenFreed()
        let size = 24 << 20
        // The second round is the one glibc's default gets wrong: once it has freed one block this large it
        // raises its threshold and serves the next from an arena, which keeps it when it is freed.
        for _ in 0..<2 {
            let before = ProcessMemory.current()
            let block = malloc(size)!
            memset(block, 1, size)
            free(block)
            let after = ProcessMemory.current()
            #expect(after.heapFreeBytes - before.heapFreeBytes < size / 2)
        }
    }

    @Test("the admin port's metrics show resident memory and the heap in use and free")
    func metrics() {
        let metrics = ServerMetrics()
        ProcessMemory.attach(to: metrics)
        let text = metrics.prometheusText()
        for name in ["process_resident_memory_bytes", "process_heap_in_use_bytes", "process_heap_free_bytes"] {
            let value = text.split(separator: "\n").first { $0.hasPrefix("\(name) ") }?.split(separator: " ").last
            #expect((value.flatMap { Double($0) } ?? 0) > 0, "\(name) in \(text)")
        }
    }
}
