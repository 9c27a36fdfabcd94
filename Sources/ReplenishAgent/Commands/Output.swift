/// Command output: results on standard output, reasons on standard error, one line each, written straight
/// to the file descriptors (unbuffered, so a line is out before the process exits or is killed).
enum Output {
    static func line(_ text: String) { POSIX.writeStandard(.output, Array((text + "\n").utf8)) }

    static func error(_ text: String) { POSIX.writeStandard(.error, Array((text + "\n").utf8)) }
}
