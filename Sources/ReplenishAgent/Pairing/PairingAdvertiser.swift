import Logging

/// Publishes the pairing port by DNS-SD (`PairingAdvertisement`, through avahi-daemon: `AvahiAdvertisement`) while
/// the pairing window is open, and withdraws it as soon as the window says it closed (time up, or paired: the
/// token event closes the window at once, before the port's last answer is out). Without avahi-daemon the
/// device pairs as before; `status` says why it is not advertised, and it is published once the daemon
/// appears. When not even a client can be made (no system bus yet), it tries again every `retry`; an
/// advertisement that loses the system bus is dropped and made anew the same way.
struct PairingAdvertiser<C: Clock>: Sendable where C.Duration == Duration {
    let advertisement: PairingAdvertisement
    let window: AsyncStream<PairingWindowKeeper<C>.State>
    let shown: ShownStatusBook
    /// Where the host name the daemon publishes is kept for the pairing server's Host check.
    var publishedHostName = PublishedHostName()
    let logger: Logger
    var retry: Duration = .seconds(10)

    private enum Event: Sendable {
        case window(open: Bool)
        /// A change of the advertisement made by the `generation`th start (an older one's late change is stale).
        case avahi(AvahiAdvertisement.Change, generation: Int)
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
        var generation = 0
        // libavahi-client stays loaded while the window is open, and is unloaded once it closed and its
        // advertisement stopped: a device paired in this run maps none of it after.
        var holding = false
        func start() async {
            if !holding { holding = await AvahiAdvertisement.holdLibrary() }
            generation += 1
            let made = generation
            do {
                current = try await AvahiAdvertisement.start(
                    name: advertisement.name, type: PairingAdvertisement.serviceType, port: advertisement.port,
                    txt: advertisement.txt, onChange: { sink.yield(.avahi($0, generation: made)) })
            } catch {
                // The agent is stopping: nothing to say or to try again.
                if Task.isCancelled { return }
                // Said once per reason, not at every try (every `retry` while the window is open).
                if error.message != lastFailure {
                    logger.warning("pairing port not advertised by DNS-SD", metadata: ["error": "\(error.message)"])
                }
                lastFailure = error.message
                await shown.recordAdvertisement(AdvertisementStatus.notAdvertised(error.message))
                let wait = retry
                retrying = Task {
                    try? await ContinuousClock().loopSleep(for: wait)
                    sink.yield(.retry)
                }
            }
        }
        func stop() async {
            retrying?.cancel()
            retrying = nil
            lastFailure = nil
            if let running = current {
                current = nil
                await withdraw(running)
            }
            if holding {
                holding = false
                AvahiAdvertisement.releaseLibrary()
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
            case .avahi(let change, let made):
                guard open, let running = current, made == generation else { continue }
                if case .ended(let reason) = change {
                    logger.warning(
                        "pairing port no longer advertised by DNS-SD: the system bus went away; advertised anew",
                        metadata: ["error": "\(reason)"])
                    current = nil
                    await withdraw(running)
                    await start()
                } else {
                    await record(change)
                }
            }
        }
        await stop()
    }

    /// Stops `running`, which withdraws it (at most `AvahiAdvertisement.stopBound`).
    private func withdraw(_ running: AvahiAdvertisement) async {
        if await running.stop() {
            logger.info("pairing port withdrawn from DNS-SD")
        } else {
            // Avahi's thread waits for the daemon; the lane frees the client once it returns, and the client's
            // end (or the agent's exit, which closes its connection) withdraws the service.
            logger.warning("pairing port's DNS-SD withdrawal left to Avahi's thread: avahi-daemon does not answer")
        }
    }

    private func record(_ change: AvahiAdvertisement.Change) async {
        switch change {
        case .advertised(let hostName):
            publishedHostName.set(hostName)
            logger.info(
                "pairing port advertised by DNS-SD",
                metadata: [
                    "dnssd.type": "\(PairingAdvertisement.serviceType)", "dnssd.port": "\(advertisement.port)",
                    "dnssd.host": "\(hostName ?? "?")",
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
        case .ended:
            break  // `run` makes a new advertisement.
        }
    }
}
