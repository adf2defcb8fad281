import Foundation

/// Which decoded value of an entry: the type and the decoder instance.
struct DecodedValueKey: Hashable, Sendable {
    let type: ObjectIdentifier
    let decoder: ObjectIdentifier

    init<Value>(_ type: Value.Type, decoder: any ResponseDecoding) {
        self.type = ObjectIdentifier(type)
        self.decoder = ObjectIdentifier(decoder)
    }
}

/// A decoded value held by an entry.
///
/// The typed subclass is reached with one unchecked downcast, since the key already names the
/// type. It keeps its decoder alive, so that the decoder's identity in ``DecodedValueKey`` cannot
/// be taken by a new decoder with other settings while the value lives.
///
/// `@unchecked Sendable`: every stored property is an immutable `let` of a Sendable type; the class
/// is not final only so that ``DecodedValue`` can carry the value.
class AnyDecodedValue: @unchecked Sendable {
    /// The bytes the value was decoded from.
    let data: Data
    let decoder: any ResponseDecoding

    init(data: Data, decoder: any ResponseDecoding) {
        self.data = data
        self.decoder = decoder
    }

    /// What a decoded value is charged against the byte budget beyond its body: the box, the
    /// table slot and the decoder reference.
    static let overhead = 64
}

final class DecodedValue<Value: Sendable>: AnyDecodedValue, @unchecked Sendable {
    // `@unchecked` for the same reason as the base class: `value` is an immutable `let` of a
    // Sendable type.
    let value: Value

    init(_ value: Value, data: Data, decoder: any ResponseDecoding) {
        self.value = value
        super.init(data: data, decoder: decoder)
    }
}

/// What an entry holds for one ``DecodedValueKey``.
enum DecodedSlot {
    /// One caller is decoding; the others wait here.
    case decoding(waiters: [CheckedContinuation<DecodeOutcome, Never>])
    /// Decoded, and charged `cost` bytes against the budget.
    case decoded(AnyDecodedValue, cost: Int)

    var isDecoded: Bool {
        if case .decoded = self { return true }
        return false
    }

    var cost: Int {
        if case .decoded(_, let cost) = self { return cost }
        return 0
    }
}

/// What a caller waiting for another caller's decode gets.
enum DecodeOutcome: Sendable {
    case decoded(AnyDecodedValue)
    case failed(any Error)
    /// Nothing to wait for any more: claim the decode again.
    case retry
}

extension MemoryURLCache {
    enum DecodedLookup {
        /// `revalidate`: the entry is within its stale-while-revalidate window.
        case decoded(AnyDecodedValue, revalidate: Bool)
        /// An entry is stored, without a value decoded for the key.
        case stored(StoredResponse, revalidate: Bool)
        case missing
    }

    /// The decoded value for `valueKey` of the entry `key` would be answered from, or that entry,
    /// counting the lookup as a request and, when an entry is found, as a hit.
    /// - Complexity: O(1): two hash lookups under the lock.
    func decodedLookup(
        for key: CacheKey,
        headers: [String: String]?,
        at instant: ContinuousClock.Instant?,
        valueKey: DecodedValueKey
    ) -> DecodedLookup {
        state.withLock { state in
            state.statistics.requests += 1
            var found: StoredResponse?
            var revalidate = false
            _ = state.entries.value(forKey: key) { variants in
                guard let match = variants.match(headers) else { return false }
                if let instant, let expiresAt = match.expiresAt, instant >= expiresAt {
                    guard let staleUntil = match.staleUntil, instant < staleUntil else { return false }
                    revalidate = true
                }
                found = match
                return true
            }
            guard let found else { return .missing }
            state.statistics.memoryHits += 1
            if revalidate { state.statistics.staleWindowAnswers += 1 }
            if case .decoded(let value, _)? = found.decoded[valueKey] {
                state.statistics.decodedHits += 1
                return .decoded(value, revalidate: revalidate)
            }
            return .stored(found, revalidate: revalidate)
        }
    }

    enum DecodeClaim {
        case decoded(AnyDecodedValue)
        /// The caller decodes, then calls ``finishDecode(_:on:for:with:)``.
        case claimed
        /// Another caller is decoding.
        case busy
    }

    /// Claims the decode of `valueKey` for `entry`, unless it is done or under way.
    func claimDecode(_ valueKey: DecodedValueKey, on entry: StoredResponse) -> DecodeClaim {
        state.withLock { state in
            switch entry.decoded[valueKey] {
            case .decoded(let value, _)?:
                state.statistics.decodedHits += 1
                return .decoded(value)
            case .decoding?:
                return .busy
            case nil:
                entry.decoded[valueKey] = .decoding(waiters: [])
                return .claimed
            }
        }
    }

    /// Adds `waiter` to the decode of `valueKey` under way for `entry`.
    /// - Returns: nil when added (the decoding caller resumes it); otherwise what to resume it
    ///   with at once: the value when the decode finished in between, or ``DecodeOutcome/retry``
    ///   when it failed in between and was not kept.
    func waitForDecode(
        _ valueKey: DecodedValueKey,
        on entry: StoredResponse,
        waiter: CheckedContinuation<DecodeOutcome, Never>
    ) -> DecodeOutcome? {
        state.withLock { state in
            switch entry.decoded[valueKey] {
            case .decoding(var waiters)?:
                waiters.append(waiter)
                entry.decoded[valueKey] = .decoding(waiters: waiters)
                return nil
            case .decoded(let value, _)?:
                state.statistics.decodedHits += 1
                return .decoded(value)
            case nil:
                return .retry
            }
        }
    }

    /// Ends the decode of `valueKey` for `entry` that ``claimDecode(_:on:)`` granted.
    ///
    /// A decoded value is kept, and charged its body's byte count plus
    /// ``AnyDecodedValue/overhead`` against the budget (evicting least recently used entries if
    /// needed), when `entry` is still the one stored for `key` and the charge fits within the
    /// capacity. A failure is not kept.
    /// - Returns: the callers that waited for this decode, to be resumed outside the lock.
    func finishDecode(
        _ valueKey: DecodedValueKey,
        on entry: StoredResponse,
        for key: CacheKey,
        with result: Result<AnyDecodedValue, any Error>
    ) -> [CheckedContinuation<DecodeOutcome, Never>] {
        state.withLock { state in
            guard case .decoding(let waiters)? = entry.decoded[valueKey] else { return [] }
            entry.decoded[valueKey] = nil
            if case .success(let value) = result, state.holds(entry, for: key) {
                let cost = entry.data.count + AnyDecodedValue.overhead
                if let evicted = state.entries.addCost(cost, forKey: key) {
                    entry.decoded[valueKey] = .decoded(value, cost: cost)
                    state.statistics.evictions += evicted
                    state.syncGauges()
                }
            }
            return waiters
        }
    }
}
