/// A stream of what a transport does (``CachedTransport/events()``): each ``CacheEvent`` in the
/// order the transport acted.
///
/// ```swift
/// for await event in transport.events() {
///     print(event)
/// }
/// ```
///
/// It behaves as an `AsyncStream` made with `.bufferingNewest(limit)`: it holds at most
/// ``CachedTransport/Configuration/StayingCurrent/changeBufferLimit`` events its consumer has not
/// taken, dropping the oldest, and the transport never waits for it. It ends, and unregisters,
/// when its consumer's task is cancelled while waiting for an event, or when the stream and its
/// iterator are dropped; when the transport goes away it ends after the events it holds. Iterate
/// it from one task at a time.
///
/// It is its own type rather than an `AsyncStream`, so that an event costs what handing it over
/// costs: an `AsyncStream` runs generic code that looks its element's types up at run time, twice
/// per event, which cost a hit with one listener more than the hit itself.
public struct CacheEvents: AsyncSequence, Sendable {
    /// Each element is one thing the transport did.
    public typealias Element = CacheEvent
    /// The stream never fails: it ends.
    public typealias Failure = Never

    /// Ends the stream when the last copy of it or of its iterator goes.
    private let lifetime: Lifetime

    init(_ inbox: EventInbox) {
        lifetime = Lifetime(inbox)
    }

    /// An iterator over the events; iterate from one task at a time.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(lifetime: lifetime)
    }

    /// Takes the events of a ``CacheEvents`` in order.
    public struct AsyncIterator: AsyncIteratorProtocol {
        /// Each element is one thing the transport did.
        public typealias Element = CacheEvent
        /// The stream never fails: it ends.
        public typealias Failure = Never

        fileprivate let lifetime: Lifetime

        /// The next event, waiting for one; nil once the stream has ended.
        public mutating func next() async -> CacheEvent? {
            await lifetime.inbox.next()
        }

        /// The next event, waiting for one; nil once the stream has ended.
        @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
        public mutating func next(isolation actor: isolated (any Actor)?) async -> CacheEvent? {
            await lifetime.inbox.next()
        }
    }

    /// Owned by the stream and its iterators, never by the transport: its end is theirs.
    fileprivate final class Lifetime: Sendable {
        let inbox: EventInbox

        init(_ inbox: EventInbox) {
            self.inbox = inbox
        }

        deinit {
            inbox.finish()
        }
    }
}

/// The events a ``CacheEvents`` stream holds for its consumer, and the consumer waiting for one:
/// the stream's inlet, to which ``TransportEvents`` sends.
final class EventInbox: StreamSink {
    private struct State {
        /// Undelivered events, oldest first from `head`.
        var events: [CacheEvent] = []
        var head = 0
        /// The consumer suspended in ``next()``, waiting for an event.
        var waiter: UnsafeContinuation<CacheEvent?, Never>?
        var isFinished = false
        var ended: (@Sendable () -> Void)?

        var held: Int { events.count - head }

        mutating func take() -> CacheEvent? {
            guard head < events.count else { return nil }
            let event = events[head]
            head += 1
            if head == events.count {
                events.removeAll(keepingCapacity: true)
                head = 0
            }
            return event
        }

        mutating func hold(_ event: CacheEvent, limit: Int) {
            if held == limit { head += 1 }
            // Reclaims the taken or dropped slots once they are as many as the held ones.
            if head > 0, head >= held {
                events.removeFirst(head)
                head = 0
            }
            events.append(event)
        }
    }

    private let state = Locked(State())
    /// How many undelivered events it holds at most.
    private let limit: Int

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    func send(_ event: sending CacheEvent) {
        let waiter = state.withLock { state -> UnsafeContinuation<CacheEvent?, Never>? in
            guard !state.isFinished else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.hold(event, limit: limit)
            return nil
        }
        waiter?.resume(returning: event)
    }

    func finish() {
        let (waiter, ended) = state.withLock { state -> Ending in
            guard !state.isFinished else { return (nil, nil) }
            state.isFinished = true
            defer {
                state.waiter = nil
                state.ended = nil
            }
            return (state.waiter, state.ended)
        }
        waiter?.resume(returning: nil)
        ended?()
    }

    private typealias Ending = (waiter: UnsafeContinuation<CacheEvent?, Never>?, ended: (@Sendable () -> Void)?)

    func onEnd(_ ended: @escaping @Sendable () -> Void) {
        let hasEnded = state.withLock { state in
            if !state.isFinished { state.ended = ended }
            return state.isFinished
        }
        if hasEnded { ended() }
    }

    /// The oldest undelivered event, waiting for one when there is none; nil once finished and
    /// empty. Cancelling the waiting task ends the stream.
    func next() async -> CacheEvent? {
        // A consumer behind the transport takes what is held without suspending.
        let ready = state.withLock { state -> CacheEvent?? in
            if let event = state.take() { return .some(event) }
            return state.isFinished ? .some(nil) : nil
        }
        if let ready { return ready }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<CacheEvent?, Never>) in
                let ready = state.withLock { state -> CacheEvent?? in
                    if let event = state.take() { return .some(event) }
                    if state.isFinished { return .some(nil) }
                    precondition(state.waiter == nil, "a CacheEvents stream is iterated from two tasks at once")
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            finish()
        }
    }
}
