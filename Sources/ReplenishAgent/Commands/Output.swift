#if canImport(Glibc)
    import Glibc
#endif

/// Command output: results on standard output, reasons on standard error, one line each, written straight
/// to the file descriptors (unbuffered, so a line is out before the process exits or is killed).
enum Output {
    static func line(_ text: String) { write(to: 1, text + "\n") }

    static func error(_ text: String) { write(to: 2, text + "\n") }

    private static func write(to fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeMutableBytes { buffer in
                POSIX.retryingEINTR { Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset) }
            }
            if count <= 0 { return }
            offset += count
        }
    }
}
