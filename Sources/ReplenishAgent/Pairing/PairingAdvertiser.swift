import Logging

/// Publishes the pairing port by DNS-SD (`PairingAdvertisement`, through avahi-daemon: `AvahiAdvertisement`) while
/// the pairing window is open, and withdraws it as soon as the window says it closed (time up, or paired: the
/// token event closes the window at once, before the port's last answer is out). Without avahi-daemon the
/// device pairs as before; `status` says why it is not advertised, and it is published once the daemon
/// appears. When not even a client can be made (no system bus yet), it tries again every `retry`.
struct PairingAdvertiser<C: Clock>: Sendable where C.Duration == Duration {
    let advertisement: PairingAdvertisement
    let window: AsyncStream<PairingWindowKeeper<C>.State>
    let shown: ShownStatusBook
    let logger: Logger
    var retry: Duration = .seconds(10)

    private enum Event: Sendable {
        case window(open: Bool)
        case avahi(AvahiAdvertisement.Change)
        case retry
    }

    func run() async {
        let (events, sink) = AsyncStream.makeStream(of: Event.self)
        let forward = Task {
            for await state in window { sink.yield(.window(open: state.open)) }
            sink.finish()
        }
        defer { forward.cancel() }
        var open = false
        var current: AvahiAdvertisement?
        var retrying: Task<Void, Never>?
        var lastFailure: String?
        func start() async {
            do {
                current = try await AvahiAdvertisement.start(
                    name: advertisement.name, type: PairingAdvertisement.serviceType, port: advertisement.port,
                    txt: advertisement.txt, onChange: { sink.yield(.avahi($0)) })
            } catch {
                // Said once per reason, not at every try (every `retry` while the window is open).
                if error.message != lastFailure {
                    logger.warning("pairing port not advertised by DNS-SD", metadata: ["error": "\(error.message)"])
                }
                lastFailure = error.message
                await shown.recordAdvertisement(AdvertisementStatus.notAdvertised(error.message))
                let wait = retry
                retrying = Task {
                    try? await Task.sleep(for: wait)
                    sink.yield(.retry)
                }
            }
        }
        func stop() async {
            retrying?.cancel()
            retrying = nil
            lastFailure = nil
            if let running = current {
                await running.stop()
                current = nil
                logger.info("pairing port withdrawn from DNS-SD")
            }
            await shown.recordAdvertisement(nil)
        }
        for await event in events {
            switch event {
            case .window(let isOpen):
                guard isOpen != open else { continue }
                open = isOpen
                if open { await start() } else { await stop() }
            case .retry:
                if open && current == nil { await start() }
            case .avahi(let change):
                guard open, current != nil else { continue }
                await record(change)
            }
        }
        await stop()
    }

    private func record(_ change: AvahiAdvertisement.Change) async {
        switch change {
        case .advertised:
            logger.info(
                "pairing port advertised by DNS-SD",
                metadata: [
                    "dnssd.type": "\(PairingAdvertisement.serviceType)", "dnssd.port": "\(advertisement.port)",
                ])
            await shown.recordAdvertisement(AdvertisementStatus.advertised(port: advertisement.port))
        case .registering:
            break
        case .waitingForDaemon:
            logger.warning(
                "pairing port not advertised by DNS-SD: no avahi-daemon; published as soon as one starts")
            await shown.recordAdvertisement(AdvertisementStatus.notAdvertised(AdvertisementStatus.waitingForDaemon))
        case .failed(let reason):
            logger.warning("pairing port not advertised by DNS-SD", metadata: ["error": "\(reason)"])
            await shown.recordAdvertisement(AdvertisementStatus.notAdvertised("avahi-daemon: \(reason)"))
        }
    }
}
