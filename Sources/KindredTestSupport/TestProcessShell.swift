/// bash for the long-lived processes tests start (PostgreSQL, nats-server).
public enum TestProcessShell {
    /// Closes every descriptor above 2 of the shell it runs in. The test process's pipes are not close-on-exec:
    /// a long-lived child holding the write end of another child's pipe keeps that child from ever seeing EOF
    /// (seen: a Python helper waiting for EOF hung the whole test run), and Foundation's `Process` sees a child's
    /// exit only once the last holder of one of them ends (seen: `waitUntilExit` hung on a watcher shell). bash,
    /// since dash cannot name descriptors above 9.
    public static let closeInheritedDescriptors =
        "for fd in /proc/self/fd/*; do n=${fd##*/}; [ \"$n\" -gt 2 ] && eval \"exec $n>&-\"; done; "
}
