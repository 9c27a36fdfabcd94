/// The time-sync signal the agent waits for, and whether anything on this system gives it: what `check-config`
/// says, so that a board without systemd-timesyncd (chrony, ntpd, busybox's ntpd, a battery clock alone) is
/// found before its first power cut, not after. Files only; nothing is run.
struct TimeSyncSignal: Sendable {
    /// systemd runs as the init system (`/run/systemd/system` exists: `sd_booted()`'s test). Without it no unit
    /// ever starts, timesyncd's included (a container, a chroot, a board with another init).
    var systemdRunning: Bool
    /// systemd-timesyncd's program is installed.
    var timesyncdInstalled: Bool
    /// Its unit is masked (a link to /dev/null): it never runs.
    var timesyncdMasked: Bool
    /// The other NTP clients found, by program name (they do not create the marker themselves).
    var otherClients: [String]
    /// The marker exists now.
    var markerPresent: Bool

    static let otherClientPrograms = [
        "chronyd": ["/usr/sbin/chronyd"], "ntpd": ["/usr/sbin/ntpd"], "openntpd": ["/usr/sbin/openntpd"],
    ]

    /// What the files under `root` (`""`: this system) say.
    static func inspect(root: String = "") -> TimeSyncSignal {
        let installed = ["/usr/lib/systemd/systemd-timesyncd", "/lib/systemd/systemd-timesyncd"].contains {
            POSIX.exists(root + $0)
        }
        let unit = (try? POSIX.status(root + "/etc/systemd/system/systemd-timesyncd.service")) ?? nil
        let others = otherClientPrograms.keys.sorted().filter { name in
            otherClientPrograms[name, default: []].contains { POSIX.exists(root + $0) }
        }
        return TimeSyncSignal(
            systemdRunning: POSIX.exists(root + "/run/systemd/system"), timesyncdInstalled: installed,
            timesyncdMasked: unit?.kind == .characterDevice, otherClients: others,
            markerPresent: POSIX.exists(root + WallClock.timesyncMarker))
    }

    /// Something on this system creates the marker (as far as files tell: timesyncd installed and not masked,
    /// under a running systemd).
    var isProvided: Bool { systemdRunning && timesyncdInstalled && !timesyncdMasked }

    /// One line for `check-config`.
    var description: String {
        var line =
            "time sync: an order whose answer was lost in an earlier boot is resent only once \(WallClock.timesyncMarker) "
            + "exists, and parked once it is shown over a day old; "
        if isProvided {
            line += "systemd-timesyncd creates it"
        } else {
            let why =
                !timesyncdInstalled
                ? "systemd-timesyncd is not installed"
                : timesyncdMasked
                    ? "systemd-timesyncd is masked"
                    : "systemd is not the init system here, so systemd-timesyncd never runs"
            line += "nothing here creates it (\(why))"
            if !otherClients.isEmpty {
                line += "; \(otherClients.joined(separator: ", ")) found: have it create the file once it has "
                line += "synchronised the clock (/usr/share/doc/replenish-agent/docs/time-sync.md)"
            }
        }
        return line + "; now \(markerPresent ? "present" : "absent")"
    }
}
